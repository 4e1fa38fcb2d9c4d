package proc

import (
	"context"
	"sync"
	"syscall"
)

// Groups are the live process groups that Exec{OwnGroup: true} started
// under one context. A forced exit (a second Ctrl-C) ends the process
// without waiting for any cancellation to run its course: it kills these
// first, so no engine CLI or wrapper child is left running.
type Groups struct {
	mu   sync.Mutex
	pids map[int]struct{}
}

type groupsKey struct{}

// WithGroups returns ctx carrying a new Groups that every Exec{OwnGroup:
// true} run under it registers with.
func WithGroups(ctx context.Context) (context.Context, *Groups) {
	g := &Groups{pids: map[int]struct{}{}}
	return context.WithValue(ctx, groupsKey{}, g), g
}

// groupsFrom is the context's Groups, or a throwaway one.
func groupsFrom(ctx context.Context) *Groups {
	if g, ok := ctx.Value(groupsKey{}).(*Groups); ok {
		return g
	}
	return &Groups{pids: map[int]struct{}{}}
}

func (g *Groups) add(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pids[pid] = struct{}{}
}

func (g *Groups) remove(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pids, pid)
}

// Kill sends SIGKILL to every live group.
func (g *Groups) Kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pid := range g.pids {
		_ = signalGroup(pid, syscall.SIGKILL)
	}
}
