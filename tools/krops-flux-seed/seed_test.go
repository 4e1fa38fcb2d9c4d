package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// The whole seed of local-host through the binary: the chart installed by
// the Helm code path users run, the FluxInstance reconciled by the real Flux
// Operator, the artifact published to a real registry and reconciled by the
// real Flux source- and kustomize-controllers. A rerun writes nothing.
func TestSeedLocalHostWithTheRealOperatorAndFlux(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxOperator, testenv.FluxSource, testenv.FluxKustomize, testenv.FluxHelm}})
	testenv.RunFluxOperator(t, cluster)
	testenv.Flux(t, cluster)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go seedtest.StandInKubelet(ctx, cluster.Client)
	reg := testenv.Registry(t)
	charts := seedtest.StandInOperatorChart(t, reg, "0.61.0")
	rec := testenv.NewAPIRecorder(t, cluster.Config)
	kubeconfig := rec.Kubeconfig(t, "kind-seed")

	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildBinary(t, ".", "krops-flux-seed")
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig, "BOOTSTRAP_KUBECONTEXT=kind-seed",
		"LOCAL_RECONCILE_TIMEOUT=3m", "KROPS_RUN_ID=local-seed-test"}, artifactEnv(reg.Host)...)
	// The real tree needs CAPI and cert-manager to go further than
	// flux-system: chain_test.go follows a whole chain on a tree made for it.
	args := []string{"local-host", "--no-follow", "--chart-repository", charts, "--registry-in-cluster", reg.Host}
	r := testenv.RunBinary(t, root, env, bin, args...)
	if r.Code != 0 {
		t.Fatalf("seed: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"✔ Flux Operator (chart flux-operator 0.61.0)", "✔ publishing the config artifact", "✔ FluxInstance flux-system/flux", "✔ waiting for Flux to take over", "2 of 2 ready"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.Stderr)
		}
	}
	var cm corev1.ConfigMap
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "krops-run"}, &cm); err != nil || cm.Data["KROPS_RUN_ID"] != "local-seed-test" {
		t.Errorf("krops-run: %v %v", cm.Data, err)
	}
	var releases corev1.SecretList
	if err := cluster.Client.List(ctx, &releases, client.InNamespace("flux-system"), client.MatchingLabels{"owner": "helm", "name": "flux-operator"}); err != nil || len(releases.Items) != 1 {
		t.Errorf("helm release revisions: %d (%v)", len(releases.Items), err)
	}

	// The rerun reaches the API server with reads only.
	rec.Reset()
	r = testenv.RunBinary(t, root, env, bin, args...)
	if r.Code != 0 {
		t.Fatalf("rerun: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("the rerun on a seeded cluster wrote:\n%s", strings.Join(w, "\n"))
	}
	if !strings.Contains(r.Stderr, "release flux-operator is already at 0.61.0: unchanged") {
		t.Errorf("rerun output:\n%s", r.Stderr)
	}

	// Where this Flux syncs from, for the trees to hand on.
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "krops-sync"}, &cm); err != nil || cm.Data["KROPS_SYNC_URL"] != "oci://"+reg.Host+"/krops" || cm.Data["KROPS_SYNC_REF"] != "latest" {
		t.Errorf("krops-sync: %v %v", cm.Data, err)
	}
	// The chart repository on the local registry, as the cluster's Flux
	// reaches it (--registry-in-cluster), for the trees' HelmRepositories.
	if cm.Data["KROPS_CHART_REPOSITORY"] != "oci://"+reg.Host+"/charts" || cm.Data["KROPS_CHART_REPOSITORY_TYPE"] != "oci" || cm.Data["KROPS_CHART_REPOSITORY_INSECURE"] != "true" {
		t.Errorf("krops-sync's chart keys: %v", cm.Data)
	}

	// oci-push: republish and ask Flux to fetch now; the real
	// source-controller confirms it handled the request. The management
	// cluster's kubeconfig does not exist here, so it is skipped.
	r = testenv.RunBinary(t, root, env, bin, "publish", "local-host", "--reconcile")
	if r.Code != 0 || !strings.Contains(r.Stderr, "✔ publishing the config artifact") || !strings.Contains(r.Stderr, "✔ asking Flux to fetch OCIRepository flux-system/flux-system now (context kind-seed") {
		t.Fatalf("publish --reconcile: exit %d\n%s", r.Code, r.Stderr)
	}
	_, at, _ := strings.Cut(r.Stderr, "reconcile.fluxcd.io/requestedAt=")
	at, _, _ = strings.Cut(at, "\n")
	handled := func() string {
		var repo unstructured.Unstructured
		repo.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"})
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: "flux-system", Name: "flux-system"}, &repo); err != nil {
			return err.Error()
		}
		v, _, _ := unstructured.NestedString(repo.Object, "status", "lastHandledReconcileAt")
		return v
	}
	deadline := time.Now().Add(time.Minute)
	for handled() != at && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := handled(); at == "" || got != at {
		t.Errorf("source-controller handled reconcile request %q, want %q", got, at)
	}
	// No cluster to ask: the push stands, the exit says the request failed.
	noCluster := append(append([]string{}, env...), "BOOTSTRAP_KUBECONTEXT=kind-gone")
	if r = testenv.RunBinary(t, root, noCluster, bin, "publish", "local-host", "--reconcile"); r.Code != 1 || !strings.Contains(r.Stderr, "no cluster took the reconcile request") {
		t.Errorf("publish --reconcile with no cluster: exit %d\n%s", r.Code, r.Stderr)
	}

	// A wait that runs out names what blocks with Flux's own reason,
	// streams Flux's warnings while it waits, and exits 1.
	cluster.CreateYAML(t, ctx, `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: broken, namespace: flux-system}
spec: {interval: 1m, retryInterval: 2s, timeout: 30s, prune: true, path: ./no/such/path, sourceRef: {kind: OCIRepository, name: flux-system}}
`)
	timeoutEnv := append(append([]string{}, env...), "LOCAL_RECONCILE_TIMEOUT=15s")
	r = testenv.RunBinary(t, root, timeoutEnv, bin, append(args, "--wait-for", "broken", "--wait-for", "never-there")...)
	_, blocking, _ := strings.Cut(r.Stderr, "Blocking:\n")
	// Flux retries every 2 s, so the wait may end while the condition is
	// False or back to Unknown: either way the failure's reason is named.
	if r.Code != 1 || !strings.Contains(blocking, "  Kustomization flux-system/broken: Ready=") || !strings.Contains(blocking, "ArtifactFailed: kustomization path not found") ||
		!strings.Contains(blocking, "Kustomization flux-system/never-there: not found yet") ||
		// Not waited for, but not Ready either: what blocks a chain is
		// often further up (here the real tree's CAPI parts).
		!strings.Contains(blocking, "  Kustomization flux-system/clusters: ") ||
		!strings.Contains(r.Stderr, "not Ready within LOCAL_RECONCILE_TIMEOUT (15s)") {
		t.Errorf("timeout: exit %d\n%s", r.Code, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "! Kustomization flux-system/broken: ArtifactFailed"); n != 1 {
		t.Errorf("Flux's warning must be streamed once, not %d times:\n%s", n, r.Stderr)
	}

	// A pivot under way (krops-pivot suspended Flux here before the move):
	// the seed changes nothing; it refuses alone, and leaves the cluster to
	// the pivot as bootstrap's step.
	if err := cluster.Client.Patch(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": map[string]any{"name": "broken", "namespace": "flux-system"}}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"krops.io/suspended-by-pivot":"local-seed-test"}},"spec":{"suspend":true}}`))); err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	r = testenv.RunBinary(t, root, env, bin, args...)
	if r.Code != 2 || !strings.Contains(r.Stderr, "a pivot is under way on this cluster: pivot run local-seed-test suspended Flux here (Kustomization flux-system/broken carries krops.io/suspended-by-pivot); nothing was changed. Finish the pivot with `task pivot ENV=local-host`") {
		t.Errorf("seed mid-pivot: exit %d, want 2\n%s", r.Code, r.Stderr)
	}
	r = testenv.RunBinary(t, root, env, bin, append(args, "--from-bootstrap")...)
	if r.Code != 0 || !strings.Contains(r.Stderr, "not seeding it again; the pivot resumes next") {
		t.Errorf("seed --from-bootstrap mid-pivot: exit %d, want 0\n%s", r.Code, r.Stderr)
	}
	if w := rec.Writes(); len(w) != 0 {
		t.Errorf("the seed wrote to a cluster mid-pivot:\n%s", strings.Join(w, "\n"))
	}
}

// artifactEnv is where the seed pushes the config artifact (sync = oci), a
// registry on loopback, and the revision it stamps on it.
func artifactEnv(registry string) []string {
	host, port, _ := strings.Cut(registry, ":")
	return []string{"REGISTRY_HOST=" + host, "REGISTRY_PORT=" + port, "KROPS_OCI_GIT_SHA=0123456789abcdef0123456789abcdef01234567",
		"KROPS_OCI_GIT_REF=main", "KROPS_OCI_SOURCE_URL=https://github.com/kropsdev/krops"}
}

// TestMain fails the package if a process a test started (a plugin, an API
// server, a controller) outlives the tests.
func TestMain(m *testing.M) { sdktest.Main(m) }
