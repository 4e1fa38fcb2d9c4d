package pivot_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/pivot"
	"github.com/kropsdev/krops/tools/testenv"
)

// objectsPerCluster is what graph() makes for each Cluster.
const objectsPerCluster = 8

// graph creates n management-cluster-shaped object graphs in default: the
// Cluster, its infrastructure cluster, control plane and machine template,
// a control plane Machine with its infrastructure machine, and two Secrets.
// Statuses say provisioned, as a running provider would have written them
// (no provider runs here), so clusterctl's move preflight passes.
func graph(b *testing.B, ctx context.Context, c *testenv.Cluster, ns string, n int) {
	b.Helper()
	create := func(doc string) *unstructured.Unstructured {
		return c.CreateYAML(b, ctx, strings.ReplaceAll(doc, "@NS@", ns))
	}
	own := func(u, owner *unstructured.Unstructured) {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}})
		if err := c.Client.Update(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("bench-%03d", i)
		tpl := create(fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: DevMachineTemplate\nmetadata: {name: %s-cp, namespace: @NS@}\nspec: {template: {spec: {backend: {inMemory: {}}}}}\n", name))
		dc := create(fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: DevCluster\nmetadata: {name: %s, namespace: @NS@}\nspec: {backend: {inMemory: {}}, controlPlaneEndpoint: {host: 10.0.0.1, port: 6443}}\n", name))
		kcp := create(fmt.Sprintf("apiVersion: controlplane.cluster.x-k8s.io/v1beta2\nkind: KubeadmControlPlane\nmetadata: {name: %s-cp, namespace: @NS@}\nspec: {replicas: 1, version: v1.34.0, machineTemplate: {spec: {infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: %s-cp}}}}\n", name, name))
		cl := create(fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: %s, namespace: @NS@}\nspec:\n  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: %s}\n  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: %s-cp}\n", name, name, name))
		dm := create(fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: DevMachine\nmetadata: {name: %s-cp-0, namespace: @NS@}\nspec: {backend: {inMemory: {}}}\n", name))
		m := create(fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Machine\nmetadata: {name: %s-cp-0, namespace: @NS@, labels: {cluster.x-k8s.io/cluster-name: %s}}\nspec: {clusterName: %s, bootstrap: {dataSecretName: %s-cp-0-bootstrap}, infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachine, name: %s-cp-0}}\n", name, name, name, name, name))
		for _, u := range []*unstructured.Unstructured{dc, kcp, tpl} {
			own(u, cl)
		}
		own(m, kcp)
		own(dm, m)
		for _, s := range []string{"kubeconfig", "ca"} {
			create(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s-%s, namespace: @NS@, labels: {cluster.x-k8s.io/cluster-name: %s}}\ntype: cluster.x-k8s.io/secret\nstringData: {value: %s}\n", name, s, name, s))
		}
	}
}

// provision writes the statuses a running provider would (none runs
// here): every Cluster in ns provisioned with its control plane
// initialized, every Machine with a node. A move does not carry status, so
// this runs again on each move's target, outside the timed part.
func provision(b *testing.B, ctx context.Context, c *testenv.Cluster, ns string) {
	b.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	for kind, fields := range map[string]map[string]any{
		"Cluster": {
			"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true},
			"conditions":     []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": now}},
		},
		"Machine": {"nodeRef": map[string]any{"name": "node"}},
	} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: kind + "List"})
		if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			for k, v := range fields {
				if err := unstructured.SetNestedField(u.Object, v, "status", k); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Client.Status().Update(ctx, u); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func count(b *testing.B, ctx context.Context, c *testenv.Cluster, ns string) int {
	b.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterList"})
	if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	return len(list.Items)
}

// BenchmarkMove moves management-cluster-shaped graphs (10 and 50
// Clusters, 8 objects each) between two real API servers with krops-pivot's
// move (the clusterctl library, in process) and with the clusterctl binary
// built from the same module version, alternating which goes first and in
// which direction, on the same data in the same run. It reports objects/s
// for both and the library's time as a ratio of the binary's (target: at
// most 1.1).
func BenchmarkMove(b *testing.B) {
	dir := testenv.ClusterAPIBin(b)
	clusterctl := filepath.Join(dir, "clusterctl")
	crds := []testenv.CRDSet{testenv.CAPICore, testenv.CAPD}
	a := testenv.APIServer(b, testenv.ClusterOptions{Name: "a", CRDs: crds})
	z := testenv.APIServer(b, testenv.ClusterOptions{Name: "z", CRDs: crds})
	ctx := context.Background()
	for _, c := range []*testenv.Cluster{a, z} {
		testenv.LabelForMove(b, ctx, c)
	}
	for _, n := range []int{10, 50} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			// A namespace per size (and per b.N probe): each starts on a.
			ns := fmt.Sprintf("bench-%d-%d", n, b.N)
			for _, c := range []*testenv.Cluster{a, z} {
				c.CreateYAML(b, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
			}
			graph(b, ctx, a, ns, n)
			provision(b, ctx, a, ns)
			from, to := a, z
			var lib, bin time.Duration
			b.ResetTimer()
			for i := range b.N {
				// Each iteration moves there and back, one way with each
				// tool; who goes first alternates.
				for _, useLib := range []bool{i%2 == 0, i%2 != 0} {
					start := time.Now()
					if useLib {
						err := pivot.Move(ctx, pivot.MoveOptions{From: kubecfg.Ref{Path: from.Kubeconfig, Context: from.Context}, To: kubecfg.Ref{Path: to.Kubeconfig, Context: to.Context}, Namespace: ns})
						if err != nil {
							b.Fatal(err)
						}
						lib += time.Since(start)
					} else {
						out, err := exec.Command(clusterctl, "move", "--kubeconfig", from.Kubeconfig, "--kubeconfig-context", from.Context,
							"--to-kubeconfig", to.Kubeconfig, "--to-kubeconfig-context", to.Context, "-n", ns).CombinedOutput()
						if err != nil {
							b.Fatalf("clusterctl move: %v\n%s", err, out)
						}
						bin += time.Since(start)
					}
					b.StopTimer()
					if got := count(b, ctx, to, ns); got != n {
						b.Fatalf("after a move the target holds %d Clusters, want %d", got, n)
					}
					provision(b, ctx, to, ns)
					b.StartTimer()
					from, to = to, from
				}
			}
			objs := float64(n * objectsPerCluster * b.N)
			b.ReportMetric(objs/lib.Seconds(), "objects/s-library")
			b.ReportMetric(objs/bin.Seconds(), "objects/s-clusterctl")
			b.ReportMetric(lib.Seconds()/bin.Seconds(), "library/clusterctl")
		})
	}
}
