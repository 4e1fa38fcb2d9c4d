// Package proc runs external programs the one way krops allows: an argv
// (never a shell string), an environment passed explicitly (never inherited
// by accident), output captured, and errors that print a copy-pasteable
// command line with every secret value redacted.
package proc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Cmd is one program invocation.
type Cmd struct {
	// Path is the program, looked up in PATH when it has no slash.
	Path string
	Args []string
	// Env is the complete environment of the child. Nil means empty: use
	// Inherit to pass selected variables of the caller on.
	Env []string
	// Dir is the working directory; empty means the caller's.
	Dir   string
	Stdin io.Reader
	// Secrets are values to redact from errors (tokens, passwords).
	Secrets []string
	// Stdout and Stderr, when set, also receive the output as it arrives
	// (for example to stream a long task to the user).
	Stdout, Stderr io.Writer
}

// Result is what a finished program left behind.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Runner runs commands. The real one is Exec; tests inject recorders.
type Runner interface {
	Run(ctx context.Context, c Cmd) (Result, error)
}

// Exec runs commands as real processes.
type Exec struct {
	// WaitDelay bounds how long output pipes may stay open after the process
	// is killed on cancellation; zero means 5 s.
	WaitDelay time.Duration
}

// Run starts c and waits for it. On context cancellation the process gets
// SIGTERM, then SIGKILL after WaitDelay.
func (e Exec) Run(ctx context.Context, c Cmd) (Result, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = tee(&stdout, c.Stdout)
	cmd.Stderr = tee(&stderr, c.Stderr)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = e.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	err := cmd.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: cmd.ProcessState.ExitCode()}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return res, &Error{Cmd: c, Result: res, Err: err}
	}
	return res, nil
}

func tee(buf *bytes.Buffer, w io.Writer) io.Writer {
	if w == nil {
		return buf
	}
	return io.MultiWriter(buf, w)
}

// Error is a failed command.
type Error struct {
	Cmd    Cmd
	Result Result
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "running %s: %v", Redact(CommandLine(e.Cmd), e.Cmd.Secrets), Redact(e.Err.Error(), e.Cmd.Secrets))
	if tail := lastLines(e.Result.Stderr, 10); tail != "" {
		fmt.Fprintf(&b, "\n%s", Redact(tail, e.Cmd.Secrets))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// CommandLine renders the argv as a shell command a user can copy and rerun.
func CommandLine(c Cmd) string {
	parts := make([]string, 0, len(c.Args)+1)
	parts = append(parts, quote(c.Path))
	for _, a := range c.Args {
		parts = append(parts, quote(a))
	}
	return strings.Join(parts, " ")
}

func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@,+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Redact replaces every non-empty secret in s.
func Redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// Inherit returns KEY=VALUE entries for the named variables the caller has
// set, for building an explicit child environment.
func Inherit(names ...string) []string {
	var env []string
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}
