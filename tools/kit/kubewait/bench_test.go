package kubewait_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/testenv"
)

// BenchmarkReadinessDetection measures the time from a condition turning
// True to the wait returning: kubewait's watch (p50 and p95 of 24 samples)
// against the polls the original lifecycle ran, every 2 s (its Kustomization
// wait) and every 10 s (MGMT_POLL_INTERVAL's default, for the management
// cluster), 20 samples each, all side by side in the same run; the ratios
// are the polls' p50 over the watch's. The condition is written
// by hand (a STAND-IN for a controller) at a random moment, so a poll meets
// it at a random phase of its interval.
func BenchmarkReadinessDetection(b *testing.B) {
	cluster := testenv.APIServer(b, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxKustomize}})
	ctx := context.Background()
	cluster.CreateYAML(b, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n")
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	watch := func(ctx context.Context, t kubewait.Target) error {
		return kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: time.Minute}, t)
	}
	poll := func(every time.Duration) func(context.Context, kubewait.Target) error {
		return func(ctx context.Context, t kubewait.Target) error {
			for {
				u, err := dyn.Resource(t.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
				if err == nil && kubewait.Evaluate(u, t).Ready {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(every):
				}
			}
		}
	}
	// One round of samples side by side: 24 of the watch, 20 of each poll,
	// so the wall time is one 10 s spread plus one 10 s interval.
	waits := make([]func(context.Context, kubewait.Target) error, 0, 64)
	for range 24 {
		waits = append(waits, watch)
	}
	for range 20 {
		waits = append(waits, poll(2*time.Second), poll(10*time.Second))
	}
	var all testenv.Latencies
	round := 0
	for b.Loop() {
		round++
		objs := make([]*unstructured.Unstructured, len(waits))
		for i := range objs {
			objs[i] = cluster.CreateYAML(b, ctx, kustomization(fmt.Sprintf("r%d-%d", round, i), "x"))
		}
		all = testenv.DetectionSamples(b, len(waits), 10*time.Second,
			func(i int) error {
				return testenv.SetCondition(ctx, cluster.Client, objs[i], metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1})
			},
			func(ctx context.Context, i int) error { return waits[i](ctx, ks(objs[i].GetName())) })
	}
	// Samples 0-23 are the watch's, then the polls alternate.
	var w, p2, p10 testenv.Latencies
	for i, d := range all {
		switch {
		case i < 24:
			w = append(w, d)
		case (i-24)%2 == 0:
			p2 = append(p2, d)
		default:
			p10 = append(p10, d)
		}
	}
	reportLatencies(b, w, p2, p10)
}

func reportLatencies(b *testing.B, w, p2, p10 testenv.Latencies) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mw := max(w.Percentile(50), time.Millisecond)
	b.ReportMetric(ms(w.Percentile(50)), "watch_p50_ms")
	b.ReportMetric(ms(w.Percentile(95)), "watch_p95_ms")
	b.ReportMetric(ms(p2.Percentile(50)), "poll2s_p50_ms")
	b.ReportMetric(ms(p10.Percentile(50)), "poll10s_p50_ms")
	b.ReportMetric(float64(p2.Percentile(50))/float64(mw), "x_vs_2s_poll")
	b.ReportMetric(float64(p10.Percentile(50))/float64(mw), "x_vs_10s_poll")
}
