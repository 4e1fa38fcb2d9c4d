package testenv

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// capiProviderKinds are the Cluster API operator's provider kinds, with the
// prefix clusterctl's inventory gives each type's entries.
var capiProviderKinds = []struct{ kind, prefix string }{
	{"CoreProvider", ""}, {"BootstrapProvider", "bootstrap-"}, {"ControlPlaneProvider", "control-plane-"},
	{"InfrastructureProvider", "infrastructure-"}, {"AddonProvider", "addon-"},
}

// Provider is one Cluster API provider as clusterctl's inventory records
// it: the entry's name (bootstrap-kubeadm), the provider's own name
// (kubeadm), its namespace, type (BootstrapProvider) and version.
type Provider struct {
	Inventory, Name, Namespace, Type, Version string
}

// TreeProviders reads the Cluster API operator's provider objects
// (CoreProvider, InfrastructureProvider, ...) from the YAML files under dir,
// such as mgmt/local-host/capi-providers, with the versions their
// spec.version pins: the inventory the operator writes once it has
// installed them.
func TreeProviders(t testing.TB, dir string) []Provider {
	t.Helper()
	var out []Provider
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if u.GroupVersionKind().Group != "operator.cluster.x-k8s.io" {
				continue
			}
			p, ok := providerOf(u)
			if !ok {
				return fmt.Errorf("%s: %s %s has no spec.version, so the version it installs is not known", path, u.GetKind(), u.GetName())
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the Cluster API providers under %s: %v", dir, err)
	}
	if len(out) == 0 {
		t.Fatalf("no Cluster API provider objects under %s", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Inventory < out[j].Inventory })
	return out
}

// providerOf is the inventory entry the operator writes for provider
// object u; false when u pins no version.
func providerOf(u *unstructured.Unstructured) (Provider, bool) {
	v, _, _ := unstructured.NestedString(u.Object, "spec", "version")
	for _, pk := range capiProviderKinds {
		if pk.kind == u.GetKind() {
			return Provider{Inventory: pk.prefix + u.GetName(), Name: u.GetName(), Namespace: u.GetNamespace(), Type: pk.kind, Version: v}, v != ""
		}
	}
	return Provider{}, false
}

// StandInCAPIOperator is a STAND-IN for the Cluster API operator, which
// runs providers as pods and cannot run here: until ctx ends, every
// provider object on c (CoreProvider, InfrastructureProvider, ...) that
// pins a spec.version gets status.installedVersion and then Ready, as the
// operator records once the provider's controllers run. Like the operator,
// it writes no clusterctl inventory. A provider object without a version is
// left alone (the operator would pick one the stand-in cannot know).
func StandInCAPIOperator(ctx context.Context, c *Cluster) {
	for ctx.Err() == nil {
		for _, pk := range capiProviderKinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Kind: pk.kind + "List"})
			if err := c.Client.List(ctx, list); err != nil {
				continue
			}
			for i := range list.Items {
				u := &list.Items[i]
				p, ok := providerOf(u)
				if !ok {
					continue
				}
				if v, _, _ := unstructured.NestedString(u.Object, "status", "installedVersion"); v == p.Version {
					if st, _, _ := Condition(u, "Ready"); st == "True" {
						continue
					}
				}
				markInstalled(u, p.Version)
				_ = c.Client.Status().Update(ctx, u)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// markInstalled sets what the operator's status holds once it installed
// version v: the installed version and Ready.
func markInstalled(u *unstructured.Unstructured, v string) {
	_ = unstructured.SetNestedField(u.Object, v, "status", "installedVersion")
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "StandIn",
		"message": "stand-in operator", "observedGeneration": u.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
}

// CreateOperatorProvider writes p as the Cluster API operator leaves it
// once installed: its provider object (and namespace) with spec.version
// and status.installedVersion at p.Version, Ready. An existing object is
// kept.
func CreateOperatorProvider(ctx context.Context, c *Cluster, p Provider) error {
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operator.cluster.x-k8s.io/v1alpha2", "kind": p.Type,
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
		"spec":     map[string]any{"version": p.Version},
	}}
	if err := c.Client.Create(ctx, u); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("%s %s/%s: %w", p.Type, p.Namespace, p.Name, err)
	}
	markInstalled(u, p.Version)
	if err := c.Client.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("%s %s/%s status: %w", p.Type, p.Namespace, p.Name, err)
	}
	return nil
}
