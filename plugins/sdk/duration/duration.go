// Package duration parses the one duration grammar krops accepts in
// environment variables and bootstrap.toml: an unsigned decimal count with an
// optional unit, `s`, `m` or `h`, and nothing else. A bare count is seconds.
//
// Go's time.ParseDuration is deliberately not used: it accepts compound and
// fractional values ("1h30m", "1.5h") and negative ones, and the lifecycle
// interface this re-implements rejects all of those.
package duration

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Grammar is the accepted syntax, for error messages and help text.
const Grammar = "a whole number of seconds, or a whole number followed by s, m or h (for example 90, 90s, 40m, 2h)"

// Parse parses s after trimming surrounding whitespace. Leading zeros are
// decimal, not octal. Values whose nanosecond count overflows int64 are
// rejected rather than wrapped.
func Parse(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration: want %s", Grammar)
	}
	unit := time.Second
	switch t[len(t)-1] {
	case 's':
		t = t[:len(t)-1]
	case 'm':
		unit, t = time.Minute, t[:len(t)-1]
	case 'h':
		unit, t = time.Hour, t[:len(t)-1]
	}
	if t == "" {
		return 0, fmt.Errorf("duration %q has a unit but no number: want %s", s, Grammar)
	}
	var n int64
	for _, r := range t {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("duration %q is not valid: want %s", s, Grammar)
		}
		d := int64(r - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("duration %q is too large", s)
		}
		n = n*10 + d
	}
	if n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("duration %q is too large", s)
	}
	return time.Duration(n) * unit, nil
}
