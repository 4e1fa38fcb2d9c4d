package pivot_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/pivot"
	"github.com/kropsdev/krops/tools/testenv"
)

// krops-pivot's move, between two API servers, of a Cluster the real Cluster
// API controllers provisioned (core, kubeadm, KCP, CAPD's in-memory
// backend): once the controllers run against the target, the moved Cluster
// is Available there again, and nothing is left on the source. The target
// is a second envtest server, a STAND-IN for the management cluster itself
// (the in-memory workload API server cannot host CRDs or controllers).
func TestMoveOfAClusterTheRealControllersProvisioned(t *testing.T) {
	crds := []testenv.CRDSet{testenv.CAPICore, testenv.CAPD}
	kind := testenv.APIServer(t, testenv.ClusterOptions{Name: "kind", Webhooks: true, CRDs: crds})
	target := testenv.APIServer(t, testenv.ClusterOptions{Name: "target", Webhooks: true, CRDs: crds})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	testenv.LabelForMove(t, ctx, kind)
	testenv.LabelForMove(t, ctx, target)

	onKind := testenv.RunClusterAPIStack(t, kind)
	testenv.CreateInMemoryCluster(t, kind, "capi-test", "mem")
	t.Logf("Available on kind after %v", testenv.WaitCluster(t, kind, "capi-test", "mem", testenv.ClusterAvailable, 4*time.Minute).Round(time.Second))

	start := time.Now()
	if err := pivot.Move(ctx, pivot.MoveOptions{
		From:      kubecfg.Ref{Path: kind.Kubeconfig, Context: kind.Context},
		To:        kubecfg.Ref{Path: target.Kubeconfig, Context: target.Context},
		Namespace: "capi-test",
	}); err != nil {
		t.Fatalf("move: %v", err)
	}
	t.Logf("moved in %v", time.Since(start).Round(100*time.Millisecond))
	testenv.WaitCluster(t, kind, "capi-test", "mem", testenv.ClusterGone, 30*time.Second)

	// The source's controllers stop (as kind is deleted after a pivot); the
	// target's take over.
	onKind.Stop()
	testenv.RunClusterAPIStack(t, target)
	t.Logf("Available on the target after %v", testenv.WaitCluster(t, target, "capi-test", "mem", testenv.ClusterAvailable, 4*time.Minute).Round(time.Second))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testenv.ClusterGVK)
	if err := target.Client.Get(ctx, client.ObjectKey{Namespace: "capi-test", Name: "mem"}, u); err != nil {
		t.Fatal(err)
	}
	if paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); paused {
		t.Error("the moved Cluster is still paused on the target")
	}
	testenv.DeleteCluster(t, target, "capi-test", "mem")
	testenv.WaitCluster(t, target, "capi-test", "mem", testenv.ClusterGone, 2*time.Minute)
}
