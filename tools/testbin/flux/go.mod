module github.com/kropsdev/krops/tools/testbin/flux

go 1.26.0

// The Flux controllers tests run as real processes against envtest. v1.9.6
// is the newest release whose dependencies the module proxy serves (v1.10
// needs fluxcd/pkg/apis/crypto, which it does not serve at all).
require (
	github.com/fluxcd/kustomize-controller v1.9.6
	github.com/fluxcd/kustomize-controller/api v1.9.6
	github.com/fluxcd/source-controller v1.9.6
	github.com/fluxcd/source-controller/api v1.9.6
)

// The controllers' own replace directives.
replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be

replace (
	gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1
	sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
	sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
)

// v0.18.3, which source-controller v1.9.6 requires, is not served; v0.18.0 is.
replace github.com/fluxcd/pkg/artifact => github.com/fluxcd/pkg/artifact v0.18.0
