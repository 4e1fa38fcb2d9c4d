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
	"sort"
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
	// Calls counts the calls of Delete.
	Calls int
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
	r        sdk.Resource
	key      string
	deps     []*node // in-scope resources that must be gone first
	state    State
	attempts int
	accepted bool // an asynchronous deletion was accepted
	inFlight bool
	// due is the end of the pause before the next attempt (poll, backoff,
	// RetryAfter).
	due  time.Time
	poll *poller
	// idle counts attempts refused since the sweep last progressed.
	idle int
	// height is the longest chain of resources waiting on this one: the
	// tallest are scheduled first.
	height int
	reason string
}

// parked: refused max times in a row with nothing progressing meanwhile.
func (n *node) parked(max int) bool { return n.idle >= max }

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
		return e.summary(), err
	}
	for i, n := range e.plan {
		msg := fmt.Sprintf("step %d of %d", i+1, len(e.plan))
		if len(n.r.DependsOn) > 0 {
			msg += " after " + strings.Join(n.r.DependsOn, ", ")
		}
		if err := e.send(sdk.SweepEvent{Resource: n.r, State: sdk.SweepPlanned, Message: msg}); err != nil {
			return e.summary(), err
		}
	}
	if req.DryRun {
		return e.summary(), nil
	}
	if err := e.loop(ctx); err != nil {
		e.stopped = true
		return e.summary(), err
	}
	err := e.finish()
	return e.summary(), err
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
	calls    int
	timedOut bool
	sendErr  error
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
		e.all = append(e.all, &node{r: r, key: key, state: StatePlanned, poll: newPoller(e.o.FirstPoll, e.o.PollInterval)})
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
	// Heights, in reverse plan order: everything waiting on a resource
	// comes after it in the plan.
	waiters := map[*node][]*node{}
	for _, n := range e.all {
		for _, d := range n.deps {
			waiters[d] = append(waiters[d], n)
		}
	}
	for i := len(e.plan) - 1; i >= 0; i-- {
		n := e.plan[i]
		for _, w := range waiters[n] {
			n.height = max(n.height, w.height+1)
		}
	}
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

// loop schedules deletions as events arrive rather than in passes: a
// resource is attempted the moment what it depends on is confirmed gone
// and its region has a free slot, tallest first (the resources most others
// wait on), so one slow call never holds back work that does not depend on
// it. Accepted and blocked deletions come back after their own pause.
func (e *engine) loop(ctx context.Context) error {
	deadline, hasDeadline := ctx.Deadline()
	results := make(chan done)
	busy := map[string]int{} // calls in flight per region
	running := 0
	for {
		stopping := ctx.Err() != nil || e.sendFailed() != nil
		if !stopping && hasDeadline && time.Until(deadline) < e.o.ReportMargin {
			stopping, e.timedOut = true, true
		}
		now := time.Now()
		if !stopping {
			for _, n := range e.candidates(now) {
				slot := e.slot(n)
				if busy[slot] >= e.o.Concurrency {
					continue
				}
				busy[slot]++
				running++
				e.launch(ctx, n, results)
			}
		}
		var wake <-chan time.Time
		var timer *time.Timer
		if !stopping {
			if next, ok := e.nextDue(now); ok {
				d := time.Until(next)
				if hasDeadline {
					d = min(d, time.Until(deadline)-e.o.ReportMargin)
				}
				timer = time.NewTimer(max(d, 0))
				wake = timer.C
			}
		}
		if running == 0 && (stopping || wake == nil) {
			if timer != nil {
				timer.Stop()
			}
			if err := e.sendFailed(); err != nil {
				return err
			}
			if e.timedOut {
				return nil
			}
			return ctx.Err() // nil when nothing is left to try
		}
		select {
		case d := <-results:
			running--
			busy[e.slot(d.n)]--
			e.apply(ctx, d)
		case <-wake:
		case <-ctx.Done():
			if running == 0 {
				return ctx.Err()
			}
			// Let the calls in flight return; they see the cancellation.
			d := <-results
			running--
			busy[e.slot(d.n)]--
			e.apply(ctx, d)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// done is one finished call.
type done struct {
	n   *node
	res Result
}

// slot is the concurrency bucket of n: its region, or one bucket for all
// when calls run one at a time.
func (e *engine) slot(n *node) string {
	if e.o.Concurrency == 1 {
		return ""
	}
	return n.r.Region
}

func (e *engine) sendFailed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sendErr
}

// report emits ev; a failed emit ends the run once the calls in flight
// have returned.
func (e *engine) report(ev sdk.SweepEvent) {
	if err := e.send(ev); err != nil {
		e.mu.Lock()
		if e.sendErr == nil {
			e.sendErr = err
		}
		e.mu.Unlock()
	}
}

// candidates are the open resources that may be attempted now: not in
// flight, not given up on, everything they depend on confirmed gone, and
// their pause over. The tallest come first, then plan order.
func (e *engine) candidates(now time.Time) []*node {
	var out []*node
	for _, n := range e.plan {
		if n.final() || n.inFlight || n.parked(e.o.MaxIdlePasses) || firstOpenDep(n) != nil || n.due.After(now) {
			continue
		}
		out = append(out, n)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].height > out[j].height })
	return out
}

// nextDue is the earliest pause still to end among resources that could
// be attempted after it. Resources ready now but waiting for a slot are
// not counted: a call in flight will return and free one.
func (e *engine) nextDue(now time.Time) (time.Time, bool) {
	var next time.Time
	for _, n := range e.plan {
		if n.final() || n.inFlight || n.parked(e.o.MaxIdlePasses) || firstOpenDep(n) != nil || !n.due.After(now) {
			continue
		}
		if next.IsZero() || n.due.Before(next) {
			next = n.due
		}
	}
	return next, !next.IsZero()
}

func firstOpenDep(n *node) *node {
	for _, d := range n.deps {
		if d.state != StateDeleted {
			return d
		}
	}
	return nil
}

// launch starts one call for n.
func (e *engine) launch(ctx context.Context, n *node, results chan<- done) {
	n.inFlight = true
	n.attempts++
	if !n.accepted {
		e.report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleting, Attempt: n.attempts})
	}
	e.setState(n, StateDeleting, n.reason)
	r, a := n.r, Attempt{N: n.attempts, Polling: n.accepted}
	a.Progress = func(msg string) {
		e.report(sdk.SweepEvent{Resource: r, State: sdk.SweepDeleting, Message: msg, Attempt: a.N})
	}
	e.calls++
	go func() { results <- done{n: n, res: e.o.Delete(ctx, r, a)} }()
}

// apply records a finished call and reports it.
func (e *engine) apply(ctx context.Context, d done) {
	n, res := d.n, d.res
	n.inFlight = false
	now := time.Now()
	if ctx.Err() != nil && res.Outcome != Deleted && res.Outcome != Gone {
		// Interrupted mid-call: what the call achieved is unknown.
		e.setState(n, StateWaiting, "interrupted during its deletion call")
		return
	}
	n.due = time.Time{}
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
		e.progressed()
		e.report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepDeleted, Message: msg, Attempt: n.attempts})
		return
	case InProgress:
		if !n.accepted {
			n.accepted = true
			n.poll.reset() // just accepted: look again soon
		}
		n.due = now.Add(n.poll.next())
		e.setState(n, StateWaiting, res.Message)
		e.progressed()
		e.report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepRetrying, Message: res.Message, Attempt: n.attempts})
	case Blocked:
		n.idle++
		n.due = now.Add(n.poll.next())
		e.setState(n, StateWaiting, res.Message)
		e.report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepRetrying, Message: res.Message, Attempt: n.attempts})
	default:
		e.setState(n, StateFailed, res.Message)
		e.report(sdk.SweepEvent{Resource: n.r, State: sdk.SweepFailed, Message: res.Message, Attempt: n.attempts})
		return
	}
	if res.RetryAfter > 0 {
		if t := now.Add(res.RetryAfter); t.After(n.due) {
			n.due = t
		}
	}
}

// progressed gives every blocked resource its attempts back: something
// was deleted or is being deleted, which may be what blocked them.
func (e *engine) progressed() {
	for _, n := range e.plan {
		n.idle = 0
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
		if dep := firstOpenDep(n); dep != nil {
			if dep.state == StateFailed {
				reason = "its dependency " + dep.key + " could not be deleted"
			} else {
				reason = "waiting for " + dep.key
			}
		}
		if reason == "" {
			reason = "blocked by resources that are still there"
		}
		msg := fmt.Sprintf("left after %d attempts in a row without progress: %s", e.o.MaxIdlePasses, reason)
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

func (e *engine) summary() Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Report{Calls: e.calls, TimedOut: e.timedOut}
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
