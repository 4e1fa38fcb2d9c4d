package teardown

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/testenv"
)

// BenchmarkAbsenceDetection measures the time from the last finalizer's
// removal (the moment the object really goes) to the deletion wait
// returning: the teardown's watch (p50 and p95 of 24 samples) against the
// polls the original teardown ran, every 10 s (a CAPD workload Cluster)
// and every 15 s (the provider objects), 20 samples each, side by side in
// the same run; the ratios are the polls' p50 over the watch's. (Its 30 s
// poll of aws Clusters would double the benchmark's time for the same
// shape of answer.) The finalizer is removed by hand (a STAND-IN for a
// provider) at a random moment, so a poll meets it at a random phase.
// Target: the watch's p95 under 1 s.
func BenchmarkAbsenceDetection(b *testing.B) {
	cluster := testenv.APIServer(b, testenv.ClusterOptions{})
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	r := &run{o: Options{Progress: ui.New(ui.Options{Out: io.Discard}), QueryTimeout: DefaultQueryTimeout}, dyn: dyn, sum: &Summary{}}
	watch := func(ctx context.Context, t target) error {
		return r.waitGone(ctx, []target{t}, time.Minute, "test")
	}
	poll := func(every time.Duration) func(context.Context, target) error {
		return func(ctx context.Context, t target) error {
			for {
				_, err := dyn.Resource(t.gvr).Namespace(t.ns).Get(ctx, t.name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
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
	waits := make([]func(context.Context, target) error, 0, 64)
	for range 24 {
		waits = append(waits, watch)
	}
	for range 20 {
		waits = append(waits, poll(10*time.Second), poll(15*time.Second))
	}
	var all testenv.Latencies
	round := 0
	for b.Loop() {
		round++
		names := make([]string, len(waits))
		for i := range names {
			names[i] = fmt.Sprintf("held-%d-%d", round, i)
			cluster.CreateYAML(b, ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+names[i]+", namespace: default, finalizers: [stand-in.krops.io/provider]}\n")
			if err := dyn.Resource(cms).Namespace("default").Delete(ctx, names[i], metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		all = testenv.DetectionSamples(b, len(waits), 15*time.Second,
			func(i int) error {
				_, err := dyn.Resource(cms).Namespace("default").Patch(ctx, names[i], "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				return err
			},
			func(ctx context.Context, i int) error {
				return waits[i](ctx, target{gvr: cms, ns: "default", name: names[i], kind: "ConfigMap"})
			})
	}
	// Samples 0-23 are the watch's, then the polls alternate.
	var w, p10, p15 testenv.Latencies
	for i, d := range all {
		switch {
		case i < 24:
			w = append(w, d)
		case (i-24)%2 == 0:
			p10 = append(p10, d)
		default:
			p15 = append(p15, d)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mw := max(w.Percentile(50), time.Millisecond)
	b.ReportMetric(ms(w.Percentile(50)), "watch_p50_ms")
	b.ReportMetric(ms(w.Percentile(95)), "watch_p95_ms")
	b.ReportMetric(ms(p10.Percentile(50)), "poll10s_p50_ms")
	b.ReportMetric(ms(p15.Percentile(50)), "poll15s_p50_ms")
	b.ReportMetric(float64(p10.Percentile(50))/float64(mw), "x_vs_10s_poll")
	b.ReportMetric(float64(p15.Percentile(50))/float64(mw), "x_vs_15s_poll")
}
