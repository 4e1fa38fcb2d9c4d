package duration

import (
	"testing"
	"time"
)

func TestParseAcceptsTheLifecycleGrammar(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"40m":    40 * time.Minute,
		"2h":     2 * time.Hour,
		"90s":    90 * time.Second,
		"1200":   1200 * time.Second,
		" 15m\t": 15 * time.Minute,
		"010":    10 * time.Second,
		"0":      0,
		"0h":     0,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestParseRejectsEverythingElse(t *testing.T) {
	for _, in := range []string{
		"", "   ", "m", "40x", "4-0m", "forty", "-5", "-5m", "+5", "1.5h", "1h30m", "5 m", "5ms", "5d",
		"0x10", "9223372036854775808", "2562048h", "99999999999999999999s",
	} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v; want an error", in, got)
		}
	}
}

func TestParseLargestValues(t *testing.T) {
	if _, err := Parse("2562047h"); err != nil {
		t.Errorf("2562047h fits in int64 nanoseconds: %v", err)
	}
	if _, err := Parse("2562048h"); err == nil {
		t.Error("2562048h overflows int64 nanoseconds and must be rejected")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"40m", "", "1h30m", "007s", "9223372036s", " 5h "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("Parse(%q) = %v: negative durations must never be accepted", s, d)
		}
	})
}
