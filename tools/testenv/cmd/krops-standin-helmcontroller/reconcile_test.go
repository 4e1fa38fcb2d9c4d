package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/testenv"
)

// chartServer plays source-controller's artifact server: it serves chart
// archives by path.
type chartServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

func newChartServer(t *testing.T) *chartServer {
	s := &chartServer{files: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		b, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// put packages a chart named name at version whose one template is a
// ConfigMap carrying .Values.greeting and a CRD in crds/, and serves it.
func (s *chartServer) put(t *testing.T, name, version string) (url, digest string) {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version, AppVersion: version},
		Values:   map[string]any{"greeting": "default", "extra": map[string]any{"a": "chart"}},
		// Save writes values.yaml from Raw.
		Raw: []*common.File{{Name: chartutil.ValuesfileName, Data: []byte("greeting: default\nextra:\n  a: chart\n")}},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-greeting\n" +
				"data:\n  greeting: {{ .Values.greeting | quote }}\n  a: {{ .Values.extra.a | quote }}\n  b: {{ .Values.extra.b | default \"\" | quote }}\n")}},
		Files: []*common.File{{Name: "crds/widgets.yaml", Data: []byte(widgetCRD(version))}},
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := "/ocirepository/" + name + "/" + filepath.Base(path)
	s.mu.Lock()
	s.files[p] = b
	s.mu.Unlock()
	return s.URL + p, fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// widgetCRD is a CRD whose description carries the chart version, so a
// replaced CRD can be told from the one first created.
func widgetCRD(version string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.krops.dev
spec:
  group: example.krops.dev
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: "chart ` + version + `"
        x-kubernetes-preserve-unknown-fields: true
`
}

type harness struct {
	t   *testing.T
	dyn dynamic.Interface
	r   *reconciler
	log *strings.Builder
}

func newHarness(t *testing.T) *harness {
	c := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxSource, testenv.FluxHelm}})
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := newReconciler(dyn, c.Kubeconfig, log.New(&syncWriter{w: &out}, "", 0))
	r.retryAfter = time.Hour // the test drives retries itself
	h := &harness{t: t, dyn: dyn, r: r, log: &out}
	for _, ns := range []string{"apps", "flux-system"} {
		h.create(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	}
	return h
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (h *harness) create(gvr schema.GroupVersionResource, ns string, obj map[string]any) *unstructured.Unstructured {
	h.t.Helper()
	o, err := h.dyn.Resource(gvr).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("creating %s %s/%v: %v", gvr.Resource, ns, obj["metadata"], err)
	}
	return o
}

func (h *harness) get(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return h.dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// publish plays source-controller: the source's artifact is url at digest,
// and the source is Ready at its generation.
func (h *harness) publish(gvr schema.GroupVersionResource, ns, name, url, digest, revision string) {
	h.t.Helper()
	o, err := h.get(gvr, ns, name)
	if err != nil {
		h.t.Fatal(err)
	}
	o.Object["status"] = map[string]any{
		"observedGeneration": o.GetGeneration(),
		// As source-controller writes it: size and metadata are not strings.
		"artifact": map[string]any{"url": url, "digest": digest, "revision": revision, "size": int64(15172),
			"metadata": map[string]any{"org.opencontainers.image.version": revision},
			"path":     strings.TrimPrefix(url, "http://"), "lastUpdateTime": time.Now().UTC().Format(time.RFC3339)},
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded",
			"message": "stored artifact", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}
	if _, err := h.dyn.Resource(gvr).Namespace(ns).UpdateStatus(context.Background(), o, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("publishing the artifact of %s/%s: %v", ns, name, err)
	}
}

// pass runs one reconcile pass and returns the HelmRelease after it.
func (h *harness) pass(ns, name string) *unstructured.Unstructured {
	h.t.Helper()
	if err := h.r.pass(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	hr, err := h.get(helmReleasesGVR, ns, name)
	if err != nil {
		h.t.Fatalf("helmrelease %s/%s: %v", ns, name, err)
	}
	return hr
}

func condition(o *unstructured.Unstructured, typ string) (status, reason, msg string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", ""
}

func (h *harness) configMap(ns, name string) map[string]string {
	h.t.Helper()
	cm, err := h.get(configMapsGVR, ns, name)
	if err != nil {
		h.t.Fatalf("ConfigMap %s/%s: %v", ns, name, err)
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	return data
}

func helmRelease(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": name, "namespace": "apps"}, "spec": spec}
}

// TestReleaseFollowsItsSourceAndValuesAndGoesWithIt drives a HelmRelease
// with a chartRef through install, a no-op pass, an upgrade on new values
// and a new chart, and deletion, against a real API server, checking what
// Helm made in the cluster rather than the stand-in's own account of it.
func TestReleaseFollowsItsSourceAndValuesAndGoesWithIt(t *testing.T) {
	h := newHarness(t)
	charts := newChartServer(t)
	url, digest := charts.put(t, "demo", "1.0.0")
	h.create(ociRepositoriesGVR, "apps", map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
		"metadata": map[string]any{"name": "demo", "namespace": "apps"},
		"spec":     map[string]any{"url": "oci://registry.example/charts/demo", "interval": "1h", "ref": map[string]any{"tag": "1.0.0"}}})
	h.create(configMapsGVR, "apps", map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "demo-values", "namespace": "apps"},
		"data":     map[string]any{"values.yaml": "greeting: from-configmap\nextra:\n  b: from-configmap\n"}})
	h.create(helmReleasesGVR, "apps", helmRelease("demo", map[string]any{
		"interval": "10m", "targetNamespace": "demo-target", "install": map[string]any{"createNamespace": true},
		"upgrade":  map[string]any{"crds": "CreateReplace"},
		"chartRef": map[string]any{"kind": "OCIRepository", "name": "demo"},
		"valuesFrom": []any{map[string]any{"kind": "ConfigMap", "name": "demo-values"},
			map[string]any{"kind": "Secret", "name": "absent", "optional": true}},
		"values": map[string]any{"greeting": "inline"},
	}))

	hr := h.pass("apps", "demo")
	if st, reason, _ := condition(hr, "Ready"); st != "False" || reason != "ArtifactFailed" {
		t.Fatalf("before the source has an artifact: Ready %s %s, want False ArtifactFailed", st, reason)
	}
	if _, err := h.get(configMapsGVR, "demo-target", "demo-target-demo-greeting"); !apierrors.IsNotFound(err) {
		t.Fatalf("something was installed without an artifact: %v", err)
	}

	// A wrong digest is refused: nothing is installed from an artifact that
	// is not the one the source recorded.
	h.publish(ociRepositoriesGVR, "apps", "demo", url, "sha256:"+strings.Repeat("0", 64), "1.0.0@sha256:0")
	hr = h.pass("apps", "demo")
	if st, reason, msg := condition(hr, "Ready"); st != "False" || reason != "ArtifactFailed" || !strings.Contains(msg, "digest mismatch") {
		t.Fatalf("with a wrong digest: Ready %s %s %q", st, reason, msg)
	}

	h.publish(ociRepositoriesGVR, "apps", "demo", url, digest, "1.0.0@"+digest)
	hr = h.pass("apps", "demo")
	if st, reason, msg := condition(hr, "Ready"); st != "True" || reason != "InstallSucceeded" {
		t.Fatalf("after install: Ready %s %s %q\n%s", st, reason, msg, h.log)
	}
	// Flux's names: <targetNamespace>-<name> in the target namespace.
	if got := h.configMap("demo-target", "demo-target-demo-greeting"); got["greeting"] != "inline" || got["a"] != "chart" || got["b"] != "from-configmap" {
		t.Fatalf("installed values %v: want greeting from spec.values, a from the chart, b from valuesFrom", got)
	}
	if _, err := h.get(crdsGVR, "", "widgets.example.krops.dev"); err != nil {
		t.Fatalf("the chart's crds/ were not installed: %v", err)
	}
	if !slices.Contains(hr.GetFinalizers(), finalizer) {
		t.Fatalf("finalizers %v lack %s", hr.GetFinalizers(), finalizer)
	}
	hist, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
	if len(hist) != 1 || hist[0].(map[string]any)["chartVersion"] != "1.0.0" || fmt.Sprint(hist[0].(map[string]any)["version"]) != "1" {
		t.Fatalf("history after install: %v", hist)
	}

	// Nothing changed: the pass writes nothing.
	rv := hr.GetResourceVersion()
	if hr = h.pass("apps", "demo"); hr.GetResourceVersion() != rv {
		t.Fatalf("a pass with nothing changed rewrote the HelmRelease (resourceVersion %s -> %s)", rv, hr.GetResourceVersion())
	}

	// A new chart revision upgrades, and CreateReplace replaces the CRD.
	url2, digest2 := charts.put(t, "demo", "1.1.0")
	h.publish(ociRepositoriesGVR, "apps", "demo", url2, digest2, "1.1.0@"+digest2)
	hr = h.pass("apps", "demo")
	if st, reason, msg := condition(hr, "Ready"); st != "True" || reason != "UpgradeSucceeded" || !strings.Contains(msg, "demo@1.1.0") {
		t.Fatalf("after a new chart: Ready %s %s %q\n%s", st, reason, msg, h.log)
	}
	crd, err := h.get(crdsGVR, "", "widgets.example.krops.dev")
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions"); !strings.Contains(fmt.Sprint(d), "chart 1.1.0") {
		t.Fatalf("CreateReplace left the CRD at %v", d)
	}

	// Changed values upgrade too.
	h.updateSpec("apps", "demo", func(spec map[string]any) { spec["values"] = map[string]any{"greeting": "changed"} })
	hr = h.pass("apps", "demo")
	if st, reason, _ := condition(hr, "Ready"); st != "True" || reason != "UpgradeSucceeded" {
		t.Fatalf("after new values: Ready %s %s", st, reason)
	}
	if got := h.configMap("demo-target", "demo-target-demo-greeting"); got["greeting"] != "changed" {
		t.Fatalf("upgraded values %v", got)
	}
	hist, _, _ = unstructured.NestedSlice(hr.Object, "status", "history")
	if len(hist) != 3 || fmt.Sprint(hist[0].(map[string]any)["version"]) != "3" || hist[1].(map[string]any)["status"] != "superseded" {
		t.Fatalf("history after two upgrades: %v", hist)
	}
	if og, _, _ := unstructured.NestedInt64(hr.Object, "status", "observedGeneration"); og != hr.GetGeneration() {
		t.Fatalf("observedGeneration %d, generation %d", og, hr.GetGeneration())
	}

	// Deleting the HelmRelease uninstalls the release, then lets it go.
	if err := h.dyn.Resource(helmReleasesGVR).Namespace("apps").Delete(context.Background(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.r.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.get(helmReleasesGVR, "apps", "demo"); !apierrors.IsNotFound(err) {
		t.Fatalf("the HelmRelease outlived its finalizer: %v\n%s", err, h.log)
	}
	if _, err := h.get(configMapsGVR, "demo-target", "demo-target-demo-greeting"); !apierrors.IsNotFound(err) {
		t.Fatalf("the release's ConfigMap outlived the HelmRelease: %v", err)
	}
	if secrets, err := h.dyn.Resource(secretsGVR).Namespace("apps").List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"}); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("Helm's release records remain in the storage namespace: %v %v", secrets, err)
	}
}

// TestChartFromARepositoryWaitsForItsDependency: spec.chart becomes the
// HelmChart helm-controller would make, the release waits for dependsOn, and
// deleting the HelmRelease deletes that HelmChart.
func TestChartFromARepositoryWaitsForItsDependency(t *testing.T) {
	h := newHarness(t)
	charts := newChartServer(t)
	h.create(helmReleasesGVR, "apps", helmRelease("first", map[string]any{"interval": "10m", "suspend": true,
		"chartRef": map[string]any{"kind": "OCIRepository", "name": "never"}}))
	h.create(helmReleasesGVR, "apps", helmRelease("cert", map[string]any{
		"interval":  "30m",
		"dependsOn": []any{map[string]any{"name": "first"}},
		"chart": map[string]any{"spec": map[string]any{"chart": "cert", "version": "1.2.3",
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": "jetstack", "namespace": "flux-system"}}},
	}))
	hr := h.pass("apps", "cert")
	if st, reason, msg := condition(hr, "Ready"); st != "False" || reason != "DependencyNotReady" || !strings.Contains(msg, "apps/first") {
		t.Fatalf("with its dependency not ready: Ready %s %s %q", st, reason, msg)
	}
	if _, err := h.get(helmChartsGVR, "flux-system", "apps-cert"); !apierrors.IsNotFound(err) {
		t.Fatalf("a HelmChart was made before the dependency was ready: %v", err)
	}

	// The dependency becomes Ready (the test plays its controller).
	first, err := h.get(helmReleasesGVR, "apps", "first")
	if err != nil {
		t.Fatal(err)
	}
	st := newStatus(first)
	st.set("Ready", "True", "InstallSucceeded", "test")
	if err := st.write(context.Background(), h.dyn.Resource(helmReleasesGVR).Namespace("apps")); err != nil {
		t.Fatal(err)
	}
	hr = h.pass("apps", "cert")
	hc, err := h.get(helmChartsGVR, "flux-system", "apps-cert")
	if err != nil {
		t.Fatalf("no HelmChart flux-system/apps-cert: %v", err)
	}
	spec, _, _ := unstructured.NestedMap(hc.Object, "spec")
	if spec["chart"] != "cert" || spec["version"] != "1.2.3" || spec["interval"] != "30m" ||
		fmt.Sprint(spec["sourceRef"]) != "map[kind:HelmRepository name:jetstack]" || hc.GetLabels()["helm.toolkit.fluxcd.io/name"] != "cert" {
		t.Fatalf("HelmChart spec %v labels %v", spec, hc.GetLabels())
	}
	if st, reason, _ := condition(hr, "Ready"); st != "False" || reason != "ArtifactFailed" {
		t.Fatalf("before source-controller built the chart: Ready %s %s", st, reason)
	}
	url, digest := charts.put(t, "cert", "1.2.3")
	h.publish(helmChartsGVR, "flux-system", "apps-cert", url, digest, "1.2.3")
	hr = h.pass("apps", "cert")
	if st, reason, msg := condition(hr, "Ready"); st != "True" || reason != "InstallSucceeded" {
		t.Fatalf("after the chart was built: Ready %s %s %q\n%s", st, reason, msg, h.log)
	}
	if got := h.configMap("apps", "cert-greeting"); got["greeting"] != "default" {
		t.Fatalf("installed %v", got)
	}

	if err := h.dyn.Resource(helmReleasesGVR).Namespace("apps").Delete(context.Background(), "cert", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.r.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.get(helmChartsGVR, "flux-system", "apps-cert"); !apierrors.IsNotFound(err) {
		t.Fatalf("the HelmChart outlived its HelmRelease: %v", err)
	}
	if _, err := h.get(configMapsGVR, "apps", "cert-greeting"); !apierrors.IsNotFound(err) {
		t.Fatalf("the release outlived its HelmRelease: %v", err)
	}
}

func (h *harness) updateSpec(ns, name string, change func(map[string]any)) {
	h.t.Helper()
	hr, err := h.get(helmReleasesGVR, ns, name)
	if err != nil {
		h.t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(hr.Object, "spec")
	change(spec)
	hr.Object["spec"] = spec
	if _, err := h.dyn.Resource(helmReleasesGVR).Namespace(ns).Update(context.Background(), hr, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// spec.kubeConfig.secretRef: the release goes into the cluster the Secret's
// kubeconfig names (as a Cluster API <cluster>-kubeconfig Secret holds it),
// nothing into this one, and goes from there with the HelmRelease.
func TestReleaseGoesToTheClusterItsKubeconfigNames(t *testing.T) {
	h := newHarness(t)
	workload := testenv.APIServer(t, testenv.ClusterOptions{Name: "workload"})
	wdyn, err := dynamic.NewForConfig(workload.Config)
	if err != nil {
		t.Fatal(err)
	}
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, err := wdyn.Resource(nsGVR).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "apps"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := os.ReadFile(workload.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	charts := newChartServer(t)
	url, digest := charts.put(t, "demo", "1.0.0")
	h.create(ociRepositoriesGVR, "apps", map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
		"metadata": map[string]any{"name": "demo", "namespace": "apps"},
		"spec":     map[string]any{"url": "oci://registry.example/charts/demo", "interval": "1h", "ref": map[string]any{"tag": "1.0.0"}}})
	h.publish(ociRepositoriesGVR, "apps", "demo", url, digest, "1.0.0@"+digest)
	h.create(helmReleasesGVR, "apps", helmRelease("demo", map[string]any{
		"interval": "10m", "targetNamespace": "demo-target", "install": map[string]any{"createNamespace": true},
		"chartRef":   map[string]any{"kind": "OCIRepository", "name": "demo"},
		"kubeConfig": map[string]any{"secretRef": map[string]any{"name": "workload-kubeconfig"}},
	}))

	// No Secret yet: said in the status, nothing installed anywhere.
	hr := h.pass("apps", "demo")
	if st, reason, msg := condition(hr, "Ready"); st != "False" || reason != "InitFailed" || !strings.Contains(msg, "kubeconfig Secret apps/workload-kubeconfig") {
		t.Fatalf("without the kubeconfig Secret: Ready %s %s %q", st, reason, msg)
	}

	h.create(secretsGVR, "apps", map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "workload-kubeconfig", "namespace": "apps"},
		"stringData": map[string]any{"value": string(kc)}})
	h.r.failedAt = map[string]time.Time{} // the test drives retries itself
	h.updateSpec("apps", "demo", func(spec map[string]any) { spec["values"] = map[string]any{"greeting": "remote"} })
	hr = h.pass("apps", "demo")
	if st, reason, msg := condition(hr, "Ready"); st != "True" || reason != "InstallSucceeded" {
		t.Fatalf("with the kubeconfig Secret: Ready %s %s %q\n%s", st, reason, msg, h.log)
	}
	got, err := wdyn.Resource(configMapsGVR).Namespace("demo-target").Get(context.Background(), "demo-target-demo-greeting", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the release is not on the cluster the kubeconfig names: %v", err)
	}
	if g, _, _ := unstructured.NestedString(got.Object, "data", "greeting"); g != "remote" {
		t.Fatalf("installed values on the workload cluster: %v", got.Object["data"])
	}
	if _, err := h.get(configMapsGVR, "demo-target", "demo-target-demo-greeting"); !apierrors.IsNotFound(err) {
		t.Fatalf("the release went into this cluster too: %v", err)
	}

	if err := h.dyn.Resource(helmReleasesGVR).Namespace("apps").Delete(context.Background(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.r.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := wdyn.Resource(configMapsGVR).Namespace("demo-target").Get(context.Background(), "demo-target-demo-greeting", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the release outlived its HelmRelease on the workload cluster: %v\n%s", err, h.log)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "kubeconfig-*")); len(left) != 0 {
		for _, f := range left {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), workload.Config.Host) {
				t.Errorf("the kubeconfig's temporary file %s was left behind", f)
			}
		}
	}
}

// TestUpgradeTakesFieldsAnotherHelmClientOwns: a release whose objects
// another client changed by server-side apply (krops-pivot installs
// cert-manager with its own Helm before Flux takes the release over) is
// upgraded by forcing the conflicts, as helm-controller does with Helm 4,
// rather than failing on every field the other manager owns.
func TestUpgradeTakesFieldsAnotherHelmClientOwns(t *testing.T) {
	h := newHarness(t)
	charts := newChartServer(t)
	url, digest := charts.put(t, "taken", "1.0.0")
	h.create(ociRepositoriesGVR, "apps", map[string]any{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
		"metadata": map[string]any{"name": "taken", "namespace": "apps"},
		"spec":     map[string]any{"url": "oci://registry.example/charts/taken", "interval": "1h", "ref": map[string]any{"tag": "1.0.0"}}})
	h.publish(ociRepositoriesGVR, "apps", "taken", url, digest, "1.0.0@"+digest)
	h.create(helmReleasesGVR, "apps", helmRelease("taken", map[string]any{
		"interval": "10m", "chartRef": map[string]any{"kind": "OCIRepository", "name": "taken"}, "values": map[string]any{"greeting": "first"}}))
	if st, reason, msg := condition(h.pass("apps", "taken"), "Ready"); st != "True" || reason != "InstallSucceeded" {
		t.Fatalf("install: Ready %s %s %q\n%s", st, reason, msg, h.log)
	}
	owned := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"taken-greeting","namespace":"apps"},"data":{"greeting":"other-client"}}`)
	force := true
	if _, err := h.dyn.Resource(configMapsGVR).Namespace("apps").Patch(context.Background(), "taken-greeting", types.ApplyPatchType, owned, metav1.PatchOptions{FieldManager: "krops-pivot", Force: &force}); err != nil {
		t.Fatal(err)
	}
	hr, err := h.get(helmReleasesGVR, "apps", "taken")
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(hr.Object, "second", "spec", "values", "greeting"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(helmReleasesGVR).Namespace("apps").Update(context.Background(), hr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, reason, msg := condition(h.pass("apps", "taken"), "Ready"); st != "True" || reason != "UpgradeSucceeded" {
		t.Fatalf("upgrade over a field krops-pivot owns: Ready %s %s %q\n%s", st, reason, msg, h.log)
	}
	if got := h.configMap("apps", "taken-greeting")["greeting"]; got != "second" {
		t.Errorf("greeting after the upgrade: %q, want second", got)
	}
}
