// Package ui prints step progress the way every krops tool does: one line
// when a step starts and one when it ends, with its duration. On a terminal
// the start line is a spinner that the end line replaces; elsewhere (CI, pipes,
// files) both are plain lines so logs stay readable.
package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// Options configure a Progress.
type Options struct {
	// Out receives progress; nil means os.Stderr.
	Out io.Writer
	// Terminal forces spinner mode on or off; nil detects it from Out and the
	// CI variable.
	Terminal *bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Environ is used for CI detection; nil means os.Environ.
	Getenv func(string) string
}

// Progress prints steps. It is safe for concurrent use.
type Progress struct {
	mu       sync.Mutex
	out      io.Writer
	terminal bool
	now      func() time.Time
}

// New returns a Progress.
func New(o Options) *Progress {
	p := &Progress{out: o.Out, now: o.Now}
	if p.out == nil {
		p.out = os.Stderr
	}
	if p.now == nil {
		p.now = time.Now
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.Terminal != nil {
		p.terminal = *o.Terminal
	} else if f, ok := p.out.(*os.File); ok && getenv("CI") == "" {
		p.terminal = isatty.IsTerminal(f.Fd())
	}
	return p
}

// Symbols used at the start of lines.
const (
	symStart = "•"
	symDone  = "✔"
	symFail  = "✗"
	symWarn  = "!"
)

// Step runs fn as a named step and prints its start and end. The returned
// error is fn's, unchanged.
func (p *Progress) Step(ctx context.Context, name string, fn func(context.Context) error) error {
	start := p.now()
	stop := p.begin(name, start)
	err := fn(ctx)
	stop()
	elapsed := p.now().Sub(start)
	switch {
	case err == nil:
		p.line("%s %s (%s)", symDone, name, Round(elapsed))
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		p.line("%s %s (%s): interrupted", symFail, name, Round(elapsed))
	default:
		p.line("%s %s (%s): %v", symFail, name, Round(elapsed), err)
	}
	return err
}

// Warnf prints a warning line.
func (p *Progress) Warnf(format string, args ...any) {
	p.line(symWarn+" "+format, args...)
}

// Infof prints a detail line.
func (p *Progress) Infof(format string, args ...any) {
	p.line("  "+format, args...)
}

func (p *Progress) begin(name string, start time.Time) (stop func()) {
	if !p.terminal {
		p.line("%s %s ...", symStart, name)
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			p.mu.Lock()
			fmt.Fprintf(p.out, "\r\033[K%c %s (%s)", frames[i%len(frames)], name, Round(p.now().Sub(start)))
			p.mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		p.mu.Lock()
		fmt.Fprint(p.out, "\r\033[K")
		p.mu.Unlock()
	}
}

func (p *Progress) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format+"\n", args...)
}

// Round shortens a duration for display: tenths of a second under a minute,
// whole seconds above.
func Round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
