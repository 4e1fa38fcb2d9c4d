package validate

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/crds"
)

// substitution matches Flux post-build variables; validation renders them
// with their defaults (or a stand-in value) the way Flux would.
var substitution = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[=-]([^}]*))?\}`)

// Schema starts a real kube-apiserver (KUBEBUILDER_ASSETS) with the pinned
// CRDs and submits every object as a server-side dry run. Kinds the server
// does not know are listed as not schema-checked, never silently passed.
func Schema(ctx context.Context, objects []Object) (Result, error) {
	r := Result{Check: "every object is accepted by kube-apiserver (server-side dry run, pinned CRDs)"}
	var paths []string
	for _, s := range crds.All() {
		files, err := s.Files()
		if err != nil {
			return r, fmt.Errorf("CRDs of %s: %w", s.Name, err)
		}
		paths = append(paths, files...)
	}
	ctrllog.SetLogger(logr.Discard())
	// envtest's own start timeout (20 s for etcd and for kube-apiserver
	// each) is short for a busy laptop or CI runner; a start that is only
	// slow is worth waiting for.
	env := &envtest.Environment{CRDInstallOptions: envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true},
		ControlPlaneStartTimeout: 2 * time.Minute}
	cfg, err := env.Start()
	if err != nil {
		return r, fmt.Errorf("starting kube-apiserver (set KUBEBUILDER_ASSETS, see tools/task.sh testbin): %w", err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return r, err
	}
	unknown := map[string]bool{}
	namespaces := map[string]bool{}
	for _, o := range objects {
		u, err := render(o)
		if err != nil {
			r.Problems = append(r.Problems, Problem{o.String(), err.Error()})
			continue
		}
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" || u.GetName() == "" {
			r.Problems = append(r.Problems, Problem{o.String(), "apiVersion, kind and metadata.name are required"})
			continue
		}
		mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if meta.IsNoMatchError(err) {
			unknown[gvk.Kind+" ("+u.GetAPIVersion()+")"] = true
			continue
		}
		if err != nil {
			r.Problems = append(r.Problems, Problem{o.String(), err.Error()})
			continue
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := u.GetNamespace()
			if ns == "" {
				r.Problems = append(r.Problems, Problem{o.String(), "a namespaced object needs metadata.namespace (Flux applies it wherever the Kustomization says otherwise)"})
				continue
			}
			if !namespaces[ns] {
				namespaces[ns] = true
				if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
					return r, fmt.Errorf("creating namespace %s: %w", ns, err)
				}
			}
		}
		if err := c.Create(ctx, u, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			r.Problems = append(r.Problems, Problem{o.String(), err.Error()})
		}
	}
	var names []string
	for k := range unknown {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		r.Notes = append(r.Notes, "not schema-checked (no CRD at the pinned versions): "+n)
	}
	return r, nil
}

// render substitutes the object's placeholders on its YAML, as Flux does
// on the build's output, so a default reads as the type Flux would give it
// (a boolean, a list), not as the string it is in JSON.
func render(o Object) (*unstructured.Unstructured, error) {
	b, err := yaml.Marshal(o.Raw)
	if err != nil {
		return nil, err
	}
	b = substitution.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := substitution.FindSubmatch(m)
		if len(sub[2]) > 0 || len(m) > len(sub[1])+3 {
			return sub[2]
		}
		return []byte("substituted")
	})
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("after substituting variables: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, fmt.Errorf("after substituting variables: %w", err)
	}
	return u, nil
}
