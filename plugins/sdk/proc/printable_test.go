package proc

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text": "plain text",
		"\x1b[31mError\x1b[0m: no such container":     "Error: no such container",
		"\x1b]0;pwned title\x07after":                 "after",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ ok": "link ok",
		"bell\x07 and nul\x00 and \xff\xfe bytes":     "bell? and nul? and ?? bytes",
		"tab\tkept":     "tab\tkept",
		"\x1b[":         "",
		"ünïcode stays": "ünïcode stays",
	} {
		if got := Printable(in, 100); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Printable(strings.Repeat("x", 20), 5); got != "xxxxx…" {
		t.Errorf("cut: %q", got)
	}
}

// A failing child's stderr quoted in the error carries no escape sequence
// or binary byte: the error reaches terminals and JSON logs.
func TestErrorQuotesPrintableStderr(t *testing.T) {
	_, err := Exec{}.Run(context.Background(), Cmd{Path: "sh", Args: []string{"-c", `printf '\033[1;31mdaemon\033[0m wedged\000\377\n' >&2; exit 3`}})
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "daemon wedged??") || strings.ContainsAny(msg, "\x1b\x00") || strings.Contains(msg, "\xff") {
		t.Errorf("error text %q", msg)
	}
}
