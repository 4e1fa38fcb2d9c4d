// Package kubewait waits for Kubernetes objects to reach a condition by
// watching them, never by sleeping: a wait returns as soon as the API server
// reports the change. While it waits it reports which objects are ready and
// which block; on timeout it names the blocking ones with their messages.
//
// A condition counts only when it speaks for the object's current spec: a
// Ready=True observed for an older generation is stale and keeps waiting.
package kubewait

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Target is one object to wait for.
type Target struct {
	Resource  schema.GroupVersionResource
	Kind      string // for messages
	Namespace string
	Name      string
	// Condition must be True; default Ready.
	Condition string
	// Exists makes the object's presence enough (a Secret, which has no
	// conditions).
	Exists bool
	// Client is the cluster the object is on, for a wait across
	// clusters (Gone); nil means the wait's Options.Client.
	Client dynamic.Interface
}

func (t Target) condition() string {
	if t.Exists {
		return "present"
	}
	if t.Condition == "" {
		return "Ready"
	}
	return t.Condition
}

func (t Target) String() string {
	if t.Namespace == "" {
		return t.Kind + " " + t.Name
	}
	return t.Kind + " " + t.Namespace + "/" + t.Name
}

// State is where one target stands.
type State struct {
	Target Target
	Found  bool
	Ready  bool
	// Message says why it is not ready: the condition's reason and message,
	// "not found yet", or a stale generation.
	Message string
	// Failed: the condition is False (the controller refused, for now).
	Failed bool
	// Stalled: the controller set Stalled=True for this generation (the
	// kstatus convention Flux and the Flux Operator follow for a terminal
	// error): it will not retry until the object changes, so waiting on is
	// pointless.
	Stalled bool
	// LastFailure is the last False message seen while the condition has
	// since gone back to Unknown (a controller retrying): the reason the
	// user needs when the wait runs out mid-retry.
	LastFailure string
}

func (s State) String() string {
	if s.Ready {
		return s.Target.String() + ": " + s.Target.condition()
	}
	if s.LastFailure != "" {
		return s.Target.String() + ": " + s.Message + " (last failure: " + s.LastFailure + ")"
	}
	return s.Target.String() + ": " + s.Message
}

// Summary is a one-line report of states: how many are ready and the
// first that blocks.
func Summary(states []State) string {
	ready, blocking := 0, ""
	for _, s := range states {
		if s.Ready {
			ready++
		} else if blocking == "" {
			blocking = s.String()
		}
	}
	line := fmt.Sprintf("%d of %d ready", ready, len(states))
	if blocking != "" {
		line += "; waiting for " + blocking
	}
	return line
}

// Options configure a wait.
type Options struct {
	Client dynamic.Interface
	// Timeout bounds the whole wait; zero means only ctx bounds it.
	Timeout time.Duration
	// OnChange, when set, receives every target's state whenever one of
	// them changes (serialised; in target order).
	OnChange func([]State)
	// Report, when set, receives a one-line summary of the wait each time
	// it changes ("2 of 3 ready; waiting for ..."), never the same line
	// twice in a row: the progress a tool prints.
	Report func(line string)
	// Silence, when set, ends the wait with a *SilentError once an API
	// server it watches has not answered a probe for this long (All, Until
	// and Gone): a hung server otherwise looks like a long wait.
	Silence time.Duration
	// Heartbeat, with Report, repeats the current summary after this long
	// without a change ("still waiting after 1m0s: ..."), so a long wait
	// shows in a log that it is alive (MGMT_POLL_INTERVAL); zero: never.
	Heartbeat time.Duration
}

// TimeoutError names what was still blocking when the time ran out.
type TimeoutError struct {
	Timeout  time.Duration
	Blocking []State
	// Not says what the blocking targets are not: "ready" unless set
	// ("gone").
	Not string
}

// Is makes a *TimeoutError match ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

func (e *TimeoutError) Error() string {
	var parts []string
	for _, s := range e.Blocking {
		parts = append(parts, s.String())
	}
	not := e.Not
	if not == "" {
		not = "ready"
	}
	return fmt.Sprintf("not %s after %s; blocking: %s", not, e.Timeout, strings.Join(parts, "; "))
}

// StalledError ends a wait early: a target's controller gave up on it.
type StalledError struct {
	State State
}

func (e *StalledError) Error() string {
	return e.State.Target.String() + " is stalled (its controller gave up and retries only when the object changes): " + e.State.Message
}

// ErrInterrupted wraps the error of a wait cancelled by its caller (Ctrl-C).
var ErrInterrupted = errors.New("interrupted while waiting")

// All waits until every target's condition is True for its current
// generation. A target whose controller stalls ends the wait at once with a
// *StalledError.
func All(ctx context.Context, o Options, targets ...Target) error {
	b := bound(ctx, o.Timeout)
	defer b.release()
	parent, deadline, ctx, stop := b.parent, b.deadline, b.ctx, b.stop
	w := &waiter{o: o, states: make([]State, len(targets)), lastFail: map[int]string{}}
	for i, t := range targets {
		w.states[i] = State{Target: t, Message: "not found yet"}
	}
	if o.Report != nil {
		report := Changes(o.Report)
		hb := startHeartbeat(ctx, o.Heartbeat, o.Report)
		// A target that is never found never changes: the heartbeat starts
		// from the first state.
		hb.saw(Summary(w.states))
		w.report = func(states []State) {
			line := Summary(states)
			report(line)
			hb.saw(line)
		}
	}
	sets := make([]Set, len(targets))
	for i, t := range targets {
		sets[i] = Set{Resource: t.Resource, Namespace: t.Namespace, Client: t.Client}
	}
	heardSilence := watchSilence(ctx, o, sets, stop)
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = w.one(ctx, i, t); errs[i] != nil {
				stop() // one target's failure ends the others' waits
			}
		}()
	}
	wg.Wait()
	stop()
	silent := heardSilence()
	if parent.Err() != nil {
		return fmt.Errorf("%w: %s", ErrInterrupted, w.blocking())
	}
	if silent != nil {
		return silent
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if deadline.Err() != nil {
		return &TimeoutError{Timeout: o.Timeout, Blocking: w.notReady()}
	}
	return nil
}

type waiter struct {
	o        Options
	mu       sync.Mutex
	states   []State
	lastFail map[int]string
	report   func([]State)
}

func (w *waiter) set(i int, s State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case s.Failed:
		w.lastFail[i] = s.Message
	case s.Ready:
		delete(w.lastFail, i)
	default:
		s.LastFailure = w.lastFail[i]
	}
	if w.states[i] == s {
		return
	}
	w.states[i] = s
	if w.o.OnChange != nil {
		w.o.OnChange(append([]State(nil), w.states...))
	}
	if w.report != nil {
		w.report(w.states)
	}
}

func (w *waiter) notReady() []State {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []State
	for _, s := range w.states {
		if !s.Ready {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Target.String() < out[b].Target.String() })
	return out
}

func (w *waiter) blocking() string {
	var parts []string
	for _, s := range w.notReady() {
		parts = append(parts, s.String())
	}
	if len(parts) == 0 {
		return "nothing was blocking"
	}
	return "still waiting for " + strings.Join(parts, "; ")
}

// one watches target i (a list, then a watch, re-listing when the watch
// expires) until its condition holds.
func (w *waiter) one(ctx context.Context, i int, t Target) error {
	client := t.Client
	if client == nil {
		client = w.o.Client
	}
	ri := client.Resource(t.Resource).Namespace(t.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", t.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = byName
			return ri.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = byName
			return ri.Watch(ctx, opts)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			w.set(i, State{Target: t, Message: "deleted"})
			return false, nil
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		s := Evaluate(u, t)
		w.set(i, s)
		if s.Stalled {
			return false, &StalledError{State: s}
		}
		return s.Ready, nil
	})
	var stalled *StalledError
	if errors.As(err, &stalled) {
		return stalled
	}
	if err != nil && ctx.Err() == nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("waiting for %s: the API server does not serve %s: %w", t, t.Resource, err)
		}
		return fmt.Errorf("waiting for %s: %w", t, err)
	}
	return nil
}

// NotReady lists the objects of a resource in ns whose condition (Ready
// unless like.Condition says otherwise) does not hold, as states named with
// like.Kind: what a timed-out wait reports beside its own targets.
func NotReady(ctx context.Context, client dynamic.Interface, like Target, ns string) ([]State, error) {
	list, err := client.Resource(like.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []State
	for i := range list.Items {
		u := &list.Items[i]
		t := like
		t.Namespace, t.Name = ns, u.GetName()
		if s := Evaluate(u, t); !s.Ready {
			out = append(out, s)
		}
	}
	return out, nil
}

// Evaluate says where an object stands against its target.
func Evaluate(u *unstructured.Unstructured, t Target) (s State) {
	s = State{Target: t, Found: true}
	if t.Exists {
		s.Ready = true
		return s
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	defer func() {
		if !s.Ready {
			s.Stalled = stalled(u, conds)
		}
	}()
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != t.condition() {
			continue
		}
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		observed, hasObserved := generation(m["observedGeneration"])
		if !hasObserved {
			observed, hasObserved = generationAt(u, "status", "observedGeneration")
		}
		if hasObserved && observed < u.GetGeneration() {
			s.Message = fmt.Sprintf("%s=%s is stale (it speaks for generation %d, the object is at %d)", t.condition(), status, observed, u.GetGeneration())
			return s
		}
		if status == "True" {
			s.Ready = true
			return s
		}
		s.Message = strings.TrimSpace(fmt.Sprintf("%s=%s %s: %s", t.condition(), status, reason, msg))
		s.Message = strings.TrimSuffix(s.Message, ":")
		s.Failed = status == "False"
		return s
	}
	s.Message = "no " + t.condition() + " condition yet"
	return s
}

// stalled reports a Stalled=True condition that speaks for the object's
// current generation.
func stalled(u *unstructured.Unstructured, conds []any) bool {
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Stalled" || m["status"] != "True" {
			continue
		}
		observed, has := generation(m["observedGeneration"])
		if !has {
			observed, has = generationAt(u, "status", "observedGeneration")
		}
		return !has || observed >= u.GetGeneration()
	}
	return false
}

func generation(v any) (int64, bool) {
	switch g := v.(type) {
	case int64:
		return g, true
	case float64:
		return int64(g), true
	}
	return 0, false
}

func generationAt(u *unstructured.Unstructured, path ...string) (int64, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if !found || err != nil {
		return 0, false
	}
	return generation(v)
}
