package testenv

import "testing"

// The contract labels come from each provider's own kustomization, which is
// not always the versions its CRDs serve: Cluster API reads CAPA's v1beta2
// objects by contract v1beta1 (status.ready), and a label naming contract
// v1beta2 left every EKS cluster waiting for infrastructure forever.
func TestContractLabelsAreTheProvidersOwn(t *testing.T) {
	cases := []struct {
		set          CRDSet
		crd, key, is string
		absent       string
	}{
		{CAPA, "awsmanagedclusters.infrastructure.cluster.x-k8s.io", "cluster.x-k8s.io/v1beta1", "v1beta1_v1beta2", "cluster.x-k8s.io/v1beta2"},
		{CAPA, "awsmanagedcontrolplanes.controlplane.cluster.x-k8s.io", "cluster.x-k8s.io/v1beta1", "v1beta1_v1beta2", "cluster.x-k8s.io/v1beta2"},
		{CAPD, "dockerclusters.infrastructure.cluster.x-k8s.io", "cluster.x-k8s.io/v1beta2", "v1beta2", ""},
		{CAPG, "gcpclusters.infrastructure.cluster.x-k8s.io", "cluster.x-k8s.io/v1beta1", "v1beta1", "cluster.x-k8s.io/v1beta2"},
	}
	for _, c := range cases {
		m, err := contractLabels(c.set)
		if err != nil {
			t.Fatal(err)
		}
		labels, ok := m[c.crd]
		if !ok {
			t.Errorf("%s: no contract labels for %s (found %d CRDs with labels)", c.set.Name, c.crd, len(m))
			continue
		}
		if labels[c.key] != c.is {
			t.Errorf("%s %s: %s = %q, want %q (all: %v)", c.set.Name, c.crd, c.key, labels[c.key], c.is, labels)
		}
		if _, has := labels[c.absent]; c.absent != "" && has {
			t.Errorf("%s %s: has %s, which the provider does not declare (all: %v)", c.set.Name, c.crd, c.absent, labels)
		}
	}
	// The core's CRDs declare none: labelContracts falls back for them.
	if m, err := contractLabels(CAPICore); err != nil || m["clusters.cluster.x-k8s.io"] != nil {
		t.Errorf("core Cluster CRD: declared %v (err %v), want none", m["clusters.cluster.x-k8s.io"], err)
	}
}
