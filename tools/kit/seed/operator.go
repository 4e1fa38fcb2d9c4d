package seed

import (
	"context"
	"errors"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/helmrelease"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
)

// OperatorRelease is the Helm release name, the one Flux adopts later.
const OperatorRelease = "flux-operator"

// OperatorOptions choose the chart.
type OperatorOptions struct {
	// Repository is an oci:// chart repository; the chart is
	// <Repository>/flux-operator.
	Repository string
	Version    string
	// PlainHTTP reaches Repository without TLS: the local registry krops
	// starts speaks plain HTTP under a name that is not loopback (its
	// container name, from inside the toolbox).
	PlainHTTP bool
}

// InstallOperator installs or upgrades the flux-operator release and says
// whether it changed anything. A release already deployed at the version is
// left alone (an upgrade would write a new release revision).
//
// The registry client reads no credentials: the chart is public, and a
// release pulled with the user's credentials could not be adopted by Flux
// without drift.
func InstallOperator(ctx context.Context, c kubecfg.Ref, namespace string, o OperatorOptions) (bool, error) {
	repo := o.Repository
	if repo == "" {
		repo = config.DefaultChartRepository
	}
	if o.Version == "" {
		return false, errors.New("[charts] flux-operator is not set: pin the chart version in bootstrap.toml")
	}
	// The operator's readiness shows in the FluxInstance it reconciles,
	// which the seed waits for by watch; Helm waits for hooks only.
	return helmrelease.Ensure(ctx, helmrelease.Chart{Repository: repo, Name: "flux-operator", Version: o.Version, PlainHTTP: o.PlainHTTP},
		helmrelease.Release{Cluster: c, Name: OperatorRelease, Namespace: namespace})
}
