module github.com/kropsdev/krops/tools/testbin/capi

go 1.26.0

// The Cluster API core manager tests run as a real process against envtest
// (tools/testbin/capi.sh). Its API types live in a separate module that the
// proxy serves only when asked for by exact version.
require (
	sigs.k8s.io/cluster-api v1.14.2
	sigs.k8s.io/cluster-api/api v1.14.2
)
