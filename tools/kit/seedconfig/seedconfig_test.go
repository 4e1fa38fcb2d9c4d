package seedconfig

import (
	"testing"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/seed"
)

type lookup map[string]string

func (l lookup) get(k string) (string, bool) { v, ok := l[k]; return v, ok }

// Inside the toolbox, localhost is the container: the artifact goes to the
// registry by its name on the kind network, unless REGISTRY_HOST says
// otherwise.
func TestLocalRefInAndOutOfTheToolbox(t *testing.T) {
	for _, tc := range []struct {
		toolbox bool
		env     lookup
		want    string
	}{
		{false, lookup{}, "localhost:5001/krops:latest"},
		{true, lookup{}, "krops-registry:5000/krops:latest"},
		{true, lookup{"REGISTRY_HOST": "registry.example"}, "registry.example:5001/krops:latest"},
	} {
		conf := &config.Config{}
		conf.Bootstrap.RegistryName = "krops-registry"
		sel := &cli.Selected{Lookup: tc.env.get, Knobs: &config.Knobs{Toolbox: tc.toolbox, RegistryPort: 5001, OCIRepository: "krops", OCITag: "latest"}, Config: conf}
		if got := LocalRef(sel); got != tc.want {
			t.Errorf("toolbox %v, %v: %s, want %s", tc.toolbox, tc.env, got, tc.want)
		}
	}
}

// The local registry speaks plain HTTP; from inside the toolbox it is not
// on loopback, so a chart on it is recognised by its address, and nothing
// else loses TLS.
func TestOnlyTheLocalRegistryIsPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		toolbox bool
		repo    string
		want    bool
	}{
		{true, "oci://krops-registry:5000/charts", true},
		{true, "oci://krops-registry:5001/charts", false},
		{true, "oci://krops-registry.example:5000/charts", false},
		{true, "oci://ghcr.io/controlplaneio-fluxcd/charts", false},
		{false, "oci://localhost:5001/charts", true},
		{false, "oci://krops-registry:5000/charts", false},
		{false, "https://localhost:5001/charts", false},
	} {
		conf := &config.Config{}
		conf.Bootstrap.RegistryName = "krops-registry"
		sel := &cli.Selected{Lookup: lookup{}.get, Knobs: &config.Knobs{Toolbox: tc.toolbox, RegistryPort: 5001}, Config: conf}
		if got := OnLocalRegistry(sel, tc.repo); got != tc.want {
			t.Errorf("toolbox %v, %s: plain HTTP %v, want %v", tc.toolbox, tc.repo, got, tc.want)
		}
	}
}

// The trees' HelmRepositories read KROPS_CHART_REPOSITORY as the cluster's
// pods reach it: the local registry by its in-cluster address over plain
// HTTP, whether krops runs on this machine or in the toolbox; any other
// repository as given, over TLS; unset, nothing (upstream).
func TestChartsAsTheClusterReachesThem(t *testing.T) {
	for _, tc := range []struct {
		toolbox bool
		repo    string
		want    seed.Charts
	}{
		{false, "oci://localhost:5001/charts", seed.Charts{Repository: "oci://krops-registry:5000/charts", Insecure: true}},
		{true, "oci://krops-registry:5000/team/charts", seed.Charts{Repository: "oci://krops-registry:5000/team/charts", Insecure: true}},
		{false, "oci://mirror.example/charts", seed.Charts{Repository: "oci://mirror.example/charts"}},
		{false, "https://charts.example/all", seed.Charts{Repository: "https://charts.example/all"}},
		{false, "", seed.Charts{}},
	} {
		conf := &config.Config{}
		conf.Bootstrap.RegistryName = "krops-registry"
		sel := &cli.Selected{Lookup: lookup{}.get, Knobs: &config.Knobs{Toolbox: tc.toolbox, RegistryPort: 5001, ChartRepository: tc.repo}, Config: conf}
		if got := inClusterCharts(sel, registryInCluster(sel, Params{})); got != tc.want {
			t.Errorf("toolbox %v, %q: %+v, want %+v", tc.toolbox, tc.repo, got, tc.want)
		}
	}
}

// The provider objects read KROPS_PROVIDER_REPOSITORY as the cluster's
// Cluster API operator reaches it, translated as the charts are.
func TestProvidersAsTheClusterReachesThem(t *testing.T) {
	for _, tc := range []struct {
		toolbox bool
		repo    string
		want    seed.Providers
	}{
		{false, "oci://localhost:5001/capi", seed.Providers{Repository: "oci://krops-registry:5000/capi", PlainHTTP: true}},
		{true, "oci://krops-registry:5000/team/capi", seed.Providers{Repository: "oci://krops-registry:5000/team/capi", PlainHTTP: true}},
		{false, "oci://mirror.example/capi", seed.Providers{Repository: "oci://mirror.example/capi"}},
		{false, "", seed.Providers{}},
	} {
		conf := &config.Config{}
		conf.Bootstrap.RegistryName = "krops-registry"
		sel := &cli.Selected{Lookup: lookup{}.get, Knobs: &config.Knobs{Toolbox: tc.toolbox, RegistryPort: 5001, ProviderRepository: tc.repo}, Config: conf}
		if got := inClusterProviders(sel, registryInCluster(sel, Params{})); got != tc.want {
			t.Errorf("toolbox %v, %q: %+v, want %+v", tc.toolbox, tc.repo, got, tc.want)
		}
	}
}
