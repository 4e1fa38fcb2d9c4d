package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var l Latencies
	for i := 1; i <= 20; i++ {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 10 * time.Millisecond, 95: 19 * time.Millisecond, 100: 20 * time.Millisecond, 1: time.Millisecond} {
		if got := l.Percentile(p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if (Latencies{}).Percentile(50) != 0 {
		t.Error("an empty set has no percentile")
	}
}

// A wait that polls every 300 ms meets changes at random phases: its
// latencies spread over the interval, while one woken by the change itself
// answers at once.
func TestDetectionSamplesMeasureFromTheChange(t *testing.T) {
	var mu sync.Mutex
	done := map[int]chan struct{}{}
	ch := func(i int) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if done[i] == nil {
			done[i] = make(chan struct{})
		}
		return done[i]
	}
	notified := DetectionSamples(t, 20, 500*time.Millisecond, func(i int) error { close(ch(i)); return nil },
		func(ctx context.Context, i int) error { <-ch(i); return nil })
	done = map[int]chan struct{}{}
	polled := DetectionSamples(t, 20, 500*time.Millisecond, func(i int) error { close(ch(i)); return nil },
		func(ctx context.Context, i int) error {
			for {
				select {
				case <-ch(i):
					return nil
				default:
					time.Sleep(300 * time.Millisecond)
				}
			}
		})
	// Measured from the change, not from the wait's start (200 ms and
	// more before it): the woken wait beats most of the poll's samples.
	// Relative, since this machine's scheduling delays are not known.
	if notified.Percentile(95) >= polled.Percentile(50) {
		t.Errorf("woken by the change: p95 %v; polling every 300 ms: p50 %v; the woken wait should be the faster", notified.Percentile(95), polled.Percentile(50))
	}
}
