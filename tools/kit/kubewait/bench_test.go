package kubewait_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/testenv"
)

// BenchmarkReadinessDetection measures the time from a condition turning
// True to the wait returning: kubewait's watch against polling loops of 2 s
// and 10 s (the original lifecycle polled every 2 to 10 s), in the same run.
// The condition is written by hand (a STAND-IN for a controller) at a
// random moment, so the polls meet it at a random phase.
func BenchmarkReadinessDetection(b *testing.B) {
	cluster := testenv.APIServer(b, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxKustomize}})
	ctx := context.Background()
	cluster.CreateYAML(b, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n")
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	n := 0
	sample := func(wait func(context.Context, kubewait.Target) error, spread time.Duration) time.Duration {
		n++
		name := fmt.Sprintf("k%d", n)
		u := cluster.CreateYAML(b, ctx, kustomization(name, "x"))
		flipped := make(chan time.Time, 1)
		go func() {
			time.Sleep(100*time.Millisecond + rand.N(spread))
			at := time.Now()
			if err := testenv.SetCondition(ctx, cluster.Client, u, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1}); err != nil {
				b.Error(err)
			}
			flipped <- at
		}()
		if err := wait(ctx, ks(name)); err != nil {
			b.Fatal(err)
		}
		return time.Since(<-flipped)
	}
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
				time.Sleep(every)
			}
		}
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	var w, p2, p10 []time.Duration
	for b.Loop() {
		for range 5 {
			w = append(w, sample(watch, 2*time.Second))
		}
		for range 3 {
			p2 = append(p2, sample(poll(2*time.Second), 2*time.Second))
			p10 = append(p10, sample(poll(10*time.Second), 10*time.Second))
		}
	}
	mw, m2, m10 := median(w), median(p2), median(p10)
	b.ReportMetric(float64(mw.Milliseconds()), "watch_median_ms")
	b.ReportMetric(float64(m2.Milliseconds()), "poll2s_median_ms")
	b.ReportMetric(float64(m10.Milliseconds()), "poll10s_median_ms")
	b.ReportMetric(float64(m10)/float64(max(mw, time.Millisecond)), "x_vs_10s_poll")
	b.ReportMetric(float64(m2)/float64(max(mw, time.Millisecond)), "x_vs_2s_poll")
}
