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
	var waits []func(context.Context, kubewait.Target) error
	var labels []string
	for range 24 {
		waits, labels = append(waits, watch), append(labels, "watch")
	}
	for range 20 {
		waits, labels = append(waits, poll(2*time.Second), poll(10*time.Second)), append(labels, "2s_poll", "10s_poll")
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
	testenv.ReportDetection(b, labels, all, "watch")
}
