// Package ui is the one printer of every krops binary. Calls are named by
// intent: Step (an action krops performs) and Wait (krops waiting on someone
// else, such as a controller), each with its duration, and the one-line
// Successf, Warnf, Failuref, Retryf, Skippedf, Actionf and Infof. On a terminal a
// running step is a spinner that its end line replaces; elsewhere (CI,
// pipes, files) every event is a plain line so logs stay readable; with
// --log-format json every event is a JSON line instead (see JSON).
package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kropsdev/krops/tools/kit/budget"
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
	// JSON, when set, receives every event as a structured record instead
	// of a line on Out: what --log-format json selects.
	JSON *slog.Logger
}

// Progress prints steps. It is safe for concurrent use.
type Progress struct {
	mu       sync.Mutex
	out      io.Writer
	terminal bool
	now      func() time.Time
	json     *slog.Logger
}

// New returns a Progress.
func New(o Options) *Progress {
	p := &Progress{out: o.Out, now: o.Now, json: o.JSON}
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
	} else if f, ok := p.out.(*os.File); ok && getenv("CI") == "" && p.json == nil {
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
	symRetry = "↻"
)

// Intents, as the JSON records name them.
const (
	IntentAction  = "action"
	IntentWaiting = "waiting"
	IntentSuccess = "success"
	IntentWarning = "warning"
	IntentFailure = "failure"
	IntentRetry   = "retry"
	IntentSkipped = "skipped"
	IntentInfo    = "info"
)

// Step runs fn as a named action krops performs and prints its start and
// end. The returned error is fn's, unchanged.
func (p *Progress) Step(ctx context.Context, name string, fn func(context.Context) error) error {
	return p.run(ctx, IntentAction, name, fn)
}

// Wait is Step for time spent waiting on something krops does not control
// (a controller, a cloud API): the same lines, and its JSON records say
// "waiting", so a run's time splits into krops's own work and waiting.
func (p *Progress) Wait(ctx context.Context, name string, fn func(context.Context) error) error {
	return p.run(ctx, IntentWaiting, name, fn)
}

func (p *Progress) run(ctx context.Context, intent, name string, fn func(context.Context) error) error {
	start := p.now()
	stop := p.begin(intent, name, start)
	err := fn(ctx)
	stop()
	elapsed := p.now().Sub(start)
	if p.json != nil {
		attrs := []any{"intent", intent, "step", name, "seconds", elapsed.Seconds()}
		switch {
		case err == nil:
			p.json.Info("step done", attrs...)
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			p.json.Warn("step interrupted", attrs...)
		default:
			p.json.Error("step failed", append(attrs, "error", err.Error())...)
		}
		return err
	}
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

// Successf prints something krops confirmed or finished.
func (p *Progress) Successf(format string, args ...any) {
	p.event(IntentSuccess, symDone+" ", format, args...)
}

// Failuref prints something that failed and is left as it is.
func (p *Progress) Failuref(format string, args ...any) {
	p.event(IntentFailure, symFail+" ", format, args...)
}

// Warnf prints a warning line.
func (p *Progress) Warnf(format string, args ...any) {
	p.event(IntentWarning, symWarn+" ", format, args...)
}

// Retryf prints something that will be tried again.
func (p *Progress) Retryf(format string, args ...any) {
	p.event(IntentRetry, symRetry+" ", format, args...)
}

// Skippedf prints something left alone on purpose.
func (p *Progress) Skippedf(format string, args ...any) {
	p.event(IntentSkipped, "- ", format, args...)
}

// Actionf prints an action under way that has no end line of its own.
func (p *Progress) Actionf(format string, args ...any) {
	p.event(IntentAction, symStart+" ", format, args...)
}

// Infof prints a detail line.
func (p *Progress) Infof(format string, args ...any) {
	p.event(IntentInfo, "  ", format, args...)
}

func (p *Progress) event(intent, prefix, format string, args ...any) {
	if p.json != nil {
		level := slog.LevelInfo
		switch intent {
		case IntentWarning:
			level = slog.LevelWarn
		case IntentFailure:
			level = slog.LevelError
		}
		p.json.Log(context.Background(), level, fmt.Sprintf(format, args...), "intent", intent)
		return
	}
	p.line(prefix+format, args...)
}

func (p *Progress) begin(intent, name string, start time.Time) (stop func()) {
	if p.json != nil {
		p.json.Info("step started", "intent", intent, "step", name)
		return func() {}
	}
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
		tick := time.NewTicker(budget.ProgressTick)
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
