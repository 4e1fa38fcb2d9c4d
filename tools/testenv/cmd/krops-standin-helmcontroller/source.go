package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var (
	helmChartsGVR      = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmcharts"}
	ociRepositoriesGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}
	configMapsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// artifact is a chart source-controller serves.
type artifact struct {
	source   string // kind/namespace/name, for messages
	url      string
	digest   string // algorithm:hex
	revision string
}

// artifact finds the chart of hr: the artifact of the OCIRepository or
// HelmChart spec.chartRef names, or of the HelmChart made from spec.chart.
func (r *reconciler) artifact(ctx context.Context, hr *unstructured.Unstructured) (artifact, error) {
	if ref, ok, _ := unstructured.NestedStringMap(hr.Object, "spec", "chartRef"); ok {
		ns := ref["namespace"]
		if ns == "" {
			ns = hr.GetNamespace()
		}
		gvr := ociRepositoriesGVR
		switch ref["kind"] {
		case "OCIRepository":
		case "HelmChart":
			gvr = helmChartsGVR
		default:
			return artifact{}, fmt.Errorf("spec.chartRef.kind %q: the stand-in takes OCIRepository or HelmChart", ref["kind"])
		}
		return r.sourceArtifact(ctx, gvr, ref["kind"], ns, ref["name"])
	}
	spec, ok, _ := unstructured.NestedMap(hr.Object, "spec", "chart", "spec")
	if !ok {
		return artifact{}, fmt.Errorf("neither spec.chartRef nor spec.chart is set")
	}
	ns, name, err := r.ensureHelmChart(ctx, hr, spec)
	if err != nil {
		return artifact{}, err
	}
	return r.sourceArtifact(ctx, helmChartsGVR, "HelmChart", ns, name)
}

// ensureHelmChart makes or updates the HelmChart source-controller builds
// spec.chart into, named and labelled as helm-controller names it.
func (r *reconciler) ensureHelmChart(ctx context.Context, hr *unstructured.Unstructured, spec map[string]any) (string, string, error) {
	src, _ := spec["sourceRef"].(map[string]any)
	ns, _ := src["namespace"].(string)
	if ns == "" {
		ns = hr.GetNamespace()
	}
	name := hr.GetNamespace() + "-" + hr.GetName()
	want := map[string]any{
		"chart":     spec["chart"],
		"version":   "*",
		"sourceRef": map[string]any{"kind": src["kind"], "name": src["name"]},
		"interval":  "10m",
	}
	if v, _ := spec["version"].(string); v != "" {
		want["version"] = v
	}
	if iv, _ := spec["interval"].(string); iv != "" {
		want["interval"] = iv
	} else if iv, _, _ := unstructured.NestedString(hr.Object, "spec", "interval"); iv != "" {
		want["interval"] = iv
	}
	for _, k := range []string{"reconcileStrategy", "valuesFiles"} {
		if v, ok := spec[k]; ok {
			want[k] = v
		}
	}
	ri := r.dyn.Resource(helmChartsGVR).Namespace(ns)
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		hc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{
				"helm.toolkit.fluxcd.io/name": hr.GetName(), "helm.toolkit.fluxcd.io/namespace": hr.GetNamespace()}},
			"spec": want}}
		if _, err := ri.Create(ctx, hc, metav1.CreateOptions{}); err != nil {
			return "", "", fmt.Errorf("creating HelmChart %s/%s: %w", ns, name, err)
		}
	case err != nil:
		return "", "", fmt.Errorf("HelmChart %s/%s: %w", ns, name, err)
	default:
		have, _, _ := unstructured.NestedMap(cur.Object, "spec")
		if !subset(want, have) {
			maps.Copy(have, want)
			cur.Object["spec"] = have
			if _, err := ri.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return "", "", fmt.Errorf("updating HelmChart %s/%s: %w", ns, name, err)
			}
		}
	}
	return ns, name, nil
}

// subset: every key of want has the same value in have (the API server
// adds defaults to have).
func subset(want, have map[string]any) bool {
	for k, v := range want {
		a, _ := yaml.Marshal(v)
		b, _ := yaml.Marshal(have[k])
		if !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

// sourceArtifact is the artifact of a source that is Ready at its current
// generation.
func (r *reconciler) sourceArtifact(ctx context.Context, gvr schema.GroupVersionResource, kind, ns, name string) (artifact, error) {
	what := kind + "/" + ns + "/" + name
	o, err := r.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return artifact{}, fmt.Errorf("%s: %w", what, err)
	}
	// Not NestedStringMap: source-controller's artifact also carries size
	// (a number) and metadata (a map), which would make it fail.
	field := func(k string) string {
		v, _, _ := unstructured.NestedString(o.Object, "status", "artifact", k)
		return v
	}
	a := artifact{source: what, url: field("url"), digest: field("digest"), revision: field("revision")}
	if a.url == "" || !readyAt(o) {
		return artifact{}, fmt.Errorf("%s has no artifact ready yet", what)
	}
	return a, nil
}

// download fetches a chart artifact, checks its digest and loads it.
func (r *reconciler) download(ctx context.Context, a artifact) (*chart.Chart, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return nil, fmt.Errorf("artifact of %s: %w", a.source, err)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("downloading the artifact of %s: %w", a.source, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("downloading the artifact of %s from %s: %s", a.source, a.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("downloading the artifact of %s: %w", a.source, err)
	}
	algo, want, _ := strings.Cut(a.digest, ":")
	if algo != "sha256" {
		return nil, fmt.Errorf("artifact of %s: digest %q is not sha256", a.source, a.digest)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != want {
		return nil, fmt.Errorf("artifact of %s: digest mismatch (have sha256:%x, status says %s)", a.source, sum, a.digest)
	}
	loaded, err := loader.LoadArchive(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("loading the chart of %s: %w", a.source, err)
	}
	ch, ok := loaded.(*chart.Chart)
	if !ok {
		return nil, fmt.Errorf("the chart of %s is not a v2 chart", a.source)
	}
	return ch, nil
}

// values composes spec.valuesFrom, in order, under spec.values, as
// helm-controller does.
func (r *reconciler) values(ctx context.Context, hr *unstructured.Unstructured) (map[string]any, error) {
	out := map[string]any{}
	from, _, _ := unstructured.NestedSlice(hr.Object, "spec", "valuesFrom")
	for _, f := range from {
		ref, _ := f.(map[string]any)
		kind, _ := ref["kind"].(string)
		name, _ := ref["name"].(string)
		key, _ := ref["valuesKey"].(string)
		optional, _ := ref["optional"].(bool)
		if key == "" {
			key = "values.yaml"
		}
		if tp, _ := ref["targetPath"].(string); tp != "" {
			return nil, fmt.Errorf("valuesFrom %s/%s: targetPath is not implemented by the stand-in", kind, name)
		}
		gvr := configMapsGVR
		if kind == "Secret" {
			gvr = secretsGVR
		} else if kind != "ConfigMap" {
			return nil, fmt.Errorf("valuesFrom kind %q: not ConfigMap or Secret", kind)
		}
		o, err := r.dyn.Resource(gvr).Namespace(hr.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && optional {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("valuesFrom %s/%s: %w", kind, name, err)
		}
		var data []byte
		if kind == "Secret" {
			var s corev1.Secret
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
				return nil, fmt.Errorf("valuesFrom Secret/%s: %w", name, err)
			}
			data = s.Data[key]
		} else {
			v, _, _ := unstructured.NestedString(o.Object, "data", key)
			data = []byte(v)
		}
		if data == nil {
			if optional {
				continue
			}
			return nil, fmt.Errorf("valuesFrom %s/%s has no key %q", kind, name, key)
		}
		var v map[string]any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("valuesFrom %s/%s key %s: %w", kind, name, key, err)
		}
		out = merge(out, v)
	}
	if inline, ok, _ := unstructured.NestedMap(hr.Object, "spec", "values"); ok {
		out = merge(out, inline)
	}
	return out, nil
}

// merge lays over onto base, maps merged key by key, anything else replaced.
func merge(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}
