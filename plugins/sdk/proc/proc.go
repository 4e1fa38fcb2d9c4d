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
	"unicode"
	"unicode/utf8"
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
	// OwnGroup starts each program in a process group of its own, signalled
	// as a whole on cancellation, so a wrapper's children (a shell script
	// standing in for docker, the engine CLI's helpers) go with it. It is for
	// the lifecycle binaries; a plugin leaves it off, because the host kills
	// a plugin's group as one and a child in a group of its own would
	// escape that.
	OwnGroup bool
}

// Run starts c and waits for it. On context cancellation the process (its
// group with OwnGroup) gets SIGTERM, then SIGKILL after WaitDelay.
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
	if e.OwnGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGTERM) }
	}
	cmd.WaitDelay = e.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	err := cmd.Start()
	if err == nil {
		pid := cmd.Process.Pid
		if e.OwnGroup {
			groups := groupsFrom(ctx)
			groups.add(pid)
			defer groups.remove(pid)
		}
		err = cmd.Wait()
		if e.OwnGroup && ctx.Err() != nil {
			// exec killed only the leader after WaitDelay; whatever of
			// its group still runs would outlive an interrupted step.
			_ = signalGroup(pid, syscall.SIGKILL)
		}
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: exitCode(cmd)}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return res, &Error{Cmd: c, Result: res, Err: err}
	}
	return res, nil
}

func exitCode(cmd *exec.Cmd) int {
	if cmd.ProcessState == nil {
		return -1 // never started
	}
	return cmd.ProcessState.ExitCode()
}

// signalGroup signals the process group led by pid. A group outlives its
// leader while any member runs, and the kernel does not give a live
// group's id to a new process, so only that program's own descendants are
// reached (those that did not leave the group on purpose).
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
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
	for i, l := range lines {
		lines[i] = Printable(l, maxLineRunes)
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// maxLineRunes caps one line of a child's output quoted in an error: a
// binary blob without newlines is one line.
const maxLineRunes = 500

// Printable makes one line of a child's output safe to quote in an error or
// a log: terminal escape sequences (colours, cursor moves, title changes)
// are dropped, other control characters and invalid UTF-8 become '?', and
// the line is cut after max runes. An engine's stderr would otherwise
// repaint the user's terminal or corrupt a JSON log.
func Printable(s string, max int) string {
	var b strings.Builder
	runes := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b { // ESC: skip the whole sequence
			i = skipEscape(s, i)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size <= 1, r != '\t' && unicode.IsControl(r):
			r = '?'
		}
		if runes == max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		runes++
	}
	return b.String()
}

// skipEscape returns the index after the escape sequence starting at s[i]:
// CSI (ESC [ … final byte), OSC (ESC ] … BEL or ESC \\), or ESC and one byte.
func skipEscape(s string, i int) int {
	i++ // ESC
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		for i++; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return i
	case ']':
		for i++; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return i
	}
	return i + 1
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
