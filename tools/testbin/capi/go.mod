module github.com/kropsdev/krops/tools/testbin/capi

go 1.26.0

// The Cluster API managers tests run as real processes against envtest
// (tools/testbin/capi.sh): core, kubeadm bootstrap, kubeadm control plane
// and CAPD (in-memory backend), from this one module graph. Its API types live in a separate module that the
// proxy serves only when asked for by exact version.
require (
	sigs.k8s.io/cluster-api v1.14.2
	sigs.k8s.io/cluster-api/api v1.14.2
	sigs.k8s.io/cluster-api/test v1.14.2
)
