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

	"github.com/kropsdev/krops/tools/kit/kubewait"
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
	watch := func(ctx context.Context, t kubewait.Target) error {
		return r.waitGone(ctx, []kubewait.Target{t}, time.Minute, "test")
	}
	poll := func(every time.Duration) func(context.Context, kubewait.Target) error {
		return func(ctx context.Context, t kubewait.Target) error {
			for {
				_, err := dyn.Resource(t.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
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
	var waits []func(context.Context, kubewait.Target) error
	var labels []string
	for range 24 {
		waits, labels = append(waits, watch), append(labels, "watch")
	}
	for range 20 {
		waits, labels = append(waits, poll(10*time.Second), poll(15*time.Second)), append(labels, "10s_poll", "15s_poll")
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
				return waits[i](ctx, kubewait.Target{Resource: cms, Namespace: "default", Name: names[i], Kind: "ConfigMap"})
			})
	}
	testenv.ReportDetection(b, labels, all, "watch")
}
