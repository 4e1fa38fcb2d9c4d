package testenv

import (
	"testing"
	"time"
)

// The whole Cluster API stack runs here without Docker or a cloud: a
// Cluster on CAPD's in-memory backend becomes Available through the real
// core, kubeadm bootstrap, kubeadm control plane and CAPD managers, and its
// deletion cascades until it is gone.
func TestClusterAPIStackProvisionsAndDeletesACluster(t *testing.T) {
	c := APIServer(t, ClusterOptions{Name: "stack", Webhooks: true, CRDs: []CRDSet{CAPICore, CAPD}})
	RunClusterAPIStack(t, c)
	CreateInMemoryCluster(t, c, "capi-test", "mem")
	t.Logf("Cluster Available after %v", WaitCluster(t, c, "capi-test", "mem", ClusterAvailable, 4*time.Minute).Round(time.Second))
	DeleteCluster(t, c, "capi-test", "mem")
	WaitCluster(t, c, "capi-test", "mem", ClusterGone, 2*time.Minute)
}
