package sdk

import (
	"context"
	"os"
	"os/signal"
	"sync"
)

// interrupts turns SIGINT into a graceful stop of the sweeps a plugin is
// serving. The host interrupts a sweep this way rather than by cancelling
// the RPC: a cancelled stream drops the events already on the wire, so a
// deletion the plugin announced a moment before would go unreported, and
// the host would claim less in flight than was. Stopped this way, the
// plugin's sweep returns, the stream ends, and the host reads every event
// up to the end. Only the host sends it: the plugin runs in a process group
// of its own, out of reach of the terminal's Ctrl-C, and go-plugin keeps
// the process alive through it.
type interrupts struct {
	mu      sync.Mutex
	next    int
	cancels map[int]context.CancelFunc
}

// watchInterrupts starts delivering the process's SIGINTs to the sweeps
// registered with stopOnInterrupt, for as long as the process lives.
func watchInterrupts() *interrupts {
	in := &interrupts{cancels: map[int]context.CancelFunc{}}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	go func() {
		for range ch {
			in.fire()
		}
	}()
	return in
}

func (in *interrupts) fire() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, cancel := range in.cancels {
		cancel()
	}
}

// stopOnInterrupt returns a context that ctx's cancellation or the next
// SIGINT cancels, and the function that releases it. A nil receiver (a
// server not started by Serve, as in tests) only derives from ctx.
func (in *interrupts) stopOnInterrupt(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	if in == nil {
		return ctx, cancel
	}
	in.mu.Lock()
	id := in.next
	in.next++
	in.cancels[id] = cancel
	in.mu.Unlock()
	return ctx, func() {
		in.mu.Lock()
		delete(in.cancels, id)
		in.mu.Unlock()
		cancel()
	}
}
