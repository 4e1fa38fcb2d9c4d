package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// fakeCloud is a plain Go fake of a cloud for the engine: every resource
// has a script of outcomes its deletion calls return, and the fake checks
// the engine's promises on every call.
type fakeCloud struct {
	mu sync.Mutex
	t  *testing.T
	// scope is what the sweep was asked to delete, by kind/id.
	scope map[string]sdk.Resource
	// exists is what a fresh inventory finds.
	exists map[string]sdk.Resource
	// script is each resource's remaining outcomes; after it, Deleted.
	script map[string][]sweep.Outcome
	// confirmed are resources the engine was told are gone.
	confirmed map[string]bool
	calls     map[string]int
	violation []string
}

func (f *fakeCloud) inventory(context.Context) (map[string]sdk.Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]sdk.Resource{}
	for k, r := range f.exists {
		out[k] = r
	}
	return out, nil
}

// depsOf resolves DependsOn the way the engine documents: kind/id, or an id
// naming every in-scope resource that has it.
func (f *fakeCloud) depsOf(r sdk.Resource) []string {
	var out []string
	for _, d := range r.DependsOn {
		if _, ok := f.scopeFound(d); ok {
			out = append(out, d)
			continue
		}
		for k, o := range f.scope {
			if _, found := f.exists[k]; found && o.ID == d && k != r.Kind+"/"+r.ID {
				out = append(out, k)
			}
		}
	}
	return out
}

func (f *fakeCloud) scopeFound(key string) (sdk.Resource, bool) {
	r, ok := f.scope[key]
	if !ok {
		return r, false
	}
	_, found := f.exists[key]
	return r, found
}

func (f *fakeCloud) delete(_ context.Context, r sdk.Resource, a sweep.Attempt) sweep.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Kind + "/" + r.ID
	f.calls[key]++
	if _, ok := f.scopeFound(key); !ok {
		f.violation = append(f.violation, "Delete called outside the scope (or for a resource the inventory did not find): "+key)
	}
	if f.confirmed[key] {
		f.violation = append(f.violation, "Delete called again after "+key+" was confirmed gone")
	}
	for _, d := range f.depsOf(r) {
		if !f.confirmed[d] {
			f.violation = append(f.violation, fmt.Sprintf("Delete(%s) before its dependency %s was confirmed gone", key, d))
		}
	}
	out := sweep.Deleted
	if s := f.script[key]; len(s) > 0 {
		out, f.script[key] = s[0], s[1:]
	}
	if out == sweep.Deleted || out == sweep.Gone {
		f.confirmed[key] = true
		delete(f.exists, key)
	}
	return sweep.Result{Outcome: out, Message: out.String()}
}

// randomCase builds a random scope: a DAG of dependencies (with, now and
// then, a cycle, a dependency outside the scope, an id shared by two kinds,
// and resources the inventory no longer finds), and random outcome scripts.
func randomCase(t *testing.T, rng *rand.Rand) (*fakeCloud, []sdk.Resource) {
	f := &fakeCloud{t: t, scope: map[string]sdk.Resource{}, exists: map[string]sdk.Resource{}, script: map[string][]sweep.Outcome{}, confirmed: map[string]bool{}, calls: map[string]int{}}
	n := 1 + rng.IntN(25)
	kinds := []string{"vpc", "subnet", "instance"}
	regions := []string{"eu-west-1", "eu-north-1"}
	var all []sdk.Resource
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		if i > 0 && rng.IntN(10) == 0 {
			id = all[rng.IntN(i)].ID // an id two kinds share
		}
		r := sdk.Resource{Kind: kinds[rng.IntN(len(kinds))], ID: id, Region: regions[rng.IntN(len(regions))]}
		if _, dup := f.exists[r.Kind+"/"+r.ID]; dup {
			r.ID = fmt.Sprintf("r%d", i)
		}
		for j := range i {
			if rng.IntN(4) == 0 {
				dep := all[j].Kind + "/" + all[j].ID
				if rng.IntN(2) == 0 {
					dep = all[j].ID
				}
				r.DependsOn = append(r.DependsOn, dep)
			}
		}
		if rng.IntN(8) == 0 {
			r.DependsOn = append(r.DependsOn, "outside-"+id)
		}
		all = append(all, r)
		f.exists[r.Kind+"/"+r.ID] = r
		var script []sweep.Outcome
		for range rng.IntN(4) {
			script = append(script, []sweep.Outcome{sweep.Deleted, sweep.Gone, sweep.InProgress, sweep.InProgress, sweep.Blocked, sweep.Failed}[rng.IntN(6)])
		}
		f.script[r.Kind+"/"+r.ID] = script
	}
	if n > 2 && rng.IntN(6) == 0 {
		// A cycle: the first resource also depends on the last.
		all[0].DependsOn = append(all[0].DependsOn, all[n-1].Kind+"/"+all[n-1].ID)
		f.exists[all[0].Kind+"/"+all[0].ID] = all[0]
	}
	var scope []sdk.Resource
	for _, r := range all {
		key := r.Kind + "/" + r.ID
		switch rng.IntN(10) {
		case 0:
			continue // out of scope: must never be touched
		case 1:
			delete(f.exists, key) // gone since discovery: skipped
		case 2:
			scope = append(scope, r) // listed twice
		}
		f.scope[key] = r
		scope = append(scope, r)
	}
	return f, scope
}

// The engine's promises, over many random graphs and outcome sequences:
// it never deletes a resource before what it depends on is confirmed gone,
// never deletes outside the scope, always terminates, and reports every
// resource of the scope exactly once in a final state, last.
func TestEnginePropertiesOverRandomGraphs(t *testing.T) {
	const cases = 400
	for seed := range uint64(cases) {
		rng := rand.New(rand.NewPCG(seed, 7))
		f, scope := randomCase(t, rng)
		var events []sdk.SweepEvent
		var mu sync.Mutex
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rep, err := sweep.Run(ctx, sdk.SweepRequest{Scope: scope, MaxIdlePasses: 3}, func(ev sdk.SweepEvent) error {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
			return nil
		}, sweep.Options{Delete: f.delete, Inventory: f.inventory, PollInterval: -1, Concurrency: 1 + rng.IntN(4)})
		cancel()
		if err != nil {
			t.Fatalf("seed %d: Run: %v (did it terminate?)", seed, err)
		}
		for _, v := range f.violation {
			t.Errorf("seed %d: %s", seed, v)
		}
		final := map[string]int{}
		last := map[string]sdk.SweepState{}
		for _, ev := range events {
			key := ev.Resource.Kind + "/" + ev.Resource.ID
			if _, ok := f.scope[key]; !ok {
				t.Errorf("seed %d: event for %s, which is not in the scope", seed, key)
			}
			if ev.State == sdk.SweepDeleted || ev.State == sdk.SweepFailed || ev.State == sdk.SweepSkipped {
				final[key]++
			}
			last[key] = ev.State
		}
		if len(rep.Entries) != len(f.scope) {
			t.Errorf("seed %d: the report has %d entries for a scope of %d", seed, len(rep.Entries), len(f.scope))
		}
		seen := map[string]bool{}
		for _, e := range rep.Entries {
			key := e.Resource.Kind + "/" + e.Resource.ID
			if seen[key] {
				t.Errorf("seed %d: %s reported twice", seed, key)
			}
			seen[key] = true
			if e.State == sweep.StateNotReached {
				t.Errorf("seed %d: %s not reached in a run that was not interrupted", seed, key)
			}
		}
		for key := range f.scope {
			if final[key] != 1 {
				t.Errorf("seed %d: %s has %d final events, want 1", seed, key, final[key])
			}
			if s := last[key]; s != sdk.SweepDeleted && s != sdk.SweepFailed && s != sdk.SweepSkipped {
				t.Errorf("seed %d: the last event of %s is %q, not final", seed, key, s)
			}
			if last[key] == sdk.SweepDeleted && !f.confirmed[key] {
				t.Errorf("seed %d: %s reported deleted but never confirmed gone", seed, key)
			}
		}
		if t.Failed() {
			return
		}
	}
}

func TestDryRunOnlyPlansInDependencyOrder(t *testing.T) {
	scope := []sdk.Resource{
		{Kind: "vpc", ID: "v", DependsOn: []string{"s1", "s2"}},
		{Kind: "subnet", ID: "s1", DependsOn: []string{"i"}},
		{Kind: "subnet", ID: "s2"},
		{Kind: "instance", ID: "i"},
	}
	var order []string
	rep, err := sweep.Run(context.Background(), sdk.SweepRequest{Scope: scope, DryRun: true}, func(ev sdk.SweepEvent) error {
		if ev.State != sdk.SweepPlanned {
			t.Errorf("dry run emitted %s for %s", ev.State, ev.Resource.ID)
		}
		order = append(order, ev.Resource.ID)
		return nil
	}, sweep.Options{Delete: func(context.Context, sdk.Resource, sweep.Attempt) sweep.Result {
		t.Error("dry run called Delete")
		return sweep.Result{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "i s1 s2 v" {
		t.Errorf("plan order %q, want dependencies first: i s1 s2 v", got)
	}
	if len(rep.Entries) != 4 || rep.Entries[0].State != sweep.StatePlanned {
		t.Errorf("report: %+v", rep.Entries)
	}
}

// A resource that asks to be retried later is not attempted before then,
// and the sweep still finishes it.
func TestRetryAfterIsHonoured(t *testing.T) {
	var calls []time.Time
	wait := 150 * time.Millisecond
	rep, err := sweep.Run(context.Background(), sdk.SweepRequest{Scope: []sdk.Resource{{Kind: "bucket", ID: "b"}}}, func(sdk.SweepEvent) error { return nil },
		sweep.Options{PollInterval: -1, Delete: func(context.Context, sdk.Resource, sweep.Attempt) sweep.Result {
			calls = append(calls, time.Now())
			if len(calls) == 1 {
				return sweep.Result{Outcome: sweep.Blocked, Message: "throttled", RetryAfter: wait}
			}
			return sweep.Result{Outcome: sweep.Deleted}
		}})
	if err != nil || len(calls) != 2 || rep.Left() != 0 {
		t.Fatalf("err %v, %d calls, %d left", err, len(calls), rep.Left())
	}
	if gap := calls[1].Sub(calls[0]); gap < wait {
		t.Errorf("retried after %v; the resource asked for %v", gap, wait)
	}
}

// Near the deadline the engine stops and reports what is left while the
// caller still listens.
func TestDeadlineLeavesTimeToReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	var lastMsg string
	rep, err := sweep.Run(ctx, sdk.SweepRequest{Scope: []sdk.Resource{{Kind: "db", ID: "slow"}}}, func(ev sdk.SweepEvent) error {
		if ev.State == sdk.SweepFailed {
			lastMsg = ev.Message
		}
		return nil
	}, sweep.Options{FirstPoll: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond, ReportMargin: 300 * time.Millisecond, MaxIdlePasses: 1000,
		Delete: func(context.Context, sdk.Resource, sweep.Attempt) sweep.Result {
			return sweep.Result{Outcome: sweep.InProgress, Message: "deleting"}
		}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Error("the engine reported after the deadline")
	}
	if !rep.TimedOut || !strings.Contains(lastMsg, "time ran out") {
		t.Errorf("timed out %v, message %q", rep.TimedOut, lastMsg)
	}
}

// An interrupt mid-call ends the run with the context's error; the
// resource in flight is not claimed either way.
func TestInterruptLeavesTheCallInFlightNotReached(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var events []sdk.SweepEvent
	rep, err := sweep.Run(ctx, sdk.SweepRequest{Scope: []sdk.Resource{{Kind: "a", ID: "1"}, {Kind: "a", ID: "2", DependsOn: []string{"1"}}}}, func(ev sdk.SweepEvent) error {
		events = append(events, ev)
		return nil
	}, sweep.Options{Delete: func(ctx context.Context, r sdk.Resource, _ sweep.Attempt) sweep.Result {
		cancel()
		<-ctx.Done()
		return sweep.Result{Outcome: sweep.Failed, Message: ctx.Err().Error()}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	for _, ev := range events {
		if ev.State == sdk.SweepFailed || ev.State == sdk.SweepDeleted {
			t.Errorf("an interrupted call was reported final: %+v", ev)
		}
	}
	if rep.Left() != 2 || rep.Entries[0].State != sweep.StateNotReached {
		t.Errorf("report: %+v", rep.Entries)
	}
}

func TestDeleteIsRequired(t *testing.T) {
	if _, err := sweep.Run(context.Background(), sdk.SweepRequest{}, nil, sweep.Options{}); !errors.Is(err, sweep.ErrNoDelete) {
		t.Errorf("no Delete: %v", err)
	}
}
