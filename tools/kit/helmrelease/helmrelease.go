// Package helmrelease installs or upgrades one Helm release with the Helm
// Go SDK, on a cluster named by an explicit kubeconfig and context. A
// release already deployed at the wanted chart version is left alone, so a
// rerun writes nothing. No registry or repository credentials are read: the
// charts krops installs are public, and a release Flux adopts later must
// not depend on what one user's machine held.
package helmrelease

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
	"time"

	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/registry"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/util/version"
)

// Chart names a chart: in an OCI repository (oci://host/path, the chart at
// <Repository>/<Name>) or a classic chart repository (https://…/index.yaml).
type Chart struct {
	Repository string
	Name       string
	Version    string
	// PlainHTTP reaches an oci:// Repository without TLS. Loopback hosts
	// and http:// URLs are reached so anyway.
	PlainHTTP bool
}

func (c Chart) String() string { return c.Name + " " + c.Version + " from " + c.Repository }

// Release is where and how the chart is installed.
type Release struct {
	Cluster         kubecfg.Ref
	Name, Namespace string
	Values          map[string]any
	// Wait, when set, waits until the release's resources are ready (kstatus)
	// for up to Wait; zero waits for hooks only.
	Wait time.Duration
}

// Ensure installs or upgrades r to ch and says whether it changed anything.
func Ensure(ctx context.Context, ch Chart, r Release) (bool, error) {
	if ch.Version == "" {
		return false, fmt.Errorf("chart %s has no version: pin it in bootstrap.toml [charts]", ch.Name)
	}
	scratch, err := os.MkdirTemp("", "krops-helm-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(scratch)
	settings := cli.New()
	settings.KubeConfig, settings.KubeContext = r.Cluster.Path, r.Cluster.Context
	settings.SetNamespace(r.Namespace)
	settings.RegistryConfig = filepath.Join(scratch, "registry.json") // empty: no credentials
	settings.RepositoryConfig = filepath.Join(scratch, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(scratch, "cache")

	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	if err := cfg.Init(settings.RESTClientGetter(), r.Namespace, "secret"); err != nil {
		return false, fmt.Errorf("helm: %w", err)
	}
	oci := strings.HasPrefix(ch.Repository, "oci://")
	plain := ch.PlainHTTP || local(ch.Repository)
	opts := []registry.ClientOption{registry.ClientOptCredentialsFile(settings.RegistryConfig), registry.ClientOptWriter(io.Discard)}
	if plain {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("helm registry client: %w", err)
	}
	cfg.RegistryClient = rc

	name := r.Namespace + "/" + r.Name
	existing, err := action.NewGet(cfg).Run(r.Name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		existing = nil
	case err != nil:
		return false, fmt.Errorf("reading release %s: %w", name, err)
	}
	if rel, ok := existing.(*releasev1.Release); ok && rel.Info != nil && rel.Info.Status == "deployed" && rel.Chart != nil && rel.Chart.Metadata != nil && SameVersion(rel.Chart.Metadata.Version, ch.Version) {
		return false, nil
	}

	strategy, timeout := kube.HookOnlyStrategy, budget.HelmHooks
	if r.Wait > 0 {
		strategy, timeout = kube.StatusWatcherStrategy, r.Wait
	}
	install := action.NewInstall(cfg)
	install.Version = ch.Version
	install.PlainHTTP = plain
	install.WaitStrategy, install.Timeout = strategy, timeout
	ref := ch.Name
	if oci {
		ref = strings.TrimRight(ch.Repository, "/") + "/" + ch.Name
	} else {
		install.RepoURL = ch.Repository
	}
	path, err := install.LocateChart(ref, settings)
	if alt := otherSpelling(ch.Version); err != nil && oci && alt != "" {
		// An OCI chart's tag is what its publisher pushed: cert-manager's
		// are v1.21.2, while bootstrap.toml pins 1.21.2 as Helm users do (an
		// HTTP repository's index matches either). Helm takes an exact
		// version as the tag, and its tag listing drops tags with a "v", so
		// the other spelling is tried by name.
		install.Version = alt
		if p, altErr := install.LocateChart(ref, settings); altErr == nil {
			path, err = p, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("fetching chart %s: %w", ch, err)
	}
	loaded, err := loader.Load(path)
	if err != nil {
		return false, fmt.Errorf("loading chart %s: %w", ch, err)
	}
	if existing == nil {
		install.ReleaseName = r.Name
		install.Namespace = r.Namespace
		install.CreateNamespace = true
		if _, err := install.RunWithContext(ctx, loaded, r.Values); err != nil {
			return false, fmt.Errorf("installing release %s (chart %s): %w", name, ch, err)
		}
		return true, nil
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = r.Namespace
	up.WaitStrategy, up.Timeout = strategy, timeout
	if _, err := up.RunWithContext(ctx, r.Name, loaded, r.Values); err != nil {
		return false, fmt.Errorf("upgrading release %s to chart %s: %w", name, ch, err)
	}
	return true, nil
}

// otherSpelling is an exact version with its leading "v" added or removed,
// or "" for anything else (a constraint is Helm's to resolve).
func otherSpelling(pin string) string {
	if _, err := version.ParseSemantic(pin); err != nil {
		return ""
	}
	if strings.HasPrefix(pin, "v") {
		return strings.TrimPrefix(pin, "v")
	}
	return "v" + pin
}

// SameVersion says whether two chart versions name the same release, with or
// without a leading "v": charts such as cert-manager's are published as
// v1.21.2 and pinned by Helm users (and in bootstrap.toml) as 1.21.2, and
// Helm resolves either to the same chart.
func SameVersion(a, b string) bool {
	return a != "" && strings.TrimPrefix(a, "v") == strings.TrimPrefix(b, "v")
}

// Uninstall removes a release and says whether there was one: a release
// that is not there is a success. The SDK's uninstall takes no context;
// r.Wait (default 5 min) bounds it.
func Uninstall(r Release) (bool, error) {
	settings := cli.New()
	settings.KubeConfig, settings.KubeContext = r.Cluster.Path, r.Cluster.Context
	settings.SetNamespace(r.Namespace)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	if err := cfg.Init(settings.RESTClientGetter(), r.Namespace, "secret"); err != nil {
		return false, fmt.Errorf("helm: %w", err)
	}
	if _, err := action.NewGet(cfg).Run(r.Name); errors.Is(err, driver.ErrReleaseNotFound) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading release %s/%s: %w", r.Namespace, r.Name, err)
	}
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	un.Timeout = budget.HelmHooks
	if r.Wait > 0 {
		un.Timeout = r.Wait
	}
	if _, err := un.Run(r.Name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return false, fmt.Errorf("uninstalling release %s/%s: %w", r.Namespace, r.Name, err)
	}
	return true, nil
}

// local is a registry or repository on this machine (the tests', or a local
// mirror), reached over plain HTTP; everything else is reached over TLS.
func local(repo string) bool {
	u, err := url.Parse(repo)
	if err != nil {
		return false
	}
	if u.Scheme == "http" {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
