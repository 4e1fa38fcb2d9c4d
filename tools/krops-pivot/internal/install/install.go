// Package install puts what the move needs on the management cluster:
// cert-manager and the Cluster API operator (Helm, at the [charts] pins),
// the environment's provider manifests, its pivot manifests with variables
// substituted from kind, its SOPS-encrypted secrets decrypted in memory,
// and the provider plugin's own manifests.
package install

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kropsdev/krops/tools/kit/helmrelease"
	"github.com/kropsdev/krops/tools/kit/kubeapply"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
)

// Default chart repositories (classic Helm repositories).
const (
	CertManagerRepository  = "https://charts.jetstack.io"
	CAPIOperatorRepository = "https://kubernetes-sigs.github.io/cluster-api-operator"
)

// OperatorGroup is the API group of the CAPI operator's provider kinds.
const OperatorGroup = "operator.cluster.x-k8s.io"

// File is a manifest and where it came from.
type File struct {
	Path string
	Data []byte
}

// Options describe one install.
type Options struct {
	CertManager, CAPIOperator helmrelease.Chart
	// Wait bounds each chart's readiness wait.
	Wait time.Duration
	// ProviderManifests are applied in order; their operator provider
	// objects are what the pivot waits for.
	ProviderManifests []File
	// PivotManifests are applied after them, already substituted
	// (Substitute, at preflight, so an unset variable changes nothing).
	PivotManifests []File
	// Secrets are decrypted manifests (pivot-sops-secrets), never on disk.
	Secrets []File
	// Extra are the provider plugin's manifests.
	Extra [][]byte
	// Infof reports what was done.
	Infof func(format string, args ...any)
}

// Run installs on target and returns the operator provider objects to wait
// for.
func Run(ctx context.Context, target kubecfg.Ref, o Options) ([]kubewait.Target, error) {
	if o.Infof == nil {
		o.Infof = func(string, ...any) {}
	}
	for _, c := range []struct {
		chart       helmrelease.Chart
		release, ns string
		values      map[string]any
	}{
		{o.CertManager, "cert-manager", "cert-manager", map[string]any{"crds": map[string]any{"enabled": true}}},
		// cert-manager is installed just above, not as the chart's dependency.
		{o.CAPIOperator, "capi-operator", "capi-operator-system", map[string]any{"cert-manager": map[string]any{"enabled": false}}},
	} {
		changed, err := helmrelease.Ensure(ctx, c.chart, helmrelease.Release{Cluster: target,
			Name: c.release, Namespace: c.ns, Values: c.values, Wait: o.Wait})
		if err != nil {
			return nil, err
		}
		if changed {
			o.Infof("release %s/%s: chart %s %s", c.ns, c.release, c.chart.Name, c.chart.Version)
		} else {
			o.Infof("release %s/%s is already at %s: unchanged", c.ns, c.release, c.chart.Version)
		}
	}
	cfg, err := target.RESTConfig()
	if err != nil {
		return nil, err
	}
	ap, err := kubeapply.New(cfg, "krops")
	if err != nil {
		return nil, err
	}
	var waits []kubewait.Target
	apply := func(what string, data []byte, source string) error {
		objs, err := kubeapply.Decode(data, source)
		if err != nil {
			return err
		}
		done, err := ap.Apply(ctx, objs)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, source, err)
		}
		o.Infof("%s %s: %d objects", what, source, len(done))
		waits = append(waits, providerTargets(objs)...)
		return nil
	}
	// The provider's manifests first: they may be what its controllers
	// read (credentials), which the provider manifests below make them
	// look for. Named, never shown.
	for i, m := range o.Extra {
		objs, err := kubeapply.Decode(m, "")
		if err != nil {
			return nil, fmt.Errorf("the provider plugin's manifest #%d is not valid YAML for Kubernetes objects (content not shown)", i+1)
		}
		done, err := ap.ApplySensitive(ctx, objs)
		if err != nil {
			return nil, fmt.Errorf("the provider plugin's manifest #%d: %w", i+1, err)
		}
		o.Infof("provider plugin manifest #%d: %s", i+1, strings.Join(done, ", "))
		waits = append(waits, providerTargets(objs)...)
	}
	for _, f := range o.ProviderManifests {
		if err := apply("provider manifest", f.Data, f.Path); err != nil {
			return nil, err
		}
	}
	for _, f := range o.PivotManifests {
		if err := apply("pivot manifest", f.Data, f.Path); err != nil {
			return nil, err
		}
	}
	for _, f := range o.Secrets {
		objs, err := kubeapply.Decode(f.Data, f.Path)
		if err != nil {
			// The decoder's message may quote the decrypted document.
			return nil, fmt.Errorf("pivot secret %s decrypts to something that is not YAML for Kubernetes objects (content not shown)", f.Path)
		}
		// The decrypted values are never printed: only the count.
		if _, err := ap.ApplySensitive(ctx, objs); err != nil {
			return nil, fmt.Errorf("pivot secret %s: %w", f.Path, err)
		}
		o.Infof("pivot secret %s: %d objects", f.Path, len(objs))
	}
	return waits, nil
}

// providerTargets are the CAPI operator's provider objects among objs.
func providerTargets(objs []*unstructured.Unstructured) []kubewait.Target {
	var out []kubewait.Target
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if gvk.Group != OperatorGroup || !strings.HasSuffix(gvk.Kind, "Provider") {
			continue
		}
		out = append(out, kubewait.Target{
			Resource: schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"},
			Kind:     gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName(),
		})
	}
	return out
}

var variable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:=([^}]*))?\}`)

// Substitute replaces ${VAR} and ${VAR:=default} in data. A ${VAR} with no
// value and no default fails, naming every such variable.
func Substitute(data []byte, vars map[string]string, source string) ([]byte, error) {
	missing := map[string]bool{}
	out := variable.ReplaceAllFunc(data, func(m []byte) []byte {
		g := variable.FindSubmatch(m)
		name := string(g[1])
		if v, ok := vars[name]; ok {
			return []byte(v)
		}
		if len(g[2]) > 0 {
			return g[3]
		}
		missing[name] = true
		return m
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, "${"+n+"}")
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%s: %s not set: define it in a ConfigMap in the Flux namespace on kind or in pivot-manifest-vars, or give it a default (${NAME:=value})", source, strings.Join(names, ", "))
	}
	return out, nil
}

// Vars builds the substitution map: the data of every ConfigMap in the
// Flux namespace on kind, in name order (a later ConfigMap wins), then
// pivot-manifest-vars over them.
func Vars(configMaps map[string]map[string]string, overlay map[string]string) map[string]string {
	names := make([]string, 0, len(configMaps))
	for n := range configMaps {
		names = append(names, n)
	}
	sort.Strings(names)
	out := map[string]string{}
	for _, n := range names {
		for k, v := range configMaps[n] {
			out[k] = v
		}
	}
	for k, v := range overlay {
		out[k] = v
	}
	return out
}

// ReadFiles reads manifests named relative to root.
func ReadFiles(paths []string, resolve func(string) (string, error)) ([]File, error) {
	var out []File
	for _, p := range paths {
		full, err := resolve(p)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		out = append(out, File{Path: p, Data: b})
	}
	return out, nil
}
