package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// inMemoryCluster is a one-node control plane on CAPD's in-memory backend:
// Cluster, KubeadmControlPlane, DevCluster, DevMachineTemplate.
const inMemoryCluster = `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevCluster
metadata:
  name: mem
  namespace: capi-test
  # CAPD v1.14.2's in-memory backend writes into the annotations map and
  # panics when there is none.
  annotations: {krops.io/test: "in-memory"}
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: mem-control-plane, namespace: capi-test}
spec:
  template:
    spec:
      backend:
        inMemory:
          vm: {provisioning: {startupDuration: "2s"}}
          node: {provisioning: {startupDuration: "1s"}}
          apiServer: {provisioning: {startupDuration: "1s"}}
          etcd: {provisioning: {startupDuration: "1s"}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: mem, namespace: capi-test}
spec:
  replicas: 1
  version: v1.34.0
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: mem-control-plane}
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs: [localhost, 127.0.0.1]
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: mem, namespace: capi-test}
spec:
  clusterNetwork:
    pods: {cidrBlocks: ["192.168.0.0/16"]}
    services: {cidrBlocks: ["10.128.0.0/12"]}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: mem}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: mem}
`

// The whole Cluster API stack runs here without Docker or a cloud: a
// Cluster on CAPD's in-memory backend becomes Available through the real
// core, kubeadm bootstrap, kubeadm control plane and CAPD managers, and its
// deletion cascades until it is gone.
func TestClusterAPIStackProvisionsAndDeletesACluster(t *testing.T) {
	c := APIServer(t, ClusterOptions{Name: "stack", Webhooks: true, CRDs: []CRDSet{CAPICore, CAPD}})
	RunClusterAPIStack(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capi-test"}}); err != nil {
		t.Fatal(err)
	}
	for _, doc := range splitYAML(inMemoryCluster) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	key := client.ObjectKey{Namespace: "capi-test", Name: "mem"}
	start := time.Now()
	for {
		if err := c.Client.Get(ctx, key, cluster); err != nil {
			t.Fatal(err)
		}
		if conditionTrue(cluster, "Available") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Cluster never became Available: %v", cluster.Object["status"])
		}
		time.Sleep(time.Second)
	}
	t.Logf("Cluster Available after %v", time.Since(start).Round(time.Second))
	if err := c.Client.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	for {
		err := c.Client.Get(ctx, key, cluster)
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the Cluster was never deleted: %v", err)
		}
		time.Sleep(time.Second)
	}
}

func splitYAML(s string) []string {
	var out []string
	for _, d := range strings.Split(s, "\n---\n") {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}

func conditionTrue(u *unstructured.Unstructured, condition string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == condition && m["status"] == "True" {
			return true
		}
	}
	return false
}
