package teardown

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
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
// returning: the teardown's watch against a 10 s polling loop in the same
// run. The finalizer is removed by hand (a STAND-IN for a provider) at a
// random moment, so the poll meets it at a random phase. Target: the
// watch's median under 1 s.
func BenchmarkAbsenceDetection(b *testing.B) {
	cluster := testenv.APIServer(b, testenv.ClusterOptions{})
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	r := &run{o: Options{Progress: ui.New(ui.Options{Out: io.Discard}), QueryTimeout: DefaultQueryTimeout}, dyn: dyn, sum: &Summary{}}
	n := 0
	sample := func(wait func(context.Context, target) error) time.Duration {
		n++
		name := fmt.Sprintf("held-%d", n)
		cluster.CreateYAML(b, ctx, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: default, finalizers: [stand-in.krops.io/provider]}\n")
		if err := dyn.Resource(cms).Namespace("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		released := make(chan time.Time, 1)
		go func() {
			time.Sleep(100*time.Millisecond + rand.N(10*time.Second))
			at := time.Now()
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := dyn.Resource(cms).Namespace("default").Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
				b.Error(err)
			}
			released <- at
		}()
		if err := wait(ctx, target{gvr: cms, ns: "default", name: name, kind: "ConfigMap"}); err != nil {
			b.Fatal(err)
		}
		return time.Since(<-released)
	}
	watch := func(ctx context.Context, t target) error {
		return r.waitGone(ctx, []target{t}, time.Minute, "test")
	}
	poll := func(ctx context.Context, t target) error {
		for {
			_, err := dyn.Resource(t.gvr).Namespace(t.ns).Get(ctx, t.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			time.Sleep(10 * time.Second)
		}
	}
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	var w, p []time.Duration
	for b.Loop() {
		for range 3 {
			w = append(w, sample(watch))
			p = append(p, sample(poll))
		}
	}
	mw, mp := median(w), median(p)
	b.ReportMetric(float64(mw.Milliseconds()), "watch_median_ms")
	b.ReportMetric(float64(mp.Milliseconds()), "poll10s_median_ms")
	b.ReportMetric(float64(mp)/float64(max(mw, time.Millisecond)), "x_vs_10s_poll")
}
