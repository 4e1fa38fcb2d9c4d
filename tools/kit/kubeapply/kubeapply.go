// Package kubeapply server-side applies multi-document YAML with one field
// manager, the way `kubectl apply --server-side --force-conflicts` does, on
// a cluster given by its client configuration. Kinds are mapped to
// resources through the server's discovery, re-read when a kind is new (a
// CRD applied a moment ago).
package kubeapply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Applier applies objects to one cluster.
type Applier struct {
	dyn     dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	manager string
}

// New builds an Applier whose writes are owned by fieldManager.
func New(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), manager: fieldManager}, nil
}

// Decode splits a YAML stream into objects; empty documents are skipped.
func Decode(data []byte, source string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d is not YAML: %w", source, i, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", source, i)
		}
		out = append(out, u)
	}
}

// Apply server-side applies every object in order and returns what it
// applied, as "Kind namespace/name".
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured) ([]string, error) {
	var done []string
	for _, u := range objs {
		ri, err := a.resource(u)
		if err != nil {
			return done, err
		}
		body, err := u.MarshalJSON()
		if err != nil {
			return done, err
		}
		force := true
		if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: a.manager, Force: &force}); err != nil {
			return done, fmt.Errorf("applying %s: %w", Describe(u), err)
		}
		done = append(done, Describe(u))
	}
	return done, nil
}

// Exists says whether the object named by resource ("plural.group", or a
// core "plural"), namespace (ignored for cluster-scoped kinds) and name is
// on the server.
func (a *Applier) Exists(ctx context.Context, resource, namespace, name string) (bool, error) {
	gvr, gr := schema.ParseResourceArg(resource)
	var full schema.GroupVersionResource
	var err error
	if gvr != nil {
		full, err = a.mapper.ResourceFor(*gvr)
	}
	if gvr == nil || err != nil {
		full, err = a.mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return false, fmt.Errorf("the server does not serve %s: %w", resource, err)
	}
	gvk, err := a.mapper.KindFor(full)
	if err != nil {
		return false, err
	}
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	ri := dynamic.ResourceInterface(a.dyn.Resource(full))
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(full).Namespace(namespace)
	}
	_, err = ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %s %s: %w", resource, name, err)
}

// Describe names an object the way messages do.
func Describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

func (a *Applier) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset() // a CRD applied since the last discovery
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the server does not serve %s: %w", Describe(u), gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
			u.SetNamespace(ns)
		}
		return a.dyn.Resource(m.Resource).Namespace(ns), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// ApplySensitive is Apply for objects that may hold secrets (decrypted
// manifests, a provider's credentials): an error names the object and the
// API server's reason only, never its message, which can quote the object.
func (a *Applier) ApplySensitive(ctx context.Context, objs []*unstructured.Unstructured) ([]string, error) {
	done, err := a.Apply(ctx, objs)
	if err == nil {
		return done, nil
	}
	what := "an object"
	if len(done) < len(objs) {
		what = Describe(objs[len(done)])
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return done, fmt.Errorf("applying %s: %s (%d; the message is not shown, it may quote the object)", what, se.ErrStatus.Reason, se.ErrStatus.Code)
	}
	return done, err
}
