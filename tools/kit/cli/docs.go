package cli

import (
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// Markdown renders app's command line for docs/cli.md: usage, description,
// the flags with their environment variables and defaults, and every
// command with its own flags. It is generated, never written by hand, so
// the page cannot drift from the binary (see DocSection).
func Markdown(app *ucli.App) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n%s.\n\n", app.Name, upperFirst(app.Usage))
	if app.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", oneParagraph(app.Description))
	}
	args := app.ArgsUsage
	if len(visibleCommands(app.Commands)) > 0 {
		args = "<command> [command options]"
		if app.ArgsUsage != "" {
			args += " | " + app.ArgsUsage
		}
	}
	fmt.Fprintf(&b, "```\n%s [options] %s\n```\n\n", app.Name, strings.TrimSpace(args))
	flagTable(&b, app.VisibleFlags())
	for _, c := range visibleCommands(app.Commands) {
		fmt.Fprintf(&b, "### %s %s\n\n", app.Name, strings.TrimSpace(c.Name+" "+c.ArgsUsage))
		fmt.Fprintf(&b, "%s.\n\n", upperFirst(c.Usage))
		if c.Description != "" {
			fmt.Fprintf(&b, "%s\n\n", oneParagraph(c.Description))
		}
		// The knob flags repeated on every command are the app's (above).
		var own []ucli.Flag
		for _, f := range c.VisibleFlags() {
			if !appHas(app, f) {
				own = append(own, f)
			}
		}
		flagTable(&b, own)
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func visibleCommands(cmds []*ucli.Command) []*ucli.Command {
	var out []*ucli.Command
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" {
			out = append(out, c)
		}
	}
	return out
}

func appHas(app *ucli.App, f ucli.Flag) bool {
	for _, g := range app.Flags {
		if g.Names()[0] == f.Names()[0] {
			return true
		}
	}
	return false
}

func flagTable(b *strings.Builder, flags []ucli.Flag) {
	if len(flags) == 0 {
		return
	}
	b.WriteString("| Flag | Environment | Default | Meaning |\n|---|---|---|---|\n")
	for _, f := range flags {
		names := f.Names()
		spelled := make([]string, len(names))
		for i, n := range names {
			if len(n) == 1 {
				spelled[i] = "`-" + n + "`"
			} else {
				spelled[i] = "`--" + n + "`"
			}
		}
		env, def, usage := "", "", ""
		if d, ok := f.(ucli.DocGenerationFlag); ok {
			usage = d.GetUsage()
			if vars := d.GetEnvVars(); len(vars) > 0 {
				env = "`" + strings.Join(vars, "`, `") + "`"
			}
			def = d.GetDefaultText()
			if def == "" {
				def = d.GetValue()
			}
		}
		if def == "false" || def == `""` {
			def = ""
		}
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", strings.Join(spelled, ", "), env, def, strings.ReplaceAll(usage, "|", "\\|"))
	}
	b.WriteString("\n")
}

func oneParagraph(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func upperFirst(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Doc section markers in docs/cli.md.
func markers(name string) (string, string) {
	return "<!-- BEGIN " + name + " (generated: task docs) -->\n", "<!-- END " + name + " -->\n"
}

// DocSection returns the generated section for name in the page at path,
// "" when it has none.
func DocSection(path, name string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	begin, end := markers(name)
	s := string(b)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return "", nil
	}
	return s[i+len(begin) : j], nil
}

// WriteDocSection replaces (or appends) name's section of the page at path.
func WriteDocSection(path, name, content string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := markers(name)
	s := string(b)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		s = strings.TrimRight(s, "\n") + "\n\n" + begin + content + end
	} else {
		s = s[:i+len(begin)] + content + s[j:]
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// CheckDoc compares the section of page (docs/cli.md) for app with what
// app renders (Markdown), and rewrites the section instead when update is
// set (KROPS_UPDATE_DOCS=1 in each binary's test, what `task docs` sets).
func CheckDoc(app *ucli.App, page string, update bool) error {
	want := Markdown(app)
	if update {
		return WriteDocSection(page, app.Name, want)
	}
	got, err := DocSection(page, app.Name)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s's section of %s is stale: run `tools/task.sh docs` and commit the result.\nwant:\n%s\ngot:\n%s", app.Name, page, want, got)
	}
	return nil
}
