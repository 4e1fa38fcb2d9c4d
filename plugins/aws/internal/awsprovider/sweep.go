package awsprovider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
)

// DefaultMaxIdlePasses stops a sweep after this many passes in which
// nothing was deleted and nothing was still being deleted.
const DefaultMaxIdlePasses = 5

// reportMargin is kept before the caller's deadline to report what is left.
const reportMargin = 3 * time.Second

// perRegionConcurrency bounds parallel deletions per region: enough to
// overlap slow calls, few enough to stay clear of API rate limits.
const perRegionConcurrency = 8

// outcome of one deletion attempt.
type outcome int

const (
	outDeleted  outcome = iota // this call deleted it
	outGone                    // not found: removed by this run's earlier call, or by someone else
	outDeleting                // accepted, finishing asynchronously: poll again
	outRetry                   // blocked by a dependency or a transient state
	outFailed                  // will not succeed by waiting
)

type attempt struct {
	out outcome
	msg string
}

// node is one resource in the deletion graph.
type node struct {
	r        sdk.Resource
	state    sdk.SweepState
	attempts int
	started  bool // an asynchronous deletion was accepted
	retried  bool // the last attempt was refused for now (dependency, transient state)
	reason   string
}

// Sweep deletes exactly the resources of req.Scope that a fresh discovery
// still finds krops-owned, in dependency order, each pass deleting
// everything unblocked in parallel. Dependency violations and asynchronous
// deletions are retried on later passes; the sweep ends when the scope is
// gone or after MaxIdlePasses passes without progress. With DryRun it only
// reports the plan in deletion order.
func (p *Provider) Sweep(ctx context.Context, req sdk.SweepRequest, emit func(sdk.SweepEvent) error) error {
	if _, err := p.checkedAccount(ctx); err != nil {
		return err
	}
	current, err := p.inventory(ctx)
	if err != nil {
		return err
	}
	nodes := map[string]*node{}
	var order []string
	for _, r := range req.Scope {
		key := r.Kind + "/" + r.ID
		if _, dup := nodes[key]; dup {
			continue
		}
		fresh, ok := current[key]
		if !ok {
			if err := emit(sdk.SweepEvent{Resource: r, State: sdk.SweepSkipped, Message: "not found among this environment's resources (already gone, or not krops-owned)"}); err != nil {
				return err
			}
			continue
		}
		nodes[key] = &node{r: fresh, state: sdk.SweepPlanned}
		order = append(order, key)
	}
	byID := map[string]string{}
	for key, n := range nodes {
		byID[n.r.ID] = key
	}
	// A dependency is an id, or kind/id where the id alone is ambiguous.
	resolve := func(dep string) (string, bool) {
		if _, ok := nodes[dep]; ok {
			return dep, true
		}
		k, ok := byID[dep]
		return k, ok
	}
	plan := topoOrder(nodes, order, resolve)
	for i, key := range plan {
		n := nodes[key]
		msg := fmt.Sprintf("step %d of %d", i+1, len(plan))
		if len(n.r.DependsOn) > 0 {
			msg += " after " + strings.Join(n.r.DependsOn, ", ")
		}
		if err := emit(sdk.SweepEvent{Resource: n.r, State: sdk.SweepPlanned, Message: msg}); err != nil {
			return err
		}
	}
	if req.DryRun {
		return nil
	}
	maxIdle := req.MaxIdlePasses
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdlePasses
	}
	var mu sync.Mutex
	send := func(ev sdk.SweepEvent) error {
		mu.Lock()
		defer mu.Unlock()
		return emit(ev)
	}
	// Stop early enough before the caller's deadline to report what is left
	// while the stream is still open.
	deadline, hasDeadline := ctx.Deadline()
	timedOut := false
	poll := newPoller(p.o.FirstPoll, p.o.PollInterval)
	for idle := 0; idle < maxIdle; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if hasDeadline && time.Until(deadline) < reportMargin {
			timedOut = true
			break
		}
		ready := p.unblocked(nodes, plan, resolve)
		if len(ready) == 0 && !anyOpen(nodes) {
			break
		}
		progress, started, err := p.pass(ctx, nodes, ready, send)
		if err != nil {
			return err
		}
		if progress {
			idle = 0
		} else {
			idle++
		}
		if !anyWaiting(nodes) {
			continue // what is left is ready now: no reason to wait
		}
		if started {
			poll.reset() // a deletion was just accepted: look again soon
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll.next()):
		}
	}
	for _, key := range plan {
		n := nodes[key]
		if n.state == sdk.SweepDeleted || n.state == sdk.SweepFailed {
			continue
		}
		reason := n.reason
		if reason == "" {
			reason = "blocked by resources that are still there"
		}
		msg := fmt.Sprintf("left after %d passes without progress: %s", maxIdle, reason)
		if timedOut {
			msg = "left when the sweep's time ran out: " + reason
		}
		if err := emit(sdk.SweepEvent{Resource: n.r, State: sdk.SweepFailed, Message: msg, Attempt: n.attempts}); err != nil {
			return err
		}
	}
	return nil
}

// inventory is a fresh, read-only discovery keyed by kind/id. Any failed
// query aborts: deleting from a partial picture could remove a resource
// whose dependants were not seen.
func (p *Provider) inventory(ctx context.Context) (map[string]sdk.Resource, error) {
	account, err := p.account(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := map[string]sdk.Resource{}
	var failures []string
	var mu sync.Mutex
	e := &emitter{cancel: cancel, emit: func(ev sdk.DiscoverEvent) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Resource != nil:
			out[ev.Resource.Kind+"/"+ev.Resource.ID] = *ev.Resource
		case ev.Error != nil:
			failures = append(failures, fmt.Sprintf("%s in %s: %s", ev.Error.Kind, ev.Error.Region, ev.Error.Message))
		}
		return nil
	}}
	p.scan(ctx, account, e)
	if len(failures) > 0 {
		sort.Strings(failures)
		return nil, fmt.Errorf("%w: re-checking the scope failed: %s", sdk.ErrUnknownState, strings.Join(failures, "; "))
	}
	return out, nil
}

// topoOrder lists keys so that every resource comes after what it depends
// on; ties keep discovery order.
func topoOrder(nodes map[string]*node, order []string, resolve func(string) (string, bool)) []string {
	done := map[string]bool{}
	var out []string
	var visit func(key string, stack map[string]bool)
	visit = func(key string, stack map[string]bool) {
		if done[key] || stack[key] {
			return
		}
		stack[key] = true
		for _, dep := range nodes[key].r.DependsOn {
			if k, ok := resolve(dep); ok {
				visit(k, stack)
			}
		}
		delete(stack, key)
		done[key] = true
		out = append(out, key)
	}
	for _, k := range order {
		visit(k, map[string]bool{})
	}
	return out
}

func anyOpen(nodes map[string]*node) bool {
	for _, n := range nodes {
		if n.started && n.state != sdk.SweepDeleted && n.state != sdk.SweepFailed {
			return true
		}
	}
	return false
}

// anyWaiting says the next pass needs time to pass first: a deletion is
// finishing, or a resource was refused for a dependency or a transient
// state that only time clears.
func anyWaiting(nodes map[string]*node) bool {
	for _, n := range nodes {
		if n.state != sdk.SweepDeleted && n.state != sdk.SweepFailed && (n.started || n.retried) {
			return true
		}
	}
	return false
}

// poller spaces sweep passes: soon after a deletion was accepted (many
// finish within seconds), then doubling up to the ceiling, so a fast API
// is not held up by fixed pauses and a slow one is not polled needlessly.
type poller struct {
	first, ceiling, cur time.Duration
}

func newPoller(first, ceiling time.Duration) *poller {
	if first <= 0 || first > ceiling {
		first = ceiling
	}
	return &poller{first: first, ceiling: ceiling, cur: first}
}

func (p *poller) reset() { p.cur = p.first }

func (p *poller) next() time.Duration {
	d := p.cur
	p.cur = min(2*p.cur, p.ceiling)
	return d
}

// unblocked returns nodes not finished whose in-scope dependencies are
// deleted, plus asynchronous deletions to poll.
func (p *Provider) unblocked(nodes map[string]*node, plan []string, resolve func(string) (string, bool)) []*node {
	var out []*node
	for _, key := range plan {
		n := nodes[key]
		if n.state == sdk.SweepDeleted || n.state == sdk.SweepFailed {
			continue
		}
		blocked := false
		for _, dep := range n.r.DependsOn {
			if k, ok := resolve(dep); ok && nodes[k].state != sdk.SweepDeleted {
				blocked = true
				if nodes[k].state == sdk.SweepFailed {
					n.reason = "its dependency " + dep + " could not be deleted"
				} else {
					n.reason = "waiting for " + dep
				}
				break
			}
		}
		if !blocked {
			out = append(out, n)
		}
	}
	return out
}

// pass attempts every ready node, in parallel with a bound per region. It
// reports whether the sweep progressed and whether an asynchronous
// deletion was newly accepted.
func (p *Provider) pass(ctx context.Context, nodes map[string]*node, ready []*node, send func(sdk.SweepEvent) error) (progress, started bool, err error) {
	sems := map[string]chan struct{}{}
	for _, n := range ready {
		if sems[n.r.Region] == nil {
			limit := perRegionConcurrency
			if p.o.Sequential {
				limit = 1
			}
			sems[n.r.Region] = make(chan struct{}, limit)
		}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		sendErr error
	)
	report := func(ev sdk.SweepEvent) {
		if err := send(ev); err != nil {
			mu.Lock()
			sendErr = err
			mu.Unlock()
		}
	}
	attempt := func(n *node) {
		wasStarted := n.started
		moved := p.attemptNode(ctx, n, report)
		mu.Lock()
		progress = progress || moved
		started = started || (n.started && !wasStarted)
		mu.Unlock()
	}
	for _, n := range ready {
		if p.o.Sequential {
			attempt(n)
			continue
		}
		sem := sems[n.r.Region]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			attempt(n)
		}()
	}
	wg.Wait()
	return progress, started, sendErr
}

// attemptNode runs one deletion step for n and reports whether the sweep
// progressed (a deletion finished or is still under way).
func (p *Provider) attemptNode(ctx context.Context, n *node, report func(sdk.SweepEvent)) bool {
	if !n.started {
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleting, Attempt: n.attempts + 1})
	}
	n.attempts++
	a := p.deleteOne(ctx, n.r, n.started, n.attempts, func(msg string) {
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleting, Message: msg, Attempt: n.attempts})
	})
	n.retried = a.out == outRetry
	switch a.out {
	case outDeleted:
		n.state = sdk.SweepDeleted
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleted, Message: a.msg, Attempt: n.attempts})
		return true
	case outGone:
		// Only what this run did not delete is "already gone".
		msg := "already gone: removed by someone else since discovery"
		if n.started {
			msg = "deletion finished"
		}
		n.state = sdk.SweepDeleted
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleted, Message: msg, Attempt: n.attempts})
		return true
	case outDeleting:
		n.started, n.reason = true, a.msg
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepRetrying, Message: a.msg, Attempt: n.attempts})
		return true
	case outRetry:
		n.reason = a.msg
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepRetrying, Message: a.msg, Attempt: n.attempts})
		return false
	default:
		n.state, n.reason = sdk.SweepFailed, a.msg
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepFailed, Message: a.msg, Attempt: n.attempts})
		return false
	}
}
