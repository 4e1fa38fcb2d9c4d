package kubewait

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// heartbeat repeats the last summary line when it has not changed for its
// interval. A nil *heartbeat (no interval) does nothing.
type heartbeat struct {
	mu      sync.Mutex
	last    string
	changed time.Time
}

// startHeartbeat reports through report until ctx ends.
func startHeartbeat(ctx context.Context, every time.Duration, report func(string)) *heartbeat {
	if every <= 0 {
		return nil
	}
	start := time.Now()
	h := &heartbeat{changed: start}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				h.mu.Lock()
				line, quiet := h.last, now.Sub(h.changed)
				if line != "" && quiet >= every {
					h.changed = now
				}
				h.mu.Unlock()
				// A tick a moment early (the ticker's slack) waits for the next.
				if line != "" && quiet >= every {
					report(fmt.Sprintf("still waiting after %s: %s", now.Sub(start).Round(time.Second), line))
				}
			}
		}
	}()
	return h
}

func (h *heartbeat) saw(line string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if line != h.last {
		h.last, h.changed = line, time.Now()
	}
}
