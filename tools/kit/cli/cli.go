// Package cli holds the command-line conventions every krops binary shares:
// the urfave/cli app skeleton, -v and --log-format, flags bound to the
// lifecycle's environment variables, Ctrl-C cancellation and exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	ucli "github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// Exit codes, the same for every binary.
const (
	ExitOK           = 0
	ExitFailed       = 1
	ExitUsage        = 2
	ExitUnknownState = 3
	// ExitInterrupted is a run that a signal stopped although no step
	// failed: the shell's code for SIGINT.
	ExitInterrupted = 130
)

// ExitCodesHelp documents the exit codes in every --help.
const ExitCodesHelp = `EXIT CODES:
     0  done
     1  failed
     2  usage or configuration error, or a refusal (nothing was changed)
     3  stopped on unknown state: a query failed, so nothing destructive was done; rerun when the cause is fixed
   130  interrupted (Ctrl-C, SIGTERM) before it finished: rerun to complete it`

type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// UsageError marks err as a usage or configuration error (exit 2).
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// Usagef formats a usage error.
func Usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

type unknownStateError struct{ err error }

func (e unknownStateError) Error() string { return e.err.Error() }
func (e unknownStateError) Unwrap() error { return e.err }

// UnknownStateError marks err as a stop on unknown state (exit 3): the tool
// could not tell what exists, so it did nothing destructive.
func UnknownStateError(err error) error {
	if err == nil {
		return nil
	}
	return unknownStateError{err}
}

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	var u usageError
	var s unknownStateError
	// Libraries that must not depend on this package (the provider SDK)
	// carry their code on the error itself.
	var coded interface{ ExitCode() int }
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	case errors.As(err, &s):
		return ExitUnknownState
	case errors.As(err, &coded):
		return coded.ExitCode()
	}
	return ExitFailed
}

// Options describe one binary.
type Options struct {
	Name        string
	Usage       string
	ArgsUsage   string
	Description string
	Version     string
	// Knobs are the environment-variable names (config.KnobTable) this binary
	// reads; each becomes a flag bound to its variable.
	Knobs    []string
	Flags    []ucli.Flag
	Commands []*ucli.Command
	Action   ucli.ActionFunc
	// Stdout and Stderr default to the process's.
	Stdout, Stderr io.Writer
}

// metadata keys on the app.
const (
	metaLogger = "krops.logger"
	// metaJSON holds an *atomic.Pointer[slog.Logger], set when
	// --log-format json is chosen: Run's own notices (the final error,
	// the interrupt) go through it then, and the signal watcher reads it
	// from another goroutine.
	metaJSON = "krops.json-logger"
)

// New builds the app.
func New(o Options) *ucli.App {
	app := &ucli.App{
		Name:                 o.Name,
		Usage:                o.Usage,
		ArgsUsage:            o.ArgsUsage,
		Description:          o.Description,
		Version:              o.Version,
		Commands:             o.Commands,
		Action:               o.Action,
		EnableBashCompletion: true,
		// -v is verbose here, so the built-in --version/-v flag is off; the
		// version command replaces it.
		HideVersion:           true,
		HideHelpCommand:       true,
		Writer:                o.Stdout,
		ErrWriter:             o.Stderr,
		CustomAppHelpTemplate: ucli.AppHelpTemplate + "\n" + ExitCodesHelp + "\n",
		Flags: append([]ucli.Flag{
			&ucli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log more detail"},
			&ucli.StringFlag{Name: "log-format", Value: "text", Usage: "log format: text or json"},
		}, append(KnobFlags(o.Knobs...), o.Flags...)...),
		Metadata: map[string]any{metaJSON: new(atomic.Pointer[slog.Logger])},
	}
	if app.Writer == nil {
		app.Writer = os.Stdout
	}
	if app.ErrWriter == nil {
		app.ErrWriter = os.Stderr
	}
	app.Commands = append(app.Commands, &ucli.Command{
		Name:  "version",
		Usage: "print the version",
		Action: func(c *ucli.Context) error {
			_, err := fmt.Fprintf(c.App.Writer, "%s %s\n", c.App.Name, c.App.Version)
			return err
		},
	})
	if app.Action == nil && len(o.Commands) > 0 {
		// Without an action of its own, urfave answers an unknown command
		// through its help command, with exit 3, which here means unknown
		// state: a mistyped command is a usage error.
		app.Action = func(c *ucli.Context) error {
			if c.NArg() == 0 {
				return ucli.ShowAppHelp(c)
			}
			var names []string
			for _, cmd := range c.App.VisibleCommands() {
				names = append(names, cmd.Name)
			}
			return Usagef("%s has no command %q; its commands are %s (see `%s --help`)", c.App.Name, c.Args().First(), strings.Join(names, ", "), c.App.Name)
		}
	}
	app.OnUsageError = func(_ *ucli.Context, err error, _ bool) error { return UsageError(err) }
	app.ExitErrHandler = func(*ucli.Context, error) {} // Run owns exit codes
	app.Before = func(c *ucli.Context) error {
		var h slog.Handler
		level := slog.LevelInfo
		if c.Bool("verbose") {
			level = slog.LevelDebug
		}
		ho := &slog.HandlerOptions{Level: level}
		switch c.String("log-format") {
		case "text":
			h = slog.NewTextHandler(c.App.ErrWriter, ho)
		case "json":
			h = slog.NewJSONHandler(c.App.ErrWriter, ho)
		default:
			return Usagef("--log-format %q is not valid: want text or json", c.String("log-format"))
		}
		c.App.Metadata[metaLogger] = slog.New(h)
		// client-go reports through klog, a process-wide logger, on stderr
		// by default: a watch retried while a CRD is not served yet printed
		// "E1203 ... Failed to watch" lines into the progress output. The
		// binary owns the process, so its logger takes them, as detail.
		klog.SetSlogLogger(slog.New(debugOnly{h}))
		if jl, ok := c.App.Metadata[metaJSON].(*atomic.Pointer[slog.Logger]); ok && c.String("log-format") == "json" {
			jl.Store(slog.New(h))
		}
		return nil
	}
	for _, cmd := range app.Commands {
		// The knobs are the binary's, whichever command runs; repeating
		// them on each command lets them follow the command name too
		// (`krops-sweep cloud aws --config x`).
		if cmd.Name != "version" {
			cmd.Flags = append(KnobFlags(o.Knobs...), cmd.Flags...)
		}
		cmd.OnUsageError = app.OnUsageError
		if cmd.CustomHelpTemplate == "" {
			cmd.CustomHelpTemplate = ucli.CommandHelpTemplate + "\n" + ExitCodesHelp + "\n"
		}
	}
	return app
}

// debugOnly lowers every record to Debug: what client-go reports on its
// own (retries, watch errors) is detail the tools' progress lines already
// summarise, shown with --verbose.
type debugOnly struct{ slog.Handler }

func (d debugOnly) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.Handler.Enabled(ctx, slog.LevelDebug)
}

func (d debugOnly) Handle(ctx context.Context, r slog.Record) error {
	// logr hands errors over without asking Enabled.
	if !d.Handler.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.Handler.Handle(ctx, r)
}

func (d debugOnly) WithAttrs(a []slog.Attr) slog.Handler { return debugOnly{d.Handler.WithAttrs(a)} }
func (d debugOnly) WithGroup(n string) slog.Handler      { return debugOnly{d.Handler.WithGroup(n)} }

// Printer is the binary's printer on w (the app's ErrWriter for progress,
// its Writer for results), in the format --log-format chose: plain lines or
// a spinner for text, one JSON record per event for json.
func Printer(c *ucli.Context, w io.Writer) *ui.Progress {
	o := ui.Options{Out: w}
	if c.String("log-format") == "json" {
		level := slog.LevelInfo
		if c.Bool("verbose") {
			level = slog.LevelDebug
		}
		o.JSON = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return ui.New(o)
}

// Logger returns the logger configured by -v and --log-format.
func Logger(c *ucli.Context) *slog.Logger {
	if l, ok := c.App.Metadata[metaLogger].(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
}

// RunOptions configure Run.
type RunOptions struct {
	// Signals cancel the run's context; nil means SIGINT and SIGTERM.
	Signals []os.Signal
	// BeforeForcedExit runs when a second signal ends the process at once,
	// for cleanups that must not be skipped (killing plugin processes).
	BeforeForcedExit func()
	// Cleanup runs once the app has returned, while the signals are still
	// watched: closing plugins gracefully takes up to seconds, and a
	// Ctrl-C in that time must force the exit (after BeforeForcedExit),
	// not kill the process by the signal's default action with its
	// plugins left running.
	Cleanup func()
	// Exit ends the process on the second signal; nil means os.Exit.
	Exit func(code int)
}

// Run runs the app with args (argv including the program name) and returns
// the exit code. The first SIGINT/SIGTERM cancels the context so steps stop
// cleanly; a second one ends the process at once.
func Run(ctx context.Context, app *ucli.App, args []string, o RunOptions) int {
	if o.Signals == nil {
		o.Signals = []os.Signal{os.Interrupt, syscall.SIGTERM}
	}
	exit := o.Exit
	if exit == nil {
		exit = os.Exit
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx, groups := proc.WithGroups(ctx)
	jsonLog, _ := app.Metadata[metaJSON].(*atomic.Pointer[slog.Logger])
	// notice prints one of Run's own messages: a line of text, or under
	// --log-format json a record a log shipper can parse like the others.
	notice := func(level slog.Level, text string, attrs ...any) {
		if jsonLog != nil {
			if l := jsonLog.Load(); l != nil {
				l.Log(context.Background(), level, text, attrs...)
				return
			}
		}
		fmt.Fprintln(app.ErrWriter, text)
	}
	var interrupted atomic.Bool
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, o.Signals...)
	defer signal.Stop(sigs)
	// finished, not ctx, ends the watcher: the first signal cancels ctx,
	// and the watcher must still be there for the second.
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-sigs:
			interrupted.Store(true)
			notice(slog.LevelWarn, "interrupted: stopping after the calls in flight (press Ctrl-C again to quit at once)")
			cancel()
		case <-finished:
			return
		}
		select {
		case <-sigs:
			notice(slog.LevelWarn, "interrupted again: quitting now")
			groups.Kill()
			if o.BeforeForcedExit != nil {
				o.BeforeForcedExit()
			}
			exit(ExitInterrupted)
		case <-finished:
		}
	}()
	// Once on every way out, a panic included (it still unwinds through
	// here), and on the ordinary one before the signals stop being watched.
	var cleanup sync.Once
	cleanUp := func() {
		if o.Cleanup != nil {
			cleanup.Do(o.Cleanup)
		}
	}
	defer cleanUp()
	err := app.RunContext(ctx, flagsFirst(app, args))
	cleanUp()
	code := ExitCode(err)
	if interrupted.Load() && (code == ExitOK || code == ExitFailed) {
		// A step may have swallowed the cancellation (a status that
		// reports what it could read): an interrupted run did not do all
		// it was asked, and a supervisor must not read it as success, nor
		// as an ordinary failure to retry blindly. A refusal (2) or
		// unknown state (3) keeps its own code: it says more.
		code = ExitInterrupted
		if err == nil {
			notice(slog.LevelWarn, app.Name+": interrupted before it finished", "exit_code", code)
		}
	}
	if err != nil {
		if jsonLog != nil && jsonLog.Load() != nil {
			notice(slog.LevelError, app.Name+" failed", "error", err.Error(), "exit_code", code)
		} else {
			notice(slog.LevelError, fmt.Sprintf("%s: error: %v", app.Name, err))
		}
	}
	return code
}

// flagsFirst moves flags given after positional arguments in front of them:
// urfave/cli v2 stops reading flags at the first argument, and users type
// `krops-orphans aws --output json` or `krops-sweep cloud aws --dry-run`.
// For a subcommand, the flags after its name are reordered within it.
func flagsFirst(app *ucli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	flags, positional, firstArg := splitFlags(args[1:], app.Flags)
	if len(positional) > 0 {
		if cmd := app.Command(positional[0]); cmd != nil {
			// Flags before the command name are the app's; the rest is
			// re-split with the command's own flags.
			i := 1 + firstArg
			cflags, cpos, _ := splitFlags(args[i+1:], cmd.Flags)
			out := append([]string{}, args[:i+1]...)
			return append(append(out, cflags...), cpos...)
		}
	}
	return append(append([]string{args[0]}, flags...), positional...)
}

// splitFlags separates flags (with their values) from positional
// arguments; firstArg is the index in args of the first positional one.
func splitFlags(args []string, defs []ucli.Flag) (flags, positional []string, firstArg int) {
	firstArg = -1
	boolean := map[string]bool{"help": true, "h": true}
	for _, f := range defs {
		if _, ok := f.(*ucli.BoolFlag); ok {
			for _, n := range f.Names() {
				boolean[n] = true
			}
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !boolean[name] && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		if firstArg < 0 {
			firstArg = i
		}
		positional = append(positional, a)
	}
	return flags, positional, firstArg
}

// KnobFlags returns string flags bound to the named knobs' environment
// variables. Knobs without a flag name (secrets) are skipped: they are read
// from the environment only.
func KnobFlags(names ...string) []ucli.Flag {
	table := map[string]config.Knob{}
	for _, k := range config.KnobTable() {
		table[k.Env] = k
	}
	var flags []ucli.Flag
	for _, n := range names {
		k, ok := table[n]
		if !ok {
			panic(fmt.Sprintf("cli: knob %s is not in config.KnobTable", n)) // a programming error, caught by every test of the binary
		}
		if k.Flag == "" {
			continue
		}
		flags = append(flags, &ucli.StringFlag{
			Name:        k.Flag,
			EnvVars:     []string{k.Env},
			Usage:       k.Usage,
			DefaultText: k.Default,
		})
	}
	return flags
}

// Lookup returns knob values for config.Load and config.ParseKnobs: a flag
// given on the command line wins over its environment variable (urfave
// resolves that pair), which wins over the configuration file and the
// built-in defaults. Secrets have no flag and come from the environment only.
func Lookup(c *ucli.Context) config.Lookup {
	flagOf := map[string]string{}
	for _, k := range config.KnobTable() {
		if k.Flag != "" {
			flagOf[k.Env] = k.Flag
		}
	}
	return func(name string) (string, bool) {
		if f, ok := flagOf[name]; ok && c.IsSet(f) {
			return c.String(f), true
		}
		return os.LookupEnv(name)
	}
}
