package awsprovider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// BenchmarkDiscover scans about 300 resources in two regions through a
// fault proxy that adds 50 ms to every call (moto answers at once, AWS does
// not), and compares the concurrent scan with the same code run
// sequentially in the same run.
func BenchmarkDiscover(b *testing.B) {
	m := testenv.Moto(b, testenv.MotoOptions{})
	fp := awstest.Build(b, m.URL, awstest.Options{ExtraPerVPC: 40})
	proxy := testenv.NewFaultProxy(b, m.URL)
	proxy.Add(testenv.Rule{Delay: 50 * time.Millisecond})
	b.Setenv("AWS_ENDPOINT_URL", proxy.URL)

	scan := func(sequential bool) (time.Duration, int, int) {
		p := New("bench", Options{Sequential: sequential})
		if err := p.Configure(context.Background(), sdk.Config{Environment: "aws", Raw: awstest.ProviderConfig(b, hostJSON)}); err != nil {
			b.Fatal(err)
		}
		before := len(proxy.Requests())
		found := 0
		start := time.Now()
		err := p.Discover(context.Background(), func(e sdk.DiscoverEvent) error {
			if e.Error != nil {
				return fmt.Errorf("query failed: %+v", e.Error)
			}
			if e.Resource != nil {
				found++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start), len(proxy.Requests()) - before, found
	}
	var conc, seq time.Duration
	var calls, seqCalls, found int
	for b.Loop() {
		d, n, f := scan(true)
		seq += d
		seqCalls = n
		d, n, f2 := scan(false)
		conc += d
		calls, found = n, f2
		if f != f2 || f2 != len(fp.Owned) {
			b.Fatalf("found %d concurrently, %d sequentially, want %d", f2, f, len(fp.Owned))
		}
	}
	b.ReportMetric(float64(found), "resources")
	b.ReportMetric(float64(calls), "api_calls")
	b.ReportMetric(float64(calls)/float64(seqCalls), "calls_x_of_baseline")
	b.ReportMetric(conc.Seconds()/float64(b.N), "s/scan")
	b.ReportMetric(seq.Seconds()/float64(b.N), "baseline_s/scan")
	b.ReportMetric(float64(seq)/float64(conc), "x_vs_baseline")
}

// BenchmarkSweep deletes about 300 resources in two regions through a fault
// proxy adding 50 ms per call, with NAT gateways, EKS and RDS reported as
// still deleting for 3 polls after their delete call (slowDeletes), and
// compares with the same code deleting one
// call at a time in its fixed plan order. It also reports the API calls
// made against the mutating calls the set strictly needs plus one
// discovery.
func BenchmarkSweep(b *testing.B) {
	m := testenv.Moto(b, testenv.MotoOptions{})
	proxy := testenv.NewFaultProxy(b, m.URL)
	addSlowDeletes(proxy, 3, 50*time.Millisecond)
	proxy.Add(testenv.Rule{Delay: 50 * time.Millisecond})
	b.Setenv("AWS_ENDPOINT_URL", proxy.URL)
	ctx := context.Background()

	run := func(sequential bool) (time.Duration, int, int, int) {
		if err := m.Reset(ctx); err != nil {
			b.Fatal(err)
		}
		fp := awstest.Build(b, m.URL, awstest.Options{ExtraPerVPC: 40, ObjectVersions: 3})
		p := New("bench", Options{Sequential: sequential})
		if err := p.Configure(ctx, sdk.Config{Environment: "aws", Raw: awstest.ProviderConfig(b, hostJSON)}); err != nil {
			b.Fatal(err)
		}
		scope := scopeOf(b, ctx, p)
		before := len(proxy.Requests())
		start := time.Now()
		deletedN := sweepAll(b, ctx, p, scope, len(fp.Owned))
		calls := proxy.Requests()[before:]
		mutating := 0
		for _, r := range calls {
			if r.Mutating {
				mutating++
			}
		}
		return time.Since(start), len(calls), mutating, deletedN
	}
	var conc, seq time.Duration
	var calls, mutating, resources, discoverCalls int
	for b.Loop() {
		d, _, _, _ := run(true)
		seq += d
		d, n, mut, res := run(false)
		conc += d
		calls, mutating, resources = n, mut, res
		discoverCalls = n - mut
	}
	// The minimum: one delete per resource, plus the detach of each
	// internet gateway, the one fresh discovery a safe sweep needs, and the
	// polls the asynchronous deletions force (3 per NAT gateway, EKS
	// cluster, nodegroup and RDS instance: 14 of them).
	minimum := resources + 3 + 40 + 3*14
	b.ReportMetric(float64(resources), "resources")
	b.ReportMetric(float64(calls), "api_calls")
	b.ReportMetric(float64(mutating), "mutating_calls")
	b.ReportMetric(float64(discoverCalls), "read_calls")
	b.ReportMetric(float64(calls)/float64(minimum), "calls_x_of_minimum")
	b.ReportMetric(conc.Seconds()/float64(b.N), "s/sweep")
	b.ReportMetric(seq.Seconds()/float64(b.N), "baseline_s/sweep")
	b.ReportMetric(float64(seq)/float64(conc), "x_vs_baseline")
}

// BenchmarkSweepPolling sweeps a footprint whose deletions all complete at
// once (moto), so every pause between passes is pure waiting: the adaptive
// polling the plugin ships (first look after DefaultFirstPoll, doubling to
// DefaultPollInterval) against the same sweep with fixed
// DefaultPollInterval pauses, in the same run.
func BenchmarkSweepPolling(b *testing.B) {
	m := testenv.Moto(b, testenv.MotoOptions{})
	ctx := context.Background()
	run := func(o Options) time.Duration {
		if err := m.Reset(ctx); err != nil {
			b.Fatal(err)
		}
		fp := awstest.Build(b, m.URL, awstest.Options{ObjectVersions: 1})
		p := New("bench", o)
		if err := p.Configure(ctx, sdk.Config{Environment: "aws", Raw: awstest.ProviderConfig(b, hostJSON)}); err != nil {
			b.Fatal(err)
		}
		scope := scopeOf(b, ctx, p)
		start := time.Now()
		sweepAll(b, ctx, p, scope, len(fp.Owned))
		return time.Since(start)
	}
	var adaptive, fixed time.Duration
	for b.Loop() {
		fixed += run(Options{PollInterval: DefaultPollInterval})
		adaptive += run(Options{FirstPoll: DefaultFirstPoll, PollInterval: DefaultPollInterval})
	}
	b.ReportMetric(adaptive.Seconds()/float64(b.N), "s/sweep")
	b.ReportMetric(fixed.Seconds()/float64(b.N), "baseline_s/sweep")
	b.ReportMetric(float64(fixed)/float64(adaptive), "x_vs_baseline")
}

// sweepAll sweeps scope and fails b unless exactly want resources end
// deleted; it returns how many did.
func sweepAll(b *testing.B, ctx context.Context, p *Provider, scope []sdk.Resource, want int) int {
	b.Helper()
	deleted := 0
	err := p.Sweep(ctx, sdk.SweepRequest{Scope: scope}, func(e sdk.SweepEvent) error {
		switch e.State {
		case sdk.SweepDeleted:
			deleted++
		case sdk.SweepFailed:
			return fmt.Errorf("%s %s failed: %s", e.Resource.Kind, e.Resource.ID, e.Message)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if deleted != want {
		b.Fatalf("deleted %d of %d", deleted, want)
	}
	return deleted
}
