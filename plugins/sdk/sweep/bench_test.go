package sweep_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// BenchmarkCriticalPath measures the engine's distance from its limit. Every
// call takes a fixed latency; asynchronous deletions need a number of polls
// after they are accepted, each preceded by the engine's pause. No
// scheduler can finish before the longest dependency chain does, counting
// each resource's calls and pauses along it: that is the critical path. The
// metric is wall time over critical path (1.0 is perfect; the target is at
// most 1.5).
//
// The graph is shaped like an AWS footprint, in two regions: a VPC after
// its subnets, gateway, route tables and security group; each subnet after
// a NAT gateway (3 polls) and three instances (2 polls); the security group
// after the instances.
func BenchmarkCriticalPath(b *testing.B) {
	const latency = 20 * time.Millisecond
	pause := latency
	scope, polls := footprint(2)
	critical := criticalPath(scope, polls, latency, pause)
	var total time.Duration
	for b.Loop() {
		var mu sync.Mutex
		left := map[string]int{}
		for k, v := range polls {
			left[k] = v
		}
		accepted := map[string]bool{}
		start := time.Now()
		rep, err := sweep.Run(context.Background(), sdk.SweepRequest{Scope: scope}, func(sdk.SweepEvent) error { return nil }, sweep.Options{
			FirstPoll: pause, PollInterval: pause,
			Delete: func(_ context.Context, r sdk.Resource, a sweep.Attempt) sweep.Result {
				time.Sleep(latency)
				mu.Lock()
				defer mu.Unlock()
				key := r.Kind + "/" + r.ID
				if left[key] == 0 {
					if accepted[key] {
						return sweep.Result{Outcome: sweep.Gone}
					}
					return sweep.Result{Outcome: sweep.Deleted}
				}
				if accepted[key] {
					left[key]--
				}
				accepted[key] = true
				return sweep.Result{Outcome: sweep.InProgress, Message: "deleting"}
			},
		})
		total += time.Since(start)
		if err != nil || rep.Left() != 0 {
			b.Fatalf("err %v, %d left", err, rep.Left())
		}
	}
	wall := total / time.Duration(b.N)
	b.ReportMetric(float64(len(scope)), "resources")
	b.ReportMetric(critical.Seconds(), "critical_path_s")
	b.ReportMetric(wall.Seconds(), "s/sweep")
	b.ReportMetric(float64(wall)/float64(critical), "x_of_critical_path")
}

// footprint builds the benchmark graph and the polls each resource needs
// after its deletion is accepted (0: deleted at once).
func footprint(regions int) ([]sdk.Resource, map[string]int) {
	var scope []sdk.Resource
	polls := map[string]int{}
	add := func(r sdk.Resource, p int) {
		scope = append(scope, r)
		polls[r.Kind+"/"+r.ID] = p
	}
	for g := range regions {
		region := fmt.Sprintf("region-%d", g)
		id := func(kind string, i int) string { return fmt.Sprintf("%s-%d-%d", kind, g, i) }
		var vpcDeps, sgDeps []string
		for s := range 4 {
			subnetDeps := []string{id("nat", s)}
			add(sdk.Resource{Kind: "nat", ID: id("nat", s), Region: region}, 3)
			for i := range 3 {
				inst := id("instance", s*3+i)
				add(sdk.Resource{Kind: "instance", ID: inst, Region: region}, 2)
				subnetDeps = append(subnetDeps, inst)
				sgDeps = append(sgDeps, inst)
			}
			add(sdk.Resource{Kind: "subnet", ID: id("subnet", s), Region: region, DependsOn: subnetDeps}, 0)
			vpcDeps = append(vpcDeps, id("subnet", s))
		}
		add(sdk.Resource{Kind: "sg", ID: id("sg", 0), Region: region, DependsOn: sgDeps}, 0)
		add(sdk.Resource{Kind: "igw", ID: id("igw", 0), Region: region}, 0)
		for i := range 2 {
			add(sdk.Resource{Kind: "rt", ID: id("rt", i), Region: region}, 0)
			vpcDeps = append(vpcDeps, id("rt", i))
		}
		vpcDeps = append(vpcDeps, id("sg", 0), id("igw", 0))
		add(sdk.Resource{Kind: "vpc", ID: id("vpc", 0), Region: region, DependsOn: vpcDeps}, 0)
	}
	return scope, polls
}

// criticalPath is the longest chain's cost: per resource one call, plus
// for each poll a pause and a call.
func criticalPath(scope []sdk.Resource, polls map[string]int, latency, pause time.Duration) time.Duration {
	byID := map[string]sdk.Resource{}
	for _, r := range scope {
		byID[r.ID] = r
	}
	memo := map[string]time.Duration{}
	var finish func(r sdk.Resource) time.Duration
	finish = func(r sdk.Resource) time.Duration {
		if d, ok := memo[r.ID]; ok {
			return d
		}
		var ready time.Duration
		for _, dep := range r.DependsOn {
			ready = max(ready, finish(byID[dep]))
		}
		own := latency + time.Duration(polls[r.Kind+"/"+r.ID])*(pause+latency)
		memo[r.ID] = ready + own
		return ready + own
	}
	var longest time.Duration
	for _, r := range scope {
		longest = max(longest, finish(r))
	}
	return longest
}
