// Package sweep is the deletion engine a provider's Sweep runs on. The
// provider says how to delete one resource; the engine owns everything
// else: the dependency graph, passes, bounded concurrency per region,
// polling of asynchronous deletions, idle and deadline limits, the event
// stream and the final report.
//
// A resource's DependsOn lists what must be gone before it can be deleted
// (a VPC depends on its subnets), by id, or by kind/id where an id alone is
// ambiguous. The engine never calls Delete for a resource until everything
// it depends on within the scope is confirmed gone, never calls it for a
// resource outside the scope, and reports every resource of the scope in
// exactly one final state: deleted, failed (with the reason it is left) or
// skipped.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Outcome is what one deletion attempt achieved.
type Outcome int

const (
	// Deleted: this call deleted the resource.
	Deleted Outcome = iota
	// Gone: the resource was not found. After an accepted asynchronous
	// deletion that is its end; otherwise someone else removed it.
	Gone
	// InProgress: the deletion was accepted and finishes asynchronously;
	// the engine polls it with Attempt.Polling set.
	InProgress
	// Blocked: refused for now, by a dependency the discovery did not see or
	// a transient state; the engine tries again on a later pass.
	Blocked
	// Failed: waiting will not help. The resource is reported left, and what
	// depends on it is not attempted.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Deleted:
		return "deleted"
	case Gone:
		return "gone"
	case InProgress:
		return "in progress"
	case Blocked:
		return "blocked"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of one attempt and what to tell the user about it.
type Result struct {
	Outcome Outcome
	Message string
	// RetryAfter, with InProgress or Blocked, is the earliest the resource
	// is worth another attempt (a throttled API's Retry-After).
	RetryAfter time.Duration
}

// Attempt describes one call of Delete.
type Attempt struct {
	// N counts the calls for this resource, from 1.
	N int
	// Polling is set once a deletion was accepted (InProgress): the call
	// should check on it rather than ask again.
	Polling bool
	// Progress reports a step inside a long deletion (emptying a bucket).
	Progress func(message string)
}

// DeleteFunc deletes, or checks on the deletion of, one resource.
type DeleteFunc func(ctx context.Context, r sdk.Resource, a Attempt) Result

// Defaults for Options' zero values.
const (
	DefaultMaxIdlePasses = 5
	DefaultConcurrency   = 8
	DefaultPollInterval  = 10 * time.Second
	DefaultReportMargin  = 3 * time.Second
)

// Options configure Run.
type Options struct {
	// Delete deletes one resource. Required.
	Delete DeleteFunc
	// Inventory, when set, is a fresh read-only discovery keyed by kind/id.
	// Run deletes only what it still finds (with its fresh details) and
	// reports the rest of the scope skipped. An error aborts before any
	// deletion; wrap sdk.ErrUnknownState when the picture is partial.
	Inventory func(ctx context.Context) (map[string]sdk.Resource, error)
	// MaxIdlePasses ends the sweep after this many passes in which nothing
	// was deleted and nothing was still being deleted; the request's value
	// wins when set.
	MaxIdlePasses int
	// Concurrency bounds parallel calls per region.
	Concurrency int
	// FirstPoll is the pause after a deletion was accepted; it doubles up
	// to PollInterval while nothing new is accepted. Zero means
	// PollInterval; a negative PollInterval means no pauses (tests).
	FirstPoll, PollInterval time.Duration
	// ReportMargin is kept before the context's deadline to report what is
	// left while the caller still listens.
	ReportMargin time.Duration
}

// State is where one resource of the scope stands.
type State string

const (
	StatePlanned    State = "planned"
	StateDeleting   State = "deleting"
	StateWaiting    State = "waiting" // blocked, or an accepted deletion to poll
	StateDeleted    State = "deleted"
	StateFailed     State = "failed"
	StateSkipped    State = "skipped"
	StateNotReached State = "not-reached" // the run stopped first (interrupt)
)

// Entry is one resource in the report.
type Entry struct {
	Resource sdk.Resource
	State    State
	Attempts int
	Message  string
}

// Report is every resource of the scope, in deletion order, with its final
// state, and how the run went.
type Report struct {
	Entries []Entry
	Passes  int
	// TimedOut: the deadline, not idleness, ended the run.
	TimedOut bool
}

// Left counts the resources not deleted (failed or not reached).
func (r Report) Left() int {
	n := 0
	for _, e := range r.Entries {
		if e.State == StateFailed || e.State == StateNotReached {
			n++
		}
	}
	return n
}

// ErrNoDelete is returned when Options.Delete is missing.
var ErrNoDelete = errors.New("sweep: Options.Delete is required")

// node is one resource in the deletion graph.
type node struct {
	r         sdk.Resource
	key       string
	deps      []*node // in-scope resources that must be gone first
	state     State
	attempts  int
	accepted  bool // an asynchronous deletion was accepted
	blocked   bool // the last attempt was refused for now
	notBefore time.Time
	reason    string
}

func (n *node) final() bool {
	return n.state == StateDeleted || n.state == StateFailed || n.state == StateSkipped
}

// Run sweeps req.Scope: it emits planned for each resource in deletion
// order, returns there with DryRun, and otherwise deletes in passes until
// the scope is gone, MaxIdlePasses passes in a row achieve nothing, or the
// deadline nears. Each resource's last event is final (deleted, failed or
// skipped). An error from emit or a cancelled ctx ends the run at once;
// the report then marks what was not finished as not reached.
func Run(ctx context.Context, req sdk.SweepRequest, emit func(sdk.SweepEvent) error, o Options) (Report, error) {
	if o.Delete == nil {
		return Report{}, ErrNoDelete
	}
	o = withDefaults(o, req)
	e := &engine{o: o, emit: emit}
	if err := e.build(ctx, req.Scope); err != nil {
		return e.report(), err
	}
	for i, n := range e.plan {
		msg := fmt.Sprintf("step %d of %d", i+1, len(e.plan))
		if len(n.r.DependsOn) > 0 {
			msg += " after " + strings.Join(n.r.DependsOn, ", ")
		}
		if err := e.send(sdk.SweepEvent{Resource: n.r, State: sdk.SweepPlanned, Message: msg}); err != nil {
			return e.report(), err
		}
	}
	if req.DryRun {
		return e.report(), nil
	}
	if err := e.loop(ctx); err != nil {
		e.stopped = true
		return e.report(), err
	}
	err := e.finish()
	return e.report(), err
}

func withDefaults(o Options, req sdk.SweepRequest) Options {
	if req.MaxIdlePasses > 0 {
		o.MaxIdlePasses = req.MaxIdlePasses
	}
	if o.MaxIdlePasses <= 0 {
		o.MaxIdlePasses = DefaultMaxIdlePasses
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PollInterval < 0 {
		o.PollInterval, o.FirstPoll = 0, 0
	}
	if o.ReportMargin <= 0 {
		o.ReportMargin = DefaultReportMargin
	}
	return o
}

type engine struct {
	o    Options
	emit func(sdk.SweepEvent) error
	mu   sync.Mutex // serialises emit and node updates from parallel calls
	all  []*node    // the scope, deduplicated, in request order
	plan []*node    // deletion order
	// skipped are scope entries not found by the fresh inventory.
	skipped  []*node
	passes   int
	timedOut bool
	// stopped: an interrupt or a failed emit ended the run early.
	stopped bool
}

func (e *engine) send(ev sdk.SweepEvent) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.emit(ev)
}

// build deduplicates the scope, re-checks it against a fresh inventory,
// resolves dependencies and orders the plan.
func (e *engine) build(ctx context.Context, scope []sdk.Resource) error {
	var current map[string]sdk.Resource
	if e.o.Inventory != nil {
		var err error
		if current, err = e.o.Inventory(ctx); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, r := range scope {
		key := r.Kind + "/" + r.ID
		if seen[key] {
			continue
		}
		seen[key] = true
		if current != nil {
			fresh, ok := current[key]
			if !ok {
				n := &node{r: r, key: key, state: StateSkipped, reason: "not found among this environment's resources (already gone, or not krops-owned)"}
				e.skipped = append(e.skipped, n)
				if err := e.send(sdk.SweepEvent{Resource: r, State: sdk.SweepSkipped, Message: n.reason}); err != nil {
					return err
				}
				continue
			}
			r = fresh
		}
		e.all = append(e.all, &node{r: r, key: key, state: StatePlanned})
	}
	byKey := map[string]*node{}
	byID := map[string][]*node{}
	for _, n := range e.all {
		byKey[n.key] = n
		byID[n.r.ID] = append(byID[n.r.ID], n)
	}
	for _, n := range e.all {
		for _, dep := range n.r.DependsOn {
			if d, ok := byKey[dep]; ok {
				n.deps = append(n.deps, d)
				continue
			}
			// An id shared by two kinds is ambiguous: wait for both.
			for _, d := range byID[dep] {
				if d != n {
					n.deps = append(n.deps, d)
				}
			}
		}
	}
	e.plan = topoOrder(e.all)
	return nil
}

// topoOrder lists nodes so that each comes after what it depends on; ties
// keep request order. A cycle is broken where it is found; its members are
// then blocked on each other and end failed, which is the truth.
func topoOrder(all []*node) []*node {
	done := map[*node]bool{}
	var out []*node
	var visit func(n *node, stack map[*node]bool)
	visit = func(n *node, stack map[*node]bool) {
		if done[n] || stack[n] {
			return
		}
		stack[n] = true
		for _, d := range n.deps {
			visit(d, stack)
		}
		delete(stack, n)
		done[n] = true
		out = append(out, n)
	}
	for _, n := range all {
		visit(n, map[*node]bool{})
	}
	return out
}

func (e *engine) loop(ctx context.Context) error {
	deadline, hasDeadline := ctx.Deadline()
	poll := newPoller(e.o.FirstPoll, e.o.PollInterval)
	for idle := 0; idle < e.o.MaxIdlePasses; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if hasDeadline && time.Until(deadline) < e.o.ReportMargin {
			e.timedOut = true
			return nil
		}
		ready, waitUntil := e.ready(time.Now())
		if len(ready) == 0 && waitUntil.IsZero() {
			return nil // everything is final, or blocked by what failed
		}
		progress, accepted := false, false
		if len(ready) > 0 {
			e.passes++
			var err error
			if progress, accepted, err = e.pass(ctx, ready); err != nil {
				return err
			}
		}
		if progress {
			idle = 0
		} else if len(ready) > 0 {
			idle++
		}
		if accepted {
			poll.reset() // a deletion was just accepted: look again soon
		}
		wait := time.Duration(0)
		if e.waiting() {
			wait = poll.next()
		}
		if next, _ := e.ready(time.Now()); len(next) == 0 && !waitUntil.IsZero() {
			// Only resources with a RetryAfter remain: sleep until the first.
			if d := time.Until(waitUntil); d > wait {
				wait = d
			}
		}
		if wait > 0 {
			if hasDeadline && time.Until(deadline)-e.o.ReportMargin < wait {
				wait = max(0, time.Until(deadline)-e.o.ReportMargin)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return nil
}

// ready lists the open resources whose dependencies are all deleted and
// whose RetryAfter has passed; waitUntil is the earliest RetryAfter still
// ahead (zero when none).
func (e *engine) ready(now time.Time) (ready []*node, waitUntil time.Time) {
	for _, n := range e.plan {
		if n.final() {
			continue
		}
		if dep := firstOpenDep(n); dep != nil {
			if dep.state == StateFailed {
				n.reason = "its dependency " + dep.key + " could not be deleted"
			} else {
				n.reason = "waiting for " + dep.key
			}
			continue
		}
		if n.notBefore.After(now) {
			if waitUntil.IsZero() || n.notBefore.Before(waitUntil) {
				waitUntil = n.notBefore
			}
			continue
		}
		ready = append(ready, n)
	}
	return ready, waitUntil
}

func firstOpenDep(n *node) *node {
	for _, d := range n.deps {
		if d.state != StateDeleted {
			return d
		}
	}
	return nil
}

// waiting says the next pass needs time to pass first: a deletion is
// finishing, or an attempt was refused for a state that only time clears.
func (e *engine) waiting() bool {
	for _, n := range e.plan {
		if !n.final() && (n.accepted || n.blocked) {
			return true
		}
	}
	return false
}

// pass attempts every ready resource, in parallel within each region's
// bound. It reports whether the sweep progressed and whether a deletion
// was newly accepted.
func (e *engine) pass(ctx context.Context, ready []*node) (progress, accepted bool, err error) {
	sems := map[string]chan struct{}{}
	var (
		wg      sync.WaitGroup
		resMu   sync.Mutex
		sendErr error
	)
	report := func(ev sdk.SweepEvent) {
		if err := e.send(ev); err != nil {
			resMu.Lock()
			sendErr = err
			resMu.Unlock()
		}
	}
	for _, n := range ready {
		if e.o.Concurrency == 1 {
			// One call at a time, in plan order: a deterministic baseline.
			wasAccepted := n.accepted
			progress = e.attempt(ctx, n, report) || progress
			accepted = accepted || (n.accepted && !wasAccepted)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		sem := sems[n.r.Region]
		if sem == nil {
			sem = make(chan struct{}, e.o.Concurrency)
			sems[n.r.Region] = sem
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			wasAccepted := n.accepted
			moved := e.attempt(ctx, n, report)
			resMu.Lock()
			progress = progress || moved
			accepted = accepted || (n.accepted && !wasAccepted)
			resMu.Unlock()
		}()
	}
	wg.Wait()
	if sendErr != nil {
		return progress, accepted, sendErr
	}
	return progress, accepted, ctx.Err()
}

// attempt runs one deletion step for n and reports whether the sweep
// progressed (a deletion finished or is under way).
func (e *engine) attempt(ctx context.Context, n *node, report func(sdk.SweepEvent)) bool {
	if !n.accepted {
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleting, Attempt: n.attempts + 1})
	}
	n.attempts++
	e.mu.Lock()
	n.state = StateDeleting
	e.mu.Unlock()
	res := e.o.Delete(ctx, n.r, Attempt{N: n.attempts, Polling: n.accepted, Progress: func(msg string) {
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleting, Message: msg, Attempt: n.attempts})
	}})
	if ctx.Err() != nil && res.Outcome != Deleted && res.Outcome != Gone {
		// Interrupted mid-call: what the call achieved is unknown.
		e.mu.Lock()
		n.state, n.reason = StateWaiting, "interrupted during its deletion call"
		e.mu.Unlock()
		return false
	}
	e.mu.Lock()
	n.blocked = res.Outcome == Blocked
	n.notBefore = time.Time{}
	if res.RetryAfter > 0 {
		n.notBefore = time.Now().Add(res.RetryAfter)
	}
	e.mu.Unlock()
	switch res.Outcome {
	case Deleted, Gone:
		msg := res.Message
		if res.Outcome == Gone {
			// Only what this run did not delete is "already gone".
			msg = "already gone: removed by someone else since discovery"
			if n.accepted {
				msg = "deletion finished"
			}
		}
		e.setState(n, StateDeleted, msg)
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleted, Message: msg, Attempt: n.attempts})
		return true
	case InProgress:
		n.accepted = true
		e.setState(n, StateWaiting, res.Message)
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepRetrying, Message: res.Message, Attempt: n.attempts})
		return true
	case Blocked:
		e.setState(n, StateWaiting, res.Message)
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepRetrying, Message: res.Message, Attempt: n.attempts})
		return false
	default:
		e.setState(n, StateFailed, res.Message)
		report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepFailed, Message: res.Message, Attempt: n.attempts})
		return false
	}
}

func (e *engine) setState(n *node, s State, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n.state, n.reason = s, reason
}

// finish reports every resource still open as failed, with why it is left.
func (e *engine) finish() error {
	for _, n := range e.plan {
		if n.final() {
			continue
		}
		reason := n.reason
		if reason == "" {
			reason = "blocked by resources that are still there"
		}
		msg := fmt.Sprintf("left after %d passes without progress: %s", e.o.MaxIdlePasses, reason)
		if e.timedOut {
			msg = "left when the sweep's time ran out: " + reason
		}
		n.state, n.reason = StateFailed, msg
		if err := e.send(sdk.SweepEvent{Resource: n.r, State: sdk.SweepFailed, Message: msg, Attempt: n.attempts}); err != nil {
			return err
		}
	}
	return nil
}

func (e *engine) report() Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Report{Passes: e.passes, TimedOut: e.timedOut}
	for _, n := range e.skipped {
		r.Entries = append(r.Entries, Entry{Resource: n.r, State: StateSkipped, Message: n.reason})
	}
	for _, n := range e.plan {
		st := n.state
		if e.stopped && !n.final() {
			st = StateNotReached
		}
		r.Entries = append(r.Entries, Entry{Resource: n.r, State: st, Attempts: n.attempts, Message: n.reason})
	}
	return r
}

// poller spaces passes while deletions finish: soon after one was accepted
// (many finish within seconds), then doubling up to the ceiling, so a fast
// API is not held up by fixed pauses and a slow one is not polled
// needlessly.
type poller struct{ first, ceiling, cur time.Duration }

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
