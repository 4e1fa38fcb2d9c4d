module github.com/kropsdev/krops/tools/realengine/flux

go 1.26.0

// The Flux controllers the real-engine lane runs as pods, at the versions the
// Flux Operator's pinned manifests name for Flux v2.9.5 (its data directory,
// flux-images/v2.9.5): tools/realengine/images.sh builds them into images.
require (
	github.com/fluxcd/kustomize-controller v1.9.5
	github.com/fluxcd/kustomize-controller/api v1.9.5
	github.com/fluxcd/source-controller v1.9.5
	github.com/fluxcd/source-controller/api v1.9.5
)

// The controllers' own replace directives.
replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be

replace (
	gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1
	sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
	sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
)

// The artifact module source-controller requires is not served; v0.18.0 is.
replace github.com/fluxcd/pkg/artifact => github.com/fluxcd/pkg/artifact v0.18.0
