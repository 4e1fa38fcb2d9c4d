package validate

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/testenv"
)

var placeholderDefault = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*:[=-]([^}]*)\}`)

// The local-host ClusterClasses and Clusters, handed to the real Cluster API
// core manager with its admission webhooks and the ClusterTopology gate: the
// webhooks must accept every object (ClusterClass patches and variables,
// Cluster topology against its class), and the topology engine must
// reconcile each Cluster from its class into a control plane and
// infrastructure cluster. The providers that would then provision machines
// (kubeadm, CAPD) do not run here.
func TestLocalHostTopologyWithRealClusterAPI(t *testing.T) {
	in := loadRepository(t)
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.CAPICore, testenv.CAPD}, Webhooks: true})
	capi := testenv.RunClusterAPI(t, cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var clusters, others []*unstructured.Unstructured
	for _, o := range in.Objects {
		if o.Root != "mgmt/local-host/clusterclasses" && o.Root != "mgmt/local-host/clusters" {
			continue
		}
		b, err := yaml.Marshal(o.Raw)
		if err != nil {
			t.Fatal(err)
		}
		// What Flux's substitution does when krops-run is absent.
		b = placeholderDefault.ReplaceAll(b, []byte("$1"))
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Cluster" {
			clusters = append(clusters, u)
		} else {
			others = append(others, u)
		}
	}
	if len(clusters) != 2 || len(others) < 4 {
		t.Fatalf("found %d Clusters and %d other objects in mgmt/local-host", len(clusters), len(others))
	}
	for _, u := range append(others, clusters...) {
		if err := cluster.Client.Create(ctx, u); err != nil {
			t.Fatalf("Cluster API refused %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, u := range clusters {
		waitForCondition(t, ctx, cluster.Client, u, "TopologyReconciled", capi)
	}
	kcps := &unstructured.UnstructuredList{}
	kcps.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneList"})
	if err := cluster.Client.List(ctx, kcps, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, k := range kcps.Items {
		v, _, _ := unstructured.NestedString(k.Object, "spec", "version")
		owners[k.GetLabels()["cluster.x-k8s.io/cluster-name"]] = v
	}
	for _, u := range clusters {
		want, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "version")
		if got, ok := owners[u.GetName()]; !ok || got != want {
			t.Errorf("Cluster %s: the topology made no KubeadmControlPlane at %s (control planes by cluster: %v)", u.GetName(), want, owners)
		}
	}
}

// waitForCondition waits until obj has condition cond=True.
func waitForCondition(t *testing.T, ctx context.Context, c client.Client, obj *unstructured.Unstructured, cond string, ctrls *testenv.Controllers) {
	t.Helper()
	last := "no condition yet"
	for {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, x := range conds {
				m, _ := x.(map[string]any)
				if m["type"] == cond {
					if m["status"] == "True" {
						return
					}
					last = strings.TrimSpace(m["reason"].(string) + ": " + stringOf(m["message"]))
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s: %s is not True: %s\n--- capi-manager ---\n%s", obj.GetKind(), obj.GetName(), cond, last, tailLines(ctrls.Logs("capi-manager"), 40))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
