package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

var (
	clusterGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}
	movedKinds = []schema.GroupVersionKind{
		clusterGVK,
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevCluster"},
		{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevMachineTemplate"},
		{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"},
		{Version: "v1", Kind: "Secret"},
	}
)

// provisioned waits until Cluster API on kind reports every Cluster's
// infrastructure provisioned and control plane initialized: before that,
// clusterctl refuses to move (rightly).
func (w *world) provisioned(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Minute)
	defer cancel()
	for _, name := range []string{"local-management", "local-workload", "local-extra"} {
		for {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(clusterGVK)
			if err := w.kind.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, u); err == nil {
				infra, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "infrastructureProvisioned")
				cp, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "controlPlaneInitialized")
				if infra && cp {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("Cluster %s was not provisioned on kind; capi-manager:\n%s", name, w.capiKind.Tail("capi-manager", 40))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// objects lists the moved kinds in default on c, normalised for comparison
// between clusters and runs: server-set metadata and status go, owner
// references keep what they point at but not the UID.
func objects(t *testing.T, ctx context.Context, c *testenv.Cluster) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, gvk := range movedKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.Client.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			if gvk.Kind == "Secret" && u.Object["type"] != "cluster.x-k8s.io/secret" {
				continue
			}
			out[gvk.Kind+"/"+u.GetName()] = normalise(u)
		}
	}
	return out
}

func normalise(u unstructured.Unstructured) map[string]any {
	o := u.DeepCopy().Object
	md, _ := o["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
		delete(md, k)
	}
	// Finalizers are the controllers' business, not the move's.
	delete(md, "finalizers")
	if refs, ok := md["ownerReferences"].([]any); ok {
		for _, r := range refs {
			if m, ok := r.(map[string]any); ok {
				delete(m, "uid")
			}
		}
	}
	delete(o, "status")
	return o
}

func asJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// The uninterrupted pivot through the binary: every object moves with its
// spec, labels, owner references and secrets; nothing is left on kind;
// Flux is suspended on kind and seeded on the target with kind's run
// metadata; the real Cluster API manager takes the moved Clusters over on
// the target; kind is deleted once the guard holds.
//
// Then the same pivot stopped at every step boundary and killed in the
// middle of the move, with the refusals that must come before any
// mutation on the way; each rerun resumes, and the end state is the
// uninterrupted one, object by object.
func TestPivot(t *testing.T) {
	t.Parallel()
	// The two worlds are independent (API servers, registry, engine,
	// directories of their own), so they run side by side and are compared
	// once both are done.
	var want, got []string
	t.Run("worlds", func(t *testing.T) {
		t.Run("uninterrupted", func(t *testing.T) { t.Parallel(); want = uninterrupted(t) })
		t.Run("stopped at every step and killed during the move", func(t *testing.T) { t.Parallel(); got = interrupted(t) })
	})
	if t.Failed() {
		return
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the resumed pivot left on the target:\n%v\nthe uninterrupted one:\n%v", got, want)
	}
}

func uninterrupted(t *testing.T) []string {
	w := newWorld(t)
	ctx := w.ctx
	close(w.nodes)
	w.provisioned(t)
	before := objects(t, ctx, w.kind)
	if len(before) != 15 {
		t.Fatalf("kind holds %d objects to move, want 15 (5 per Cluster):\n%s", len(before), asJSON(before))
	}

	r := w.run(t)
	if r.Code != 0 {
		t.Fatalf("pivot: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("pivot output:\n%s\n%s", r.Stdout, r.Stderr)
	w.checkMoved(t, before)
	// pivot-sops-secrets: decrypted in memory with the age key, applied on
	// the target, the plaintext in no output and no file (the repository,
	// the home with the pivot's state and backup).
	var creds corev1.Secret
	if err := w.target.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pivot-creds"}, &creds); err != nil || string(creds.Data["password"]) != pivotSecretValue {
		t.Errorf("pivot-creds on the target: %v %v", err, creds.Data)
	}
	if strings.Contains(r.Stdout+r.Stderr, pivotSecretValue) {
		t.Error("the pivot printed the plaintext of pivot-sops-secrets")
	}
	noPlaintextUnder(t, w.root, envValue(w.env, "HOME"))
	if log, _ := os.ReadFile(filepath.Join(w.engineDir, "log")); !strings.Contains(string(log), "rm -f -v krops-local-host-control-plane") {
		t.Errorf("kind was not deleted; engine calls:\n%s", log)
	}

	// The real Cluster API manager, started on the target as the
	// operator would, takes the moved Clusters over: not paused, their
	// infrastructure and control plane read from the moved objects.
	capiTarget := testenv.RunClusterAPI(t, w.target)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range []string{"local-management", "local-workload", "local-extra"} {
		for {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(clusterGVK)
			if err := w.target.Client.Get(wctx, client.ObjectKey{Namespace: "default", Name: name}, u); err == nil {
				paused, _, gen := testenv.Condition(u, "Paused")
				infra, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "infrastructureProvisioned")
				if paused == "False" && gen == u.GetGeneration() && infra {
					break
				}
			}
			if wctx.Err() != nil {
				t.Fatalf("Cluster API on the target did not take Cluster %s over; capi-manager:\n%s", name, capiTarget.Tail("capi-manager", 40))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// A rerun after the pivot finished (as after a crash between deleting
	// kind and reporting it): the run's state, the management cluster's
	// run metadata and kind's own listing agree that it has, so the rerun
	// succeeds and changes nothing.
	r = w.run(t)
	if r.Code != 0 || !strings.Contains(r.Stdout, "The pivot of run pivot-test-run has finished") {
		t.Errorf("rerun after the pivot: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}

	// Kind is gone and the management cluster does not answer either:
	// whether the pivot finished cannot be told, so exit 3, not a
	// configuration error.
	restore := unanswered(t, envValue(w.env, "MGMT_KUBECONFIG"))
	mustCode(t, "neither cluster answers", w.run(t), 3, "whether an earlier pivot finished is unknown")
	restore()
	return sortedKeys(objects(t, ctx, w.target))
}

// checkMoved asserts the end state of a pivot.
func (w *world) checkMoved(t *testing.T, before map[string]map[string]any) {
	t.Helper()
	ctx := w.ctx
	after := objects(t, ctx, w.target)
	for k, want := range before {
		got, ok := after[k]
		if !ok {
			t.Errorf("%s is not on the target", k)
			continue
		}
		if asJSON(got) != asJSON(want) {
			t.Errorf("%s changed in the move:\nkind:   %s\ntarget: %s", k, asJSON(want), asJSON(got))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s is on the target but was not on kind", k)
		}
	}
	if left := objects(t, ctx, w.kind); len(left) != 0 {
		t.Errorf("left on kind: %v", sortedKeys(left))
	}
	// Flux on kind is suspended, every Kustomization and HelmRelease in
	// every namespace (the workload Flux's appliers sit next to the Cluster).
	suspended := 0
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "KustomizationList"},
		{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmReleaseList"},
	} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := w.kind.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, k := range list.Items {
			if s, _, _ := unstructured.NestedBool(k.Object, "spec", "suspend"); !s {
				t.Errorf("%s %s/%s on kind is not suspended", k.GetKind(), k.GetNamespace(), k.GetName())
			}
			// The mark a rerun of bootstrap's seed steps aside for.
			if run := k.GetAnnotations()["krops.io/suspended-by-pivot"]; run != "pivot-test-run" {
				t.Errorf("%s %s/%s on kind: krops.io/suspended-by-pivot %q, want the pivot's run id", k.GetKind(), k.GetNamespace(), k.GetName(), run)
			}
			suspended++
		}
	}
	if suspended != 4 {
		t.Errorf("%d Flux appliers on kind, want the 4 the world put there", suspended)
	}
	// Flux on the target carries kind's run metadata.
	var src, dst corev1.ConfigMap
	if err := w.kind.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "krops-run"}, &src); err != nil {
		t.Fatal(err)
	}
	if err := w.target.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "krops-run"}, &dst); err != nil || asJSON(src.Data) != asJSON(dst.Data) {
		t.Errorf("krops-run on the target %v (%v), on kind %v", dst.Data, err, src.Data)
	}
	// The pivot manifests, substituted, and the fallback for what the
	// move skips.
	var vars, identity corev1.ConfigMap
	if err := w.target.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pivot-vars"}, &vars); err != nil ||
		vars.Data["fromKind"] != "read-from-kind" || vars.Data["fromConfig"] != "set-in-bootstrap-toml" || vars.Data["withDefault"] != "the-default" {
		t.Errorf("pivot-vars on the target: %v (%v)", vars.Data, err)
	}
	if err := w.target.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "global-identity"}, &identity); err != nil {
		t.Errorf("the move fallback was not applied: %v", err)
	}
	// The kubeconfig export works and names the configured context.
	b, err := os.ReadFile(envValue(w.env, "MGMT_KUBECONFIG"))
	if err != nil || !strings.Contains(string(b), "current-context: krops-local-host-mgmt") || !strings.Contains(string(b), "server: "+strings.TrimSuffix(w.target.Config.Host, "/")+"\n") {
		t.Errorf("MGMT_KUBECONFIG (%v):\n%s", err, b)
	}
	if fi, err := os.Stat(envValue(w.env, "MGMT_KUBECONFIG")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("MGMT_KUBECONFIG mode: %v %v", fi, err)
	}
	// No Cluster is left paused on the target.
	clusters := &unstructured.UnstructuredList{}
	clusters.SetGroupVersionKind(clusterGVK.GroupVersion().WithKind("ClusterList"))
	if err := w.target.Client.List(ctx, clusters, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters.Items {
		if p, _, _ := unstructured.NestedBool(c.Object, "spec", "paused"); p {
			t.Errorf("Cluster %s is paused on the target", c.GetName())
		}
	}
}

// unanswered points every cluster of the kubeconfig at path to a port
// nothing listens on, as a cluster that went away (or at server, when
// given), and returns what restores the file.
func unanswered(t *testing.T, path string, server ...string) (restore func()) {
	t.Helper()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://127.0.0.1:1"
		if len(server) > 0 {
			c.Server = server[0]
		}
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.WriteFile(path, good, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mustCode(t *testing.T, what string, r testenv.Result, code int, wants ...string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("%s: exit %d, want %d\n%s\n%s", what, r.Code, code, r.Stdout, r.Stderr)
	}
	for _, w := range wants {
		if !strings.Contains(r.Stderr, w) {
			t.Fatalf("%s: output lacks %q:\n%s", what, w, r.Stderr)
		}
	}
}

func setPaused(t *testing.T, ctx context.Context, c *testenv.Cluster, name string, paused bool) {
	t.Helper()
	// A merge patch: the Cluster API manager updates the Cluster at the
	// same time, and a read-then-update would race it.
	patch := `{"spec":{"paused":null}}`
	if paused {
		patch = `{"spec":{"paused":true}}`
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterGVK)
	u.SetNamespace("default")
	u.SetName(name)
	if err := c.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

func pausedOn(t *testing.T, ctx context.Context, c *testenv.Cluster) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterGVK.GroupVersion().WithKind("ClusterList"))
	if err := c.Client.List(ctx, list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		if p, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); p {
			out = append(out, u.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func interrupted(t *testing.T) []string {
	w := newWorld(t)
	ctx := w.ctx
	w.provisioned(t)
	setPaused(t, ctx, w.kind, "local-extra", true) // as Git or a person would
	var vars corev1.ConfigMap
	if err := w.kind.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "cluster-vars"}, &vars); err != nil {
		t.Fatal(err)
	}
	if err := w.kind.Client.Delete(ctx, &vars); err != nil {
		t.Fatal(err)
	}
	mgmtKubeconfig := envValue(w.env, "MGMT_KUBECONFIG")

	// An unset ${VAR} is refused before anything changes.
	mustCode(t, "unset variable", w.run(t), 2, "preflight failed, nothing was changed", "pivot-manifests pivot/vars.yaml: ${FROM_KIND} not set")
	if _, err := os.Stat(mgmtKubeconfig); !os.IsNotExist(err) {
		t.Errorf("the refused run wrote MGMT_KUBECONFIG: %v", err)
	}
	vars.ResourceVersion, vars.UID = "", ""
	if err := w.kind.Client.Create(ctx, &vars); err != nil {
		t.Fatal(err)
	}

	stop := func(step string) {
		t.Helper()
		mustCode(t, "stop after "+step, w.run(t, "KROPS_TEST_PIVOT_STOP_AFTER="+step), 1, "stopped on request after a step "+step)
	}
	stop("mgmt-cluster")
	stop("kubeconfig-secret")
	stop("kubeconfig")
	// A nodeless management cluster is waited for, then the wait runs out
	// with the node summary.
	mustCode(t, "nodeless", w.runArgs(t, []string{"--node-timeout", "3s"}), 1, "nodes were not Ready within 3s (no nodes yet)")
	close(w.nodes)
	stop("nodes")
	stop("providers")
	// Kind runs a provider the management cluster's provider manifests do
	// not install: the move is refused before anything on kind changes.
	extra := testenv.Provider{Name: "helm", Namespace: "caaph-system", Type: "AddonProvider", Version: "v0.5.0"}
	if err := testenv.CreateOperatorProvider(ctx, w.kind, extra); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "inventory", w.run(t), 2, "AddonProvider/helm v0.5.0 is not installed on the management cluster")
	deleteOperatorProvider(t, ctx, w.kind, extra)
	// Kind runs a newer core provider than the one the management
	// cluster's manifests install: clusterctl would move objects an older
	// controller may not read, so the move is refused.
	newerCoreOnKind(t, ctx, w)
	// A Cluster paused by someone else is never unpaused by krops, and
	// clusterctl would not move it: refused.
	mustCode(t, "paused by Git", w.run(t), 2, "Cluster(s) local-extra in default are paused (spec.paused), and not by krops")
	if p := pausedOn(t, ctx, w.kind); strings.Join(p, ",") != "local-extra" {
		t.Errorf("paused on kind after the refusal: %v", p)
	}
	setPaused(t, ctx, w.kind, "local-extra", false) // Git unpauses it
	before := objects(t, ctx, w.kind)
	stop("verify")
	stop("suspend-flux")

	// Killed in the middle of the move: some objects are on the target,
	// kind's Clusters are paused by clusterctl.
	mustCode(t, "killed during the move", w.run(t, "KROPS_TEST_PIVOT_KILL_AFTER_CREATES=4"), 137, "exiting before creating")
	if p := pausedOn(t, ctx, w.kind); len(p) != 3 {
		t.Errorf("after the kill, paused on kind: %v (clusterctl pauses all three)", p)
	}
	if n := len(objects(t, ctx, w.target)); n == 0 || n >= 15 {
		t.Errorf("after the kill the target holds %d of the 15 objects: the kill did not land mid-move", n)
	}
	r := w.run(t, "KROPS_TEST_PIVOT_STOP_AFTER=move")
	mustCode(t, "resumed move", r, 1, "resuming: the move began in an earlier run", "unpaused Cluster local-management on kind (paused by an earlier, interrupted run)")
	stop("seed")

	// The management cluster stops answering before kind may go: whether
	// every moved Cluster is there cannot be read, so kind is kept and
	// the run stops on unknown state (exit 3); the rerun once it answers
	// goes on.
	restore := unanswered(t, mgmtKubeconfig)
	mustCode(t, "management cluster down", w.runArgs(t, []string{"--node-timeout", "3s"}), 3,
		"the management cluster's API did not answer within 3s (the state is unknown)", "kind is kept")
	if log, _ := os.ReadFile(filepath.Join(w.engineDir, "log")); strings.Contains(string(log), "rm -f") {
		t.Fatalf("kind was deleted while the management cluster did not answer:\n%s", log)
	}
	restore()
	// It accepts connections and never answers (a paused node): the wait
	// for its nodes must not run out its 15 minutes before saying so.
	restore = unanswered(t, mgmtKubeconfig, "https://"+testenv.SilentEndpoint(t))
	mustCode(t, "management cluster silent", w.runArgs(t, []string{"--query-timeout", "2s"}), 3,
		"the management cluster's API server stopped answering while the pivot waited for its nodes (the state is unknown)", "kind is kept")
	if log, _ := os.ReadFile(filepath.Join(w.engineDir, "log")); strings.Contains(string(log), "rm -f") {
		t.Fatalf("kind was deleted while the management cluster was silent:\n%s", log)
	}
	restore()

	// A moved Cluster missing on the management cluster keeps kind.
	statePath := filepath.Join(w.root, ".krops", "pivot", "pivot-test-run", "state.json")
	state, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(state), `"local-extra",`, `"local-extra",
    "local-ghost",`, 1)
	if err := os.WriteFile(statePath, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "guard", w.run(t), 1, "Cluster(s) local-ghost, which the move took from kind, are not on the management cluster")
	if log, _ := os.ReadFile(filepath.Join(w.engineDir, "log")); strings.Contains(string(log), "rm -f") {
		t.Fatalf("kind was deleted although a moved Cluster is missing:\n%s", log)
	}
	if err := os.WriteFile(statePath, state, 0o600); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "final run", w.run(t), 0)
	w.checkMoved(t, before)
	if log, _ := os.ReadFile(filepath.Join(w.engineDir, "log")); !strings.Contains(string(log), "rm -f -v krops-local-host-control-plane") {
		t.Errorf("kind was not deleted; engine calls:\n%s", log)
	}
	return sortedKeys(objects(t, ctx, w.target))
}

// clusterctl leaves an object on kind when one of its owner references
// points at an object that is gone (the garbage collector, which no
// envtest runs, would drop such a reference). The pivot sees the hole in
// the move's graph and refuses before anything moves; once the reference
// is gone, the rerun moves everything.
func TestPivotRefusesToLeaveAnObjectBehind(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := w.ctx
	close(w.nodes)
	w.provisioned(t)

	// Without a Flux Kustomization on kind nothing would ever create the
	// management Cluster: refused at once, not after MGMT_READY_TIMEOUT.
	ks := &unstructured.UnstructuredList{}
	ks.SetGroupVersionKind(schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "KustomizationList"})
	if err := w.kind.Client.List(ctx, ks, client.InNamespace("flux-system")); err != nil || len(ks.Items) == 0 {
		t.Fatalf("the world's Kustomizations: %d, %v", len(ks.Items), err)
	}
	for i := range ks.Items {
		if err := w.kind.Client.Delete(ctx, &ks.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	r := w.run(t, "MGMT_READY_TIMEOUT=10m")
	if r.Code != 2 || !strings.Contains(r.Stderr, "kind has no Flux Kustomization in flux-system, so nothing will create the management Cluster default/local-management") {
		t.Fatalf("pivot with nothing seeded on kind: exit %d\n%s", r.Code, r.Stderr)
	}
	if took := time.Since(start); took > 2*time.Minute {
		t.Errorf("the refusal took %v: it waited instead of refusing", took)
	}
	for i := range ks.Items {
		k := ks.Items[i].DeepCopy()
		k.SetResourceVersion("")
		k.SetUID("")
		if err := w.kind.Client.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}

	before := objects(t, ctx, w.kind)
	key := client.ObjectKey{Namespace: "default", Name: "local-extra-control-plane"}
	dangling := metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: "local-extra-shim", UID: "00000000-0000-0000-0000-000000000001"}
	editKCPOwners(t, ctx, w.kind, key, func(refs []metav1.OwnerReference) []metav1.OwnerReference { return append(refs, dangling) })

	r = w.run(t)
	if r.Code != 2 || !strings.Contains(r.Stderr, "the move would leave behind, and deleting kind would lose: KubeadmControlPlane default/local-extra-control-plane") {
		t.Fatalf("pivot with a dangling owner reference: exit %d\n%s", r.Code, r.Stderr)
	}
	if got := objects(t, ctx, w.target); len(got) != 0 {
		t.Errorf("moved although refused: %v", sortedKeys(got))
	}
	if log, _ := os.ReadFile(filepath.Join(w.engineDir, "log")); strings.Contains(string(log), "rm ") {
		t.Errorf("kind was deleted although the pivot refused; engine calls:\n%s", log)
	}

	editKCPOwners(t, ctx, w.kind, key, func(refs []metav1.OwnerReference) []metav1.OwnerReference {
		return slices.DeleteFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == dangling.UID })
	})
	if r = w.run(t); r.Code != 0 {
		t.Fatalf("rerun once the reference is gone: exit %d\n%s", r.Code, r.Stderr)
	}
	w.checkMoved(t, before)
}

// editKCPOwners rewrites a KubeadmControlPlane's owner references, retrying
// when the Cluster API manager updates it at the same time.
func editKCPOwners(t *testing.T, ctx context.Context, c *testenv.Cluster, key client.ObjectKey, edit func([]metav1.OwnerReference) []metav1.OwnerReference) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kcp := &unstructured.Unstructured{}
		kcp.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"})
		if err := c.Client.Get(ctx, key, kcp); err != nil {
			return err
		}
		kcp.SetOwnerReferences(edit(kcp.GetOwnerReferences()))
		return c.Client.Update(ctx, kcp)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newerCoreOnKind makes kind's CoreProvider report Cluster API core one
// patch release newer than the tree pins, runs the pivot, which must refuse
// (exit 2) naming both versions, and puts the version back.
func newerCoreOnKind(t *testing.T, ctx context.Context, w *world) {
	t.Helper()
	core := treeProviders(t)[slices.IndexFunc(treeProviders(t), func(p testenv.Provider) bool { return p.Type == "CoreProvider" })]
	pinned := version.MustParseSemantic(core.Version)
	newer := "v" + pinned.WithPatch(pinned.Patch()+1).String()
	setVersion := func(v string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Kind: "CoreProvider"})
		if err := w.kind.Client.Get(ctx, client.ObjectKey{Namespace: core.Namespace, Name: core.Name}, u); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, v, "status", "installedVersion"); err != nil {
			t.Fatal(err)
		}
		if err := w.kind.Client.Status().Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	setVersion(newer)
	mustCode(t, "newer core on kind", w.run(t), 2, "CoreProvider/cluster-api is at "+core.Version+" on the management cluster, older than "+newer+" on kind")
	setVersion(core.Version)
}

// deleteOperatorProvider removes p's provider object from c.
func deleteOperatorProvider(t *testing.T, ctx context.Context, c *testenv.Cluster, p testenv.Provider) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Kind: p.Type})
	u.SetNamespace(p.Namespace)
	u.SetName(p.Name)
	if err := c.Client.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
}
