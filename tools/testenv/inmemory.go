package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// inMemoryCluster is a one-node control plane on CAPD's in-memory backend:
// Cluster, KubeadmControlPlane, DevCluster, DevMachineTemplate, all named
// NAME in NAMESPACE.
const inMemoryCluster = `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevCluster
metadata:
  name: NAME
  namespace: NAMESPACE
  # CAPD v1.14.2's in-memory backend writes into the annotations map and
  # panics when there is none.
  annotations: {krops.io/test: "in-memory"}
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: NAME-control-plane, namespace: NAMESPACE}
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
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  replicas: 1
  version: v1.34.0
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: NAME-control-plane}
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs: [localhost, 127.0.0.1]
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  clusterNetwork:
    pods: {cidrBlocks: ["192.168.0.0/16"]}
    services: {cidrBlocks: ["10.128.0.0/12"]}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: NAME}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: NAME}
`

// CreateInMemoryCluster creates a one-node Cluster on CAPD's in-memory
// backend (RunClusterAPIStack provisions it): the Cluster, its
// KubeadmControlPlane, DevCluster and DevMachineTemplate, in namespace
// (created when missing).
func CreateInMemoryCluster(t testing.TB, c *Cluster, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	manifest := strings.NewReplacer("NAMESPACE", namespace, "NAME", name).Replace(inMemoryCluster)
	for _, doc := range strings.Split(manifest, "\n---\n") {
		c.CreateYAML(t, ctx, doc)
	}
}

// ClusterState is what WaitCluster waits for.
type ClusterState int

const (
	// ClusterAvailable: the Cluster's Available condition is True.
	ClusterAvailable ClusterState = iota
	// ClusterGone: the Cluster is not found.
	ClusterGone
)

// ClusterGVK is Cluster API's Cluster.
var ClusterGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}

// WaitCluster waits up to timeout for Cluster namespace/name to reach
// state, and returns how long that took.
func WaitCluster(t testing.TB, c *Cluster, namespace, name string, state ClusterState, timeout time.Duration) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	key := client.ObjectKey{Namespace: namespace, Name: name}
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ClusterGVK)
		err := c.Client.Get(ctx, key, u)
		switch {
		case state == ClusterGone && apierrors.IsNotFound(err):
			return time.Since(start)
		case state == ClusterAvailable && err == nil && available(u):
			return time.Since(start)
		case ctx.Err() != nil:
			t.Fatalf("Cluster %s/%s: %s not reached in %v (last error %v, status %v)", namespace, name, state, timeout, err, u.Object["status"])
		}
		time.Sleep(time.Second)
	}
}

func (s ClusterState) String() string {
	if s == ClusterGone {
		return "gone"
	}
	return "Available"
}

// DeleteCluster deletes Cluster namespace/name (Cluster API cascades).
func DeleteCluster(t testing.TB, c *Cluster, namespace, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ClusterGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	if err := c.Client.Delete(context.Background(), u); err != nil {
		t.Fatal(fmt.Errorf("deleting Cluster %s/%s: %w", namespace, name, err))
	}
}

func available(u *unstructured.Unstructured) bool {
	status, _, _ := Condition(u, "Available")
	return status == "True"
}
