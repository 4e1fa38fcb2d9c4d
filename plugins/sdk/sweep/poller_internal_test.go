package sweep

import (
	"testing"
	"time"
)

func TestPollerBacksOffAndResets(t *testing.T) {
	p := newPoller(time.Second, 10*time.Second)
	var got []time.Duration
	for range 6 {
		got = append(got, p.next())
	}
	p.reset()
	got = append(got, p.next())
	want := []time.Duration{1, 2, 4, 8, 10, 10, 1}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("pauses %v, want %v seconds", got, want)
		}
	}
	// No first poll, or one above the ceiling: fixed pauses.
	for _, first := range []time.Duration{0, time.Minute} {
		f := newPoller(first, 10*time.Second)
		if a, b := f.next(), f.next(); a != 10*time.Second || b != 10*time.Second {
			t.Errorf("first %v: pauses %v, %v; want fixed 10s", first, a, b)
		}
	}
}
