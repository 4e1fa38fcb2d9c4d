package ui

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

func TestPlainModePrintsOneLineAtStartAndOneAtEnd(t *testing.T) {
	var out bytes.Buffer
	off := false
	p := New(Options{Out: &out, Terminal: &off, Now: fakeClock(1500 * time.Millisecond)})
	if err := p.Step(context.Background(), "create kind cluster", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := "• create kind cluster ...\n✔ create kind cluster (1.5s)\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestFailedAndInterruptedSteps(t *testing.T) {
	var out bytes.Buffer
	off := false
	p := New(Options{Out: &out, Terminal: &off, Now: fakeClock(time.Second)})
	boom := errors.New("boom")
	if err := p.Step(context.Background(), "a", func(context.Context) error { return boom }); err != boom {
		t.Errorf("error must pass through unchanged: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.Step(ctx, "b", func(ctx context.Context) error { return ctx.Err() })
	got := out.String()
	for _, w := range []string{"✗ a (1s): boom", "✗ b (1s): interrupted"} {
		if !strings.Contains(got, w) {
			t.Errorf("output %q lacks %q", got, w)
		}
	}
}

func TestCIIsNeverATerminal(t *testing.T) {
	var out bytes.Buffer
	p := New(Options{Out: &out, Getenv: func(k string) string {
		if k == "CI" {
			return "true"
		}
		return ""
	}})
	if p.terminal {
		t.Error("CI output must be plain lines")
	}
}

func TestSpinnerEndsWithTheDoneLine(t *testing.T) {
	var out bytes.Buffer
	on := true
	p := New(Options{Out: &out, Terminal: &on})
	_ = p.Step(context.Background(), "wait", func(context.Context) error { time.Sleep(250 * time.Millisecond); return nil })
	got := out.String()
	if !strings.Contains(got, "\r\033[K⠋ wait") || !strings.Contains(got, "\r\033[K✔ wait (") {
		t.Errorf("spinner output %q", got)
	}
	if strings.Count(got, "✔") != 1 {
		t.Errorf("exactly one end line: %q", got)
	}
}
