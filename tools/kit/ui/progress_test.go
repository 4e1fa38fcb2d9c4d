package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// With a JSON logger every event is a record naming its intent, and the
// same calls print nothing else.
func TestJSONModeEmitsOneRecordPerEvent(t *testing.T) {
	var out, rec bytes.Buffer
	p := New(Options{Out: &out, Now: fakeClock(time.Second), JSON: slog.New(slog.NewJSONHandler(&rec, nil))})
	_ = p.Step(context.Background(), "publish", func(context.Context) error { return nil })
	_ = p.Wait(context.Background(), "flux-system Ready", func(context.Context) error { return errors.New("timed out") })
	p.Successf("pushed %s", "oci://x")
	p.Warnf("slow")
	p.Failuref("left: %d", 2)
	if out.Len() != 0 {
		t.Errorf("JSON mode printed lines too: %q", out.String())
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(rec.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		got = append(got, fmt.Sprintf("%v|%v|%v|%v", r["level"], r["msg"], r["intent"], r["step"]))
	}
	want := []string{
		"INFO|step started|action|publish", "INFO|step done|action|publish",
		"INFO|step started|waiting|flux-system Ready", "ERROR|step failed|waiting|flux-system Ready",
		"INFO|pushed oci://x|success|<nil>", "WARN|slow|warning|<nil>", "ERROR|left: 2|failure|<nil>",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestIntentLinesInPlainMode(t *testing.T) {
	var out bytes.Buffer
	off := false
	p := New(Options{Out: &out, Terminal: &off})
	p.Successf("a")
	p.Failuref("b")
	p.Retryf("c")
	p.Actionf("d")
	p.Warnf("e")
	p.Infof("f")
	if want := "✔ a\n✗ b\n↻ c\n• d\n! e\n  f\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}
