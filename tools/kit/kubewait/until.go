package kubewait

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Set is the objects of one resource in one namespace ("" for a
// cluster-scoped resource).
type Set struct {
	Resource  schema.GroupVersionResource
	Namespace string
	// FieldSelector narrows the set; "metadata.name=<name>" is one object.
	FieldSelector string
	// Client is the cluster the set is on; nil means the wait's client.
	Client dynamic.Interface
}

// Snapshot is what each set of a wait holds at one moment, in the order
// the sets were given, each sorted by namespace and name.
type Snapshot [][]*unstructured.Unstructured

// ErrTimeout is wrapped by a wait whose Options.Timeout ran out.
var ErrTimeout = errors.New("timed out")

// NoAnswerError ends a wait whose time ran out before one of its sets was
// ever listed: the cluster did not answer, so where its objects stand is
// unknown (not "not ready").
type NoAnswerError struct {
	Timeout time.Duration
	Err     error // the last list or watch error; nil when a call hung
}

func (e *NoAnswerError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("the API server did not answer within %s", e.Timeout)
	}
	return fmt.Sprintf("the API server did not answer within %s: %v", e.Timeout, e.Err)
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// Until watches sets (a list, then a watch, re-listing when the watch
// expires) and calls check with every set each time one of them changes,
// from the moment all have been listed, until check reports done or fails.
// check runs serialised. When the time runs out Until returns an error
// wrapping ErrTimeout (Options.Timeout) or ErrInterrupted (ctx), or a
// *NoAnswerError when a set was never listed; the caller words the
// result from the last snapshot it saw.
func Until(ctx context.Context, o Options, sets []Set, check func(Snapshot) (done bool, err error)) error {
	b := bound(ctx, o.Timeout)
	defer b.release()
	parent, deadline, ctx, stop := b.parent, b.deadline, b.ctx, b.stop

	var mu sync.Mutex
	stores := make([]cache.Store, len(sets))
	answered := make([]bool, len(sets))
	var lastErr, checkErr error
	finished := false
	// see runs check on the sets' current contents once all are listed;
	// the informer behind each store updates it before the event arrives.
	see := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return true
		}
		snap := make(Snapshot, len(sets))
		for i, s := range stores {
			if s == nil {
				return false
			}
			snap[i] = sortedObjects(s.List())
		}
		done, err := check(snap)
		if err != nil {
			checkErr = err
		}
		if done || err != nil {
			finished = true
			stop()
		}
		return finished
	}
	var wg sync.WaitGroup
	heardSilence := watchSilence(ctx, o, sets, stop)
	for i, set := range sets {
		client := set.Client
		if client == nil {
			client = o.Client
		}
		ri := client.Resource(set.Resource).Namespace(set.Namespace)
		noted := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				answered[i] = true
			} else {
				lastErr = err
			}
		}
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = set.FieldSelector
				l, err := ri.List(ctx, opts)
				noted(err)
				return l, err
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				// With the streaming list (WatchListClient) the reflector
				// starts here, not with a list.
				opts.FieldSelector = set.FieldSelector
				w, err := ri.Watch(ctx, opts)
				noted(err)
				return w, err
			},
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, func(store cache.Store) (bool, error) {
				mu.Lock()
				stores[i] = store
				mu.Unlock()
				return see(), nil
			}, func(watch.Event) (bool, error) {
				return see(), nil
			})
		}()
	}
	wg.Wait()
	stop()
	silent := heardSilence()

	mu.Lock()
	defer mu.Unlock()
	switch {
	case checkErr != nil:
		return checkErr
	case finished:
		return nil
	case parent.Err() != nil:
		return ErrInterrupted
	case silent != nil:
		return silent
	case slices.Contains(answered, false) && deadline.Err() != nil:
		return &NoAnswerError{Timeout: o.Timeout, Err: lastErr}
	case deadline.Err() != nil:
		return fmt.Errorf("%w after %s", ErrTimeout, o.Timeout)
	}
	return fmt.Errorf("watching stopped early: %v", lastErr)
}

// SilentError ends a wait (Options.Silence) whose API server stopped
// answering after it had answered: where the objects stand is unknown from
// then on, and a wait that went on would only learn that at its timeout.
type SilentError struct {
	Silence time.Duration
	Err     error // the last probe's error; nil when the probes hung
}

func (e *SilentError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("the API server stopped answering (no answer for %s)", e.Silence)
	}
	return fmt.Sprintf("the API server stopped answering (no answer for %s): %v", e.Silence, e.Err)
}

func (e *SilentError) Unwrap() error { return e.Err }

// watchSilence runs listenForSilence beside a wait when o.Silence is set,
// calling stop once a server has gone silent. The returned func, called
// after the wait's own work has ended and stop has been called, reports
// what it heard (nil: the servers answered, or Silence is off).
func watchSilence(ctx context.Context, o Options, sets []Set, stop func()) func() *SilentError {
	if o.Silence <= 0 {
		return func() *SilentError { return nil }
	}
	heard := make(chan *SilentError, 1)
	go func() {
		s := listenForSilence(ctx, o, sets)
		if s != nil {
			stop()
		}
		heard <- s
	}()
	return func() *SilentError { return <-heard }
}

// listenForSilence probes each set's API server with a one-item list while
// the wait runs: a watch on a server that hangs (a paused container, a
// black-holed route) gets no event and no error, so only a request tells.
// It returns a *SilentError once a server has not answered for o.Silence,
// nil when ctx ends first.
func listenForSilence(ctx context.Context, o Options, sets []Set) *SilentError {
	every := max(o.Silence/4, 250*time.Millisecond)
	last := make([]time.Time, len(sets))
	for i := range last {
		last[i] = time.Now()
	}
	var lastErr error
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for i, set := range sets {
			client := set.Client
			if client == nil {
				client = o.Client
			}
			probe, cancel := context.WithTimeout(ctx, o.Silence)
			_, err := client.Resource(set.Resource).Namespace(set.Namespace).List(probe, metav1.ListOptions{FieldSelector: set.FieldSelector, Limit: 1})
			cancel()
			switch {
			case ctx.Err() != nil:
				return nil
			case err == nil:
				last[i] = time.Now()
			default:
				lastErr = err
				if time.Since(last[i]) >= o.Silence {
					if errors.Is(err, context.DeadlineExceeded) {
						lastErr = nil
					}
					return &SilentError{Silence: o.Silence, Err: lastErr}
				}
			}
		}
	}
}

func sortedObjects(items []any) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if u, ok := it.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// Changes returns a reporter that passes line to print only when it
// differs from the last one printed: a wait's progress without repeats.
func Changes(print func(line string)) func(line string) {
	var mu sync.Mutex
	last := ""
	return func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if line != last {
			last = line
			print(line)
		}
	}
}

// bounds are the contexts of one wait: parent is the caller's (its end is
// an interruption), deadline adds the wait's timeout (its end is a
// timeout), ctx ends either way and when stop is called (a target failed,
// or the wait is done). release frees them all.
type bounds struct {
	parent, deadline, ctx context.Context
	stop, release         context.CancelFunc
}

func bound(parent context.Context, timeout time.Duration) bounds {
	deadline, cancelDeadline := parent, context.CancelFunc(func() {})
	if timeout > 0 {
		deadline, cancelDeadline = context.WithTimeout(parent, timeout)
	}
	ctx, cancel := context.WithCancel(deadline)
	return bounds{parent: parent, deadline: deadline, ctx: ctx, stop: cancel, release: func() { cancel(); cancelDeadline() }}
}
