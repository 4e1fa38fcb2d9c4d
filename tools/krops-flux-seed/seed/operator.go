package seed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/registry"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// DefaultChartRepository is where the flux-operator chart is published.
const DefaultChartRepository = "oci://ghcr.io/controlplaneio-fluxcd/charts"

// OperatorRelease is the Helm release name, the one Flux adopts later.
const OperatorRelease = "flux-operator"

// OperatorOptions choose the chart.
type OperatorOptions struct {
	// Repository is an oci:// chart repository; the chart is
	// <Repository>/flux-operator.
	Repository string
	Version    string
}

// InstallOperator installs or upgrades the flux-operator release and says
// whether it changed anything. A release already deployed at the version is
// left alone (an upgrade would write a new release revision).
//
// The registry client reads no credentials: the chart is public, and a
// release pulled with the user's credentials could not be adopted by Flux
// without drift.
func InstallOperator(ctx context.Context, c Cluster, namespace string, o OperatorOptions) (bool, error) {
	repo := o.Repository
	if repo == "" {
		repo = DefaultChartRepository
	}
	if o.Version == "" {
		return false, errors.New("[charts] flux-operator is not set: pin the chart version in bootstrap.toml")
	}
	scratch, err := os.MkdirTemp("", "krops-helm-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(scratch)
	settings := cli.New()
	settings.KubeConfig, settings.KubeContext = c.Kubeconfig, c.Context
	settings.SetNamespace(namespace)
	settings.RegistryConfig = filepath.Join(scratch, "registry.json") // empty: no credentials
	settings.RepositoryConfig = filepath.Join(scratch, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(scratch, "cache")

	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	if err := cfg.Init(settings.RESTClientGetter(), namespace, "secret"); err != nil {
		return false, fmt.Errorf("helm: %w", err)
	}
	plain := plainHTTP(repo)
	opts := []registry.ClientOption{registry.ClientOptCredentialsFile(settings.RegistryConfig), registry.ClientOptWriter(io.Discard)}
	if plain {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("helm registry client: %w", err)
	}
	cfg.RegistryClient = rc

	existing, err := action.NewGet(cfg).Run(OperatorRelease)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		existing = nil
	case err != nil:
		return false, fmt.Errorf("reading release %s/%s: %w", namespace, OperatorRelease, err)
	}
	if rel, ok := existing.(*releasev1.Release); ok && rel.Info != nil && rel.Info.Status == "deployed" && rel.Chart != nil && rel.Chart.Metadata != nil && rel.Chart.Metadata.Version == o.Version {
		return false, nil
	}

	ref := strings.TrimRight(repo, "/") + "/flux-operator"
	install := action.NewInstall(cfg)
	install.Version = o.Version
	install.PlainHTTP = plain
	// The operator's readiness shows in the FluxInstance it reconciles,
	// which the seed waits for by watch; Helm waits for hooks only.
	install.WaitStrategy = kube.HookOnlyStrategy
	path, err := install.LocateChart(ref, settings)
	if err != nil {
		return false, fmt.Errorf("fetching chart %s %s: %w", ref, o.Version, err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		return false, fmt.Errorf("loading chart %s %s: %w", ref, o.Version, err)
	}
	if existing == nil {
		install.ReleaseName = OperatorRelease
		install.Namespace = namespace
		if _, err := install.RunWithContext(ctx, ch, nil); err != nil {
			return false, fmt.Errorf("installing release %s/%s: %w", namespace, OperatorRelease, err)
		}
		return true, nil
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	up.WaitStrategy = kube.HookOnlyStrategy
	if _, err := up.RunWithContext(ctx, OperatorRelease, ch, nil); err != nil {
		return false, fmt.Errorf("upgrading release %s/%s to %s: %w", namespace, OperatorRelease, o.Version, err)
	}
	return true, nil
}

// plainHTTP is for a registry on this machine (the tests', or a local
// mirror): everything else is reached over TLS.
func plainHTTP(repo string) bool {
	u, err := url.Parse(repo)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
