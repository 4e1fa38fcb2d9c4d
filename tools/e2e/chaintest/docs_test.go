package chaintest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Every command in a fenced shell block of the README and docs/ names
// something that exists: a task (Taskfile.yml), a mise task, a krops
// binary with its subcommand and flags (as docs/cli.md, itself checked
// against the code, lists them), or a file of the repository. A renamed
// flag or task breaks this test, not a user following the docs.
func TestDocCommandsNameRealThings(t *testing.T) {
	tasks := taskNames(t)
	miseTasks := miseTaskNames(t)
	bins := cliReference(t)
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repoRoot, "README.md"))
	checked := 0
	for _, page := range pages {
		for _, c := range shellCommands(t, page) {
			checked++
			if problem := checkCommand(c.words, tasks, miseTasks, bins); problem != "" {
				t.Errorf("%s:%d: `%s`: %s", strings.TrimPrefix(page, repoRoot+"/"), c.line, c.text, problem)
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d commands found in the docs; is the extraction broken?", checked)
	}
}

type docCommand struct {
	line  int
	text  string
	words []string
}

var fence = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")

// shellCommands extracts the commands of page's shell blocks, without
// comments and leading VAR=value assignments.
func shellCommands(t *testing.T, page string) []docCommand {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []docCommand
	in := false
	// A line ending in a backslash continues on the next: the command is
	// the joined text, reported at its first line.
	pending, first := "", 0
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case fence.MatchString(line):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		text := strings.TrimSpace(stripComment(line))
		if pending == "" {
			first = i + 1
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			pending += cont + " "
			continue
		}
		text, pending = strings.TrimSpace(pending+text), ""
		if text == "" {
			continue
		}
		for _, part := range strings.Split(text, "&&") {
			words := shellWords(strings.TrimSpace(part))
			for len(words) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) > 0 {
				out = append(out, docCommand{line: first, text: text, words: words})
			}
		}
	}
	return out
}

// stripComment drops a # comment that follows whitespace, outside quotes.
func stripComment(s string) string {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// shellWords splits like a shell, keeping quoted words whole (quotes
// dropped). Good enough for documentation commands.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func checkCommand(w []string, tasks, miseTasks map[string]bool, bins map[string]*binRef) string {
	first := w[0]
	switch {
	case first == "task" || first == "tools/task.sh":
		if len(w) < 2 || strings.Contains(w[1], "=") || strings.HasPrefix(w[1], "-") {
			return "" // `task` alone, or `task --list`
		}
		if !tasks[w[1]] {
			return "no task " + w[1] + " in Taskfile.yml"
		}
		if w[1] == "toolbox" {
			for i, a := range w {
				if a == "--" && i+1 < len(w) && !tasks[w[i+1]] {
					return "no task " + w[i+1] + " in Taskfile.yml (run in the toolbox)"
				}
			}
		}
	case first == "mise":
		for i := 1; i < len(w); i++ {
			if w[i] == "run" && i+1 < len(w) && !miseTasks[w[i+1]] {
				return "no mise task " + w[i+1] + " in mise.toml"
			}
		}
	case strings.HasPrefix(first, "bin/krops-") || strings.HasPrefix(first, "krops-"):
		name := filepath.Base(first)
		if strings.HasPrefix(name, "krops-provider-") {
			return ""
		}
		b, ok := bins[name]
		if !ok {
			return "no binary " + name + " in docs/cli.md"
		}
		flags := b.flags
		for _, a := range w[1:] {
			if a == "--" {
				break
			}
			if !strings.HasPrefix(a, "-") {
				if cmd, ok := b.commands[a]; ok && len(flags) == len(b.flags) {
					flags = merge(b.flags, cmd)
				}
				continue
			}
			f, _, _ := strings.Cut(a, "=")
			if !flags[f] {
				return name + " has no flag " + f
			}
		}
	case strings.HasPrefix(first, "tools/") || strings.HasPrefix(first, "./"):
		if _, err := os.Stat(filepath.Join(repoRoot, first)); err != nil {
			return first + " does not exist"
		}
	}
	return ""
}

type binRef struct {
	flags    map[string]bool
	commands map[string]map[string]bool
}

func merge(a, b map[string]bool) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// cliReference reads docs/cli.md: each binary's flags and its commands'.
func cliReference(t *testing.T) map[string]*binRef {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*binRef{}
	var bin *binRef
	var cur map[string]bool
	flag := regexp.MustCompile("`(--?[a-z0-9-]+)`")
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## krops-"):
			bin = &binRef{flags: map[string]bool{"--help": true, "-h": true}, commands: map[string]map[string]bool{}}
			out[strings.TrimPrefix(line, "## ")] = bin
			cur = bin.flags
		case strings.HasPrefix(line, "### ") && bin != nil:
			f := strings.Fields(line)
			if len(f) >= 3 {
				cur = map[string]bool{}
				bin.commands[f[2]] = cur
			}
		case strings.HasPrefix(line, "| `-") && cur != nil:
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			for _, m := range flag.FindAllStringSubmatch(cell, -1) {
				cur[m[1]] = true
			}
		}
	}
	if len(out) < 8 {
		t.Fatalf("docs/cli.md lists %d binaries", len(out))
	}
	return out
}

func taskNames(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if line == "tasks:" {
			in = true
			continue
		}
		if m := regexp.MustCompile(`^  ([A-Za-z0-9:_-]+):\s*$`).FindStringSubmatch(line); in && m != nil {
			out[m[1]] = true
		}
	}
	return out
}

func miseTaskNames(t *testing.T) map[string]bool {
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(repoRoot, "mise*.toml"))
	re := regexp.MustCompile(`^\[tasks\.("?)([^"\]]+)"?\]`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if m := re.FindStringSubmatch(line); m != nil {
				out[m[2]] = true
			}
		}
	}
	var names []string
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 5 {
		t.Fatalf("mise tasks: %v", names)
	}
	return out
}
