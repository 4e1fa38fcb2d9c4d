package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var helmReleasesGVR = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}

// finalizer is helm-controller's: it keeps a HelmRelease until its release
// is uninstalled.
const finalizer = "finalizers.fluxcd.io"

// maxHistory is how many snapshots status.history keeps, and how many
// release revisions Helm keeps (spec.maxHistory's default).
const maxHistory = 5

type reconciler struct {
	dyn dynamic.Interface
	// kubeconfig is the file Helm reaches the cluster through; empty means
	// the in-cluster configuration (the pod's service account).
	kubeconfig string
	logger     *log.Logger
	http       *http.Client
	// retryAfter is how long a release whose last attempt failed waits
	// before the next one; a changed spec, chart or values is tried at once.
	retryAfter time.Duration
	failedAt   map[string]time.Time
}

func newReconciler(dyn dynamic.Interface, kubeconfig string, logger *log.Logger) *reconciler {
	return &reconciler{dyn: dyn, kubeconfig: kubeconfig, logger: logger,
		http: &http.Client{Timeout: 2 * time.Minute}, retryAfter: 30 * time.Second, failedAt: map[string]time.Time{}}
}

// pass reconciles every HelmRelease once.
func (r *reconciler) pass(ctx context.Context) error {
	list, err := r.dyn.Resource(helmReleasesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list helmreleases: %w", err)
	}
	for i := range list.Items {
		hr := &list.Items[i]
		if err := r.reconcile(ctx, hr); err != nil && ctx.Err() == nil {
			r.logger.Printf("helmrelease %s/%s: %v", hr.GetNamespace(), hr.GetName(), err)
		}
	}
	return nil
}

// release is where a HelmRelease's Helm release lives, with Flux's defaults.
type release struct {
	name, namespace, storage string
	// kubeconfig is the file of spec.kubeConfig's cluster, when the
	// release goes to another cluster than this one.
	kubeconfig string
}

func releaseOf(hr *unstructured.Unstructured) release {
	rel := release{name: hr.GetName(), namespace: hr.GetNamespace(), storage: hr.GetNamespace()}
	if t, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace"); t != "" {
		rel.namespace = t
		rel.name = t + "-" + hr.GetName()
	}
	if n, _, _ := unstructured.NestedString(hr.Object, "spec", "releaseName"); n != "" {
		rel.name = n
	}
	if s, _, _ := unstructured.NestedString(hr.Object, "spec", "storageNamespace"); s != "" {
		rel.storage = s
	}
	return rel
}

func (rel release) String() string { return rel.namespace + "/" + rel.name }

func (r *reconciler) reconcile(ctx context.Context, hr *unstructured.Unstructured) error {
	ri := r.dyn.Resource(helmReleasesGVR).Namespace(hr.GetNamespace())
	key := hr.GetNamespace() + "/" + hr.GetName()
	if hr.GetDeletionTimestamp() != nil {
		if !slices.Contains(hr.GetFinalizers(), finalizer) {
			return nil
		}
		if err := r.finalize(ctx, hr); err != nil {
			return err
		}
		hr.SetFinalizers(slices.DeleteFunc(hr.GetFinalizers(), func(f string) bool { return f == finalizer }))
		if _, err := ri.Update(ctx, hr, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizer: %w", err)
		}
		delete(r.failedAt, key)
		return nil
	}
	if !slices.Contains(hr.GetFinalizers(), finalizer) {
		hr.SetFinalizers(append(hr.GetFinalizers(), finalizer))
		updated, err := ri.Update(ctx, hr, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("adding finalizer: %w", err)
		}
		hr = updated
	}
	if suspended, _, _ := unstructured.NestedBool(hr.Object, "spec", "suspend"); suspended {
		return nil
	}
	st := newStatus(hr)
	if msg, err := r.dependenciesReady(ctx, hr); err != nil || msg != "" {
		if err != nil {
			return err
		}
		st.set("Ready", "False", "DependencyNotReady", msg)
		return st.write(ctx, ri)
	}
	art, err := r.artifact(ctx, hr)
	if err != nil {
		st.set("Ready", "False", "ArtifactFailed", err.Error())
		return st.write(ctx, ri)
	}
	values, err := r.values(ctx, hr)
	if err != nil {
		st.set("Ready", "False", "InitFailed", err.Error())
		return st.write(ctx, ri)
	}
	cfgDigest, err := digestOf(values)
	if err != nil {
		return err
	}
	if st.attempted(art.revision, cfgDigest) {
		if st.ready() {
			return nil
		}
		if t, ok := r.failedAt[key]; ok && time.Since(t) < r.retryAfter {
			return nil
		}
	}
	st.attempt(art.revision, cfgDigest)
	st.set("Ready", "Unknown", "Progressing", "Fulfilling prerequisites")
	if err := st.write(ctx, ri); err != nil {
		return err
	}
	ch, err := r.download(ctx, art)
	if err != nil {
		st.set("Ready", "False", "ArtifactFailed", err.Error())
		r.failedAt[key] = time.Now()
		return st.write(ctx, ri)
	}
	rel := releaseOf(hr)
	cleanup, err := r.remote(ctx, hr, &rel)
	if err != nil {
		r.failedAt[key] = time.Now()
		st.set("Ready", "False", "InitFailed", err.Error())
		return st.write(ctx, ri)
	}
	defer cleanup()
	done, err := r.ensure(ctx, hr, rel, ch, values)
	if err != nil {
		r.failedAt[key] = time.Now()
		st.set("Released", "False", done.reason+"Failed", err.Error())
		st.set("Ready", "False", done.reason+"Failed", err.Error())
		r.logger.Printf("helmrelease %s: %s of %s failed: %v", key, done.reason, rel, err)
		return st.write(ctx, ri)
	}
	delete(r.failedAt, key)
	msg := fmt.Sprintf("Helm %s succeeded for release %s.v%d with chart %s@%s", done.verb(), rel, done.version, done.chart, done.chartVersion)
	st.set("Released", "True", done.reason+"Succeeded", msg)
	st.set("Ready", "True", done.reason+"Succeeded", msg)
	st.record(rel, done, cfgDigest)
	r.logger.Printf("helmrelease %s: %s", key, msg)
	return st.write(ctx, ri)
}

// remote points rel at the cluster spec.kubeConfig.secretRef names (a
// Secret in the HelmRelease's namespace; key "value", else "value.yaml",
// as helm-controller reads it): the kubeconfig goes to a private
// temporary file for Helm, removed by the returned cleanup.
func (r *reconciler) remote(ctx context.Context, hr *unstructured.Unstructured, rel *release) (func(), error) {
	name, _, _ := unstructured.NestedString(hr.Object, "spec", "kubeConfig", "secretRef", "name")
	if name == "" {
		return func() {}, nil
	}
	key, _, _ := unstructured.NestedString(hr.Object, "spec", "kubeConfig", "secretRef", "key")
	sec, err := r.dyn.Resource(secretsGVR).Namespace(hr.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s: %w", hr.GetNamespace(), name, err)
	}
	data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
	var enc string
	for _, k := range []string{key, "value", "value.yaml"} {
		if k != "" && data[k] != "" {
			enc = data[k]
			break
		}
	}
	if enc == "" {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s has no key %q, value or value.yaml", hr.GetNamespace(), name, key)
	}
	kc, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s: %w", hr.GetNamespace(), name, err)
	}
	f, err := os.CreateTemp("", "kubeconfig-*")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.Remove(f.Name()) }
	_, err = f.Write(kc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	rel.kubeconfig = f.Name()
	return cleanup, nil
}

// dependenciesReady says which dependency (spec.dependsOn) is not Ready
// at its current generation yet, or "" when all are.
func (r *reconciler) dependenciesReady(ctx context.Context, hr *unstructured.Unstructured) (string, error) {
	deps, _, _ := unstructured.NestedSlice(hr.Object, "spec", "dependsOn")
	for _, d := range deps {
		m, _ := d.(map[string]any)
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		if ns == "" {
			ns = hr.GetNamespace()
		}
		dep, err := r.dyn.Resource(helmReleasesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("dependency '%s/%s' is not found", ns, name), nil
		}
		if err != nil {
			return "", fmt.Errorf("dependency %s/%s: %w", ns, name, err)
		}
		if !readyAt(dep) {
			return fmt.Sprintf("dependency '%s/%s' is not ready", ns, name), nil
		}
	}
	return "", nil
}

// readyAt: the object's Ready condition is True for its current generation.
func readyAt(o *unstructured.Unstructured) bool {
	observed, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
	if observed != o.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// digestOf is the sha256 of v's JSON, whose map keys encoding/json sorts:
// equal values give equal digests.
func digestOf(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// status is a HelmRelease's status being rewritten.
type status struct {
	hr  *unstructured.Unstructured
	obj map[string]any
}

func newStatus(hr *unstructured.Unstructured) *status {
	obj, _, _ := unstructured.NestedMap(hr.Object, "status")
	if obj == nil {
		obj = map[string]any{}
	}
	return &status{hr: hr, obj: obj}
}

func (s *status) attempted(revision, cfgDigest string) bool {
	gen, _, _ := unstructured.NestedInt64(s.obj, "lastAttemptedGeneration")
	rev, _, _ := unstructured.NestedString(s.obj, "lastAttemptedRevision")
	cfg, _, _ := unstructured.NestedString(s.obj, "lastAttemptedConfigDigest")
	return gen == s.hr.GetGeneration() && rev == revision && cfg == cfgDigest
}

func (s *status) attempt(revision, cfgDigest string) {
	s.obj["lastAttemptedGeneration"] = s.hr.GetGeneration()
	s.obj["lastAttemptedRevision"] = revision
	s.obj["lastAttemptedConfigDigest"] = cfgDigest
}

func (s *status) ready() bool {
	conds, _, _ := unstructured.NestedSlice(s.obj, "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// set writes condition typ, keeping its transition time when its status
// does not change.
func (s *status) set(typ, st, reason, msg string) {
	conds, _, _ := unstructured.NestedSlice(s.obj, "conditions")
	now := time.Now().UTC().Format(time.RFC3339)
	c := map[string]any{"type": typ, "status": st, "reason": reason, "message": msg,
		"lastTransitionTime": now, "observedGeneration": s.hr.GetGeneration()}
	for i, old := range conds {
		m, _ := old.(map[string]any)
		if m["type"] != typ {
			continue
		}
		if m["status"] == st {
			c["lastTransitionTime"] = m["lastTransitionTime"]
		}
		conds[i] = c
		s.obj["conditions"] = conds
		return
	}
	s.obj["conditions"] = append(conds, c)
}

// record puts the release just made at the head of status.history.
func (s *status) record(rel release, done outcome, cfgDigest string) {
	now := time.Now().UTC().Format(time.RFC3339)
	snap := map[string]any{"name": rel.name, "namespace": rel.namespace, "version": int64(done.version),
		"chartName": done.chart, "chartVersion": done.chartVersion, "appVersion": done.appVersion,
		"configDigest": cfgDigest, "status": "deployed", "firstDeployed": done.firstDeployed.UTC().Format(time.RFC3339),
		"lastDeployed": now}
	d, _ := digestOf([]any{rel.name, rel.namespace, done.version, done.chart, done.chartVersion, cfgDigest})
	snap["digest"] = d
	hist, _, _ := unstructured.NestedSlice(s.obj, "history")
	for _, h := range hist {
		if m, _ := h.(map[string]any); m["status"] == "deployed" {
			m["status"] = "superseded"
		}
	}
	hist = append([]any{snap}, hist...)
	if len(hist) > maxHistory {
		hist = hist[:maxHistory]
	}
	s.obj["history"] = hist
}

func (s *status) write(ctx context.Context, ri dynamic.ResourceInterface) error {
	s.obj["observedGeneration"] = s.hr.GetGeneration()
	if err := unstructured.SetNestedMap(s.hr.Object, s.obj, "status"); err != nil {
		return err
	}
	updated, err := ri.UpdateStatus(ctx, s.hr, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			return errors.New("status changed under us; next pass")
		}
		return fmt.Errorf("writing status: %w", err)
	}
	s.hr = updated
	return nil
}
