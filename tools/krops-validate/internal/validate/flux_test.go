package validate

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/configartifact"
	"github.com/kropsdev/krops/tools/testenv"
)

// clusterVars are stand-in values for every key the trees read from the
// cluster-vars ConfigMap (docs/trees.md).
var clusterVars = map[string]string{
	"AWS_ACCOUNT_ID": "123456789012", "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000001",
	"AZURE_TENANT_ID": "00000000-0000-0000-0000-000000000002", "AZURE_CLIENT_ID": "00000000-0000-0000-0000-000000000003",
	"GCP_PROJECT": "krops-test", "GCP_WIF_PROVIDER": "mgmt",
	"KROPS_REGISTRY_MIRRORS": `[{"registry":"localhost:5001","endpoints":["http://krops-registry:5000"]}]`,
}

var fluxKustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// Every Flux Kustomization of every environment, reconciled by the real
// Flux source-controller and kustomize-controller from the repository
// packed as a config artifact, into a real kube-apiserver with every pinned
// CRD. Each runs with its own path and postBuild, unchained (dependsOn,
// waits and remote kubeconfigs removed: no controller here would ever make
// a cluster or a HelmRelease ready) and renamed per environment. Flux's own
// build and variable substitution then decide what reaches the API server:
// every Kustomization must apply, and no object may keep a ${...}
// placeholder. krops-run is absent on purpose, so the run tags must take
// their defaults. Kinds without a CRD here (the ones task validate lists as
// not schema-checked) get a stand-in CRD that accepts any content, so the
// rest of their Kustomizations is still applied; their own schema stays
// unchecked.
func TestTreesReconcileWithRealFlux(t *testing.T) {
	in := loadRepository(t)
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: testenv.AllCRDs()})
	flux := testenv.Flux(t, cluster)
	// The cluster local-host's workload Flux is applied to, through the
	// kubeconfig Secret Cluster API would write for local-workload.
	workload := testenv.APIServer(t, testenv.ClusterOptions{Name: "local-workload", CRDs: testenv.AllCRDs()})
	reg := testenv.Registry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	workloadKubeconfig, err := os.ReadFile(workload.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-workload-kubeconfig", Namespace: "default"}, Data: map[string][]byte{"value": workloadKubeconfig}}); err != nil {
		t.Fatal(err)
	}
	// The flux-operator chart creates the namespace before the FluxInstance
	// goes in.
	if err := workload.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}); err != nil {
		t.Fatal(err)
	}

	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: in.Root, Paths: Trees})
	if err != nil {
		t.Fatal(err)
	}
	repo := reg.Host + "/krops/trees"
	if _, err := configartifact.Push(ctx, a, repo+":test", configartifact.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-vars", Namespace: flux.Namespace}, Data: clusterVars}); err != nil {
		t.Fatal(err)
	}
	// krops-sync with the chart and provider keys only, as krops-flux-seed
	// writes them for KROPS_CHART_REPOSITORY and KROPS_PROVIDER_REPOSITORY on
	// the local registry (its sync keys stay absent, so those placeholders
	// take their defaults).
	syncVars := map[string]string{
		"KROPS_CHART_REPOSITORY":          "oci://krops-registry:5000/charts",
		"KROPS_CHART_REPOSITORY_TYPE":     "oci",
		"KROPS_CHART_REPOSITORY_INSECURE": "true",
		"KROPS_OCI_CHART_REPOSITORY":      "oci://krops-registry:5000/charts",
		"KROPS_PROVIDER_FETCH":            "oci",
		"KROPS_PROVIDER_REPOSITORY":       "http://krops-registry:5000/capi",
		"KROPS_FLUX_REGISTRY":             "localhost:5001/fluxcd",
	}
	if err := cluster.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "krops-sync", Namespace: flux.Namespace}, Data: syncVars}); err != nil {
		t.Fatal(err)
	}
	cluster.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m
  url: oci://%s
  ref:
    tag: test
  insecure: true
`, repo))

	standIns := cluster.StandInCRDs(t, ctx, kinds(in.Objects))
	t.Logf("stand-in CRDs (any content accepted) for kinds without a CRD here: %s", strings.Join(standIns, ", "))

	names := map[string]string{} // test name -> origin
	for _, o := range fluxKustomizations(in.Objects, true) {
		u := unchained(o, syncVars)
		if prev, dup := names[u.GetName()]; dup {
			t.Fatalf("two Kustomizations map to %s: %s and %s", u.GetName(), prev, o.String())
		}
		names[u.GetName()] = o.String()
		if err := cluster.Client.Create(ctx, u); err != nil {
			t.Fatalf("creating %s for %s: %v", u.GetName(), o.String(), err)
		}
	}
	if len(names) < 30 {
		t.Fatalf("only %d Kustomizations found in the trees", len(names))
	}

	pending := map[string]string{}
	for n := range names {
		pending[n] = "not reconciled yet"
	}
	for len(pending) > 0 && ctx.Err() == nil {
		for n := range pending {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(fluxKustomizationGVK)
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: n}, u); err != nil {
				t.Fatal(err)
			}
			status, msg, _ := testenv.Condition(u, "Ready")
			switch {
			case status == "True":
				delete(pending, n)
				checkInventory(t, ctx, cluster.Client, names[n], u)
			default:
				pending[n] = msg
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	var stuck []string
	for n, msg := range pending {
		stuck = append(stuck, fmt.Sprintf("%s: %s", names[n], msg))
	}
	sort.Strings(stuck)
	if len(stuck) > 0 {
		t.Errorf("%d Kustomizations did not apply:\n  %s\n%s", len(stuck), strings.Join(stuck, "\n  "), flux.Tail("kustomize-controller", 30))
	}
	t.Logf("%d of %d Kustomizations applied", len(names)-len(stuck), len(names))

	// A list substituted from cluster-vars reaches the object as a list
	// (Flux substitutes into the built YAML), which the ClusterClasses'
	// registryMirrors variable requires.
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "local-management"}, cl); err != nil {
		t.Fatal(err)
	}
	vars, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "variables")
	var mirrors any
	for _, v := range vars {
		if m, _ := v.(map[string]any); m["name"] == "registryMirrors" {
			mirrors = m["value"]
		}
	}
	if l, ok := mirrors.([]any); !ok || len(l) != 1 || l[0].(map[string]any)["registry"] != "localhost:5001" {
		t.Errorf("Cluster local-management's registryMirrors after Flux's substitution: %#v, want the list from cluster-vars", mirrors)
	}

	// The chart repository from krops-sync reaches both HelmRepositories
	// with the type it needs and a boolean insecure, which the
	// HelmRepository schema requires.
	for _, key := range []client.ObjectKey{{Namespace: "cert-manager", Name: "jetstack"}, {Namespace: "capi-operator-system", Name: "capi-operator"}} {
		hr := &unstructured.Unstructured{}
		hr.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmRepository"})
		if err := cluster.Client.Get(ctx, key, hr); err != nil {
			t.Fatal(err)
		}
		spec, _, _ := unstructured.NestedMap(hr.Object, "spec")
		if spec["url"] != "oci://krops-registry:5000/charts" || spec["type"] != "oci" || spec["insecure"] != true {
			t.Errorf("HelmRepository %s after Flux's substitution: url %v, type %v, insecure %#v; want krops-sync's repository, oci, true", key, spec["url"], spec["type"], spec["insecure"])
		}
	}

	// local-host's workload Flux: the addons Kustomization fills the
	// local-workload-flux Kustomization's patch from krops-sync, and the
	// real kustomize-controller applies the FluxInstance on the workload
	// cluster through its kubeconfig Secret, patched with those values.
	fi := &unstructured.Unstructured{}
	fi.SetGroupVersionKind(schema.GroupVersionKind{Group: "fluxcd.controlplane.io", Version: "v1", Kind: "FluxInstance"})
	for {
		err := workload.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "flux"}, fi)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no FluxInstance on the workload cluster: %v\n%s", err, flux.Tail("kustomize-controller", 30))
		}
		time.Sleep(500 * time.Millisecond)
	}
	registry, _, _ := unstructured.NestedString(fi.Object, "spec", "distribution", "registry")
	syncURL, _, _ := unstructured.NestedString(fi.Object, "spec", "sync", "url")
	syncRef, _, _ := unstructured.NestedString(fi.Object, "spec", "sync", "ref")
	if registry != "localhost:5001/fluxcd" || syncURL != "oci://krops-registry:5000/krops" || syncRef != "latest" {
		t.Errorf("the workload cluster's FluxInstance: registry %q, sync %q at %q; want krops-sync's registry and the sync defaults", registry, syncURL, syncRef)
	}
	// Its sync Kustomization substitutes what workload/local-host needs,
	// handed on the same way (krops-run is absent: the run id's default).
	patches, _, _ := unstructured.NestedSlice(fi.Object, "spec", "kustomize", "patches")
	var syncPatch string
	for _, p := range patches {
		if m, _ := p.(map[string]any); m != nil {
			if target, _ := m["target"].(map[string]any); target["kind"] == "Kustomization" {
				syncPatch, _ = m["patch"].(string)
			}
		}
	}
	for _, want := range []string{`KROPS_RUN_ID: "unknown"`, `KROPS_OCI_CHART_REPOSITORY: "oci://krops-registry:5000/charts"`, `KROPS_CHART_REPOSITORY_INSECURE: "true"`} {
		if !strings.Contains(syncPatch, want) {
			t.Errorf("the workload FluxInstance's patch of its sync Kustomization lacks %s:\n%s", want, syncPatch)
		}
	}
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmRepository"})
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "flux-operator"}, hr); err != nil {
		t.Fatal(err)
	}
	if spec, _, _ := unstructured.NestedMap(hr.Object, "spec"); spec["url"] != "oci://krops-registry:5000/charts" || spec["insecure"] != true {
		t.Errorf("the workload flux-operator chart's HelmRepository: url %v, insecure %#v; want krops-sync's", spec["url"], spec["insecure"])
	}

	// The provider repository from krops-sync turns every provider's
	// fetchConfig from its GitHub release (url) into the release's mirror
	// (oci), which the operator's CRD accepts only as the one source.
	for _, p := range []struct {
		kind, ns, name, want string
	}{
		{"CoreProvider", "capi-system", "cluster-api", "http://krops-registry:5000/capi/cluster-api/releases"},
		{"InfrastructureProvider", "capd-system", "docker", "http://krops-registry:5000/capi/cluster-api/releases"},
		{"InfrastructureProvider", "capa-system", "aws", "http://krops-registry:5000/capi/cluster-api-provider-aws/releases"},
		{"BootstrapProvider", "cabpt-system", "talos", "http://krops-registry:5000/capi/cluster-api-bootstrap-provider-talos/releases"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Kind: p.kind})
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: p.name}, u); err != nil {
			t.Errorf("%s %s/%s: %v", p.kind, p.ns, p.name, err)
			continue
		}
		if fc, _, _ := unstructured.NestedStringMap(u.Object, "spec", "fetchConfig"); len(fc) != 1 || fc["oci"] != p.want {
			t.Errorf("%s %s/%s fetchConfig after Flux's substitution: %v, want only oci: %s", p.kind, p.ns, p.name, fc, p.want)
		}
	}
}

// unchained copies a tree's Kustomization for the test: same path and
// postBuild, reading the test artifact, applied into the test cluster. A
// Kustomization another one applies may carry placeholders in its patches,
// which the applying Kustomization fills: they are filled here the same
// way, from vars (krops-sync) or their defaults.
func unchained(o Object, vars map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	b, _ := yaml.Marshal(o.Raw)
	_ = yaml.Unmarshal(b, &u.Object)
	spec := u.Object["spec"].(map[string]any)
	if patches, ok := spec["patches"].([]any); ok {
		for _, p := range patches {
			if m, ok := p.(map[string]any); ok {
				if text, ok := m["patch"].(string); ok {
					m["patch"] = fillPlaceholders(text, vars)
				}
			}
		}
	}
	for _, k := range []string{"dependsOn", "kubeConfig", "wait", "healthChecks", "decryption", "targetNamespace"} {
		delete(spec, k)
	}
	spec["sourceRef"] = map[string]any{"kind": "OCIRepository", "name": "flux-system", "namespace": "flux-system"}
	spec["interval"], spec["retryInterval"], spec["timeout"] = "10m", "2s", "1m"
	origin := strings.NewReplacer("/", "-", ",", "", " ", "-").Replace(strings.SplitN(o.Root, ",", 2)[0])
	u.SetName(strings.ToLower(origin + "--" + u.GetName()))
	u.SetNamespace("flux-system")
	return u
}

// fillPlaceholders substitutes ${VAR:=default} in s as Flux does: VAR's
// value in vars, else the default.
func fillPlaceholders(s string, vars map[string]string) string {
	return anyPlaceholder.ReplaceAllStringFunc(s, func(p string) string {
		name, def, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(p, "${"), "}"), ":")
		if v, ok := vars[name]; ok {
			return v
		}
		if def == "" {
			return ""
		}
		return def[1:] // after := or :-
	})
}

// checkInventory fetches every object the Kustomization applied and fails
// on any ${...} left in it.
func checkInventory(t *testing.T, ctx context.Context, c client.Client, origin string, ks *unstructured.Unstructured) {
	t.Helper()
	entries, _, _ := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		id, _ := m["id"].(string)
		version, _ := m["v"].(string)
		parts := strings.Split(id, "_")
		if len(parts) != 4 {
			t.Errorf("%s: inventory entry %q", origin, id)
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: parts[2], Version: version, Kind: parts[3]})
		if err := c.Get(ctx, client.ObjectKey{Namespace: parts[0], Name: parts[1]}, obj); err != nil {
			t.Errorf("%s: applied %s but it cannot be read: %v", origin, id, err)
			continue
		}
		if obj.GetKind() == "Secret" {
			// Secret values are base64; decode through stringData's view.
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			for k, v := range data {
				if strings.Contains(decode(v), "${") {
					t.Errorf("%s: Secret %s/%s key %s kept a ${...} placeholder", origin, parts[0], parts[1], k)
				}
			}
			continue
		}
		if b, _ := yaml.Marshal(obj.Object); anyPlaceholder.Match(b) {
			t.Errorf("%s: %s %s/%s kept a placeholder: %s", origin, parts[3], parts[0], parts[1], anyPlaceholder.Find(b))
		}
	}
}

func decode(v string) string {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return v
	}
	return string(b)
}

// loadRepository renders this repository's trees.
func loadRepository(t *testing.T) *Input {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	return loadAt(t, root)
}

// kinds lists the kinds of objs.
func kinds(objs []Object) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, o := range objs {
		api, kind := o.Kind()
		if gv, err := schema.ParseGroupVersion(api); err == nil && kind != "" {
			out = append(out, gv.WithKind(kind))
		}
	}
	return out
}
