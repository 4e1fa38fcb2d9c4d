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
	mu      sync.Mutex
	pids    map[int]struct{}
	killers map[int]func()
	next    int
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

// Kill sends SIGKILL to every live group and runs every registered killer.
func (g *Groups) Kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pid := range g.pids {
		_ = signalGroup(pid, syscall.SIGKILL)
	}
	for _, k := range g.killers {
		k()
	}
}

// OnKill registers kill with ctx's Groups until the returned func is
// called: for children a library starts itself (kind runs docker without a
// context), which a forced exit must end as well.
func OnKill(ctx context.Context, kill func()) (unregister func()) {
	g, ok := ctx.Value(groupsKey{}).(*Groups)
	if !ok {
		return func() {}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.killers == nil {
		g.killers = map[int]func(){}
	}
	g.next++
	id := g.next
	g.killers[id] = kill
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.killers, id)
	}
}
