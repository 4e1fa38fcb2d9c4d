package main_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/kit/configartifact"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/lock"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

var clusterGVK = schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"}

var teardownConfig = testenv.BootstrapTOML(func() testenv.Env {
	e := testenv.LocalHost()
	e.Tables = "[environments.local-host.teardown]\ncapi-workloads = [\"local-workload\"]\nmgmt-container-prefix = \"local-management\""
	return e
}(), testenv.Env{Name: "azure", Provider: "azure", Sync: "github", MgmtCluster: "swedencentral-management", ReadyTimeout: "40m",
	InfraNamespace: "capz-system", InfraName: "azure",
	Tables: "[environments.azure.teardown]\nmanual = \"1. Delete the resource groups: az group delete --name <group> --yes\""})

// teardownEngine is a STAND-IN for the docker CLI (no engine runs here):
// it answers kind's listing of the "krops-local-host" cluster's node until `rm`
// removes it, lists local-host's management containers (and one whose name
// only starts like them), and logs every call.
const teardownEngine = `#!/bin/sh
echo "$*" >> "@DIR@/log"
case "$1" in
info) exit 0 ;;
--version) echo "Docker version 28.2.2, build e6534b4" ;;
ps)
	case "$*" in
	*"name=^local-management"*) [ -f "@DIR@/containers-removed" ] || printf 'local-management-lb\nlocal-management-control-plane-x1\nlocal-managementish\n' ;;
	*"io.x-k8s.kind.cluster=krops-local-host"*) [ -f "@DIR@/deleted" ] || echo krops-local-host-control-plane ;;
	*) [ -f "@DIR@/deleted" ] || echo krops-local-host ;;
	esac ;;
rm)
	case "$*" in
	*krops-local-host-control-plane*) touch "@DIR@/deleted" ;;
	*krops-registry*) touch "@DIR@/containers-removed" ;;
	esac ;;
*) echo "stand-in engine: unexpected $*" >&2; exit 2 ;;
esac
`

type site struct {
	kind      *testenv.Cluster
	workload  *testenv.Cluster
	capi      *testenv.Controllers
	rec       *testenv.APIRecorder
	dir, bin  string
	engineDir string
	env       []string
	ctx       context.Context
	stuck     atomic.Value // string: a DevCluster whose stand-in provider never lets go
}

// newSite is kind as bootstrap leaves it for local-host, before the pivot:
// the real Cluster API manager (with webhooks) doing the deletions, the real
// Flux controllers pruning, two Clusters, a Kustomization that owns a
// Service of type LoadBalancer, the operator's provider objects, a
// FluxInstance and krops's Secrets. The binary reaches kind through a
// recording proxy, which gives the order of its requests.
func newSite(t *testing.T) *site {
	t.Helper()
	s := newBase(t, teardownConfig, []string{"docker", "azure"}, true)
	ctx := s.ctx

	// An artifact with a Service of type LoadBalancer, applied by the real
	// kustomize-controller.
	reg := testenv.Registry(t)
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "apps"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "apps", "svc.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: ingress, namespace: default}\nspec: {type: LoadBalancer, ports: [{port: 443}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What an ordinary Kustomization applied: the teardown must not prune
	// it (the host takes it along).
	if err := os.MkdirAll(filepath.Join(src, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "config", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied, namespace: default}\ndata: {k: v}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: src, Paths: []string{"apps", "config"}, Revision: "main@sha1:0000000000000000000000000000000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := configartifact.Push(ctx, a, reg.Host+"/krops:latest", configartifact.PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata: {name: flux-system, namespace: flux-system}\nspec: {interval: 1m, url: oci://%s/krops, insecure: true, ref: {tag: latest}}\n", reg.Host),
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec: {interval: 1m, prune: true, path: ./apps, sourceRef: {kind: OCIRepository, name: flux-system}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: clusters, namespace: flux-system}\nspec: {interval: 1m, prune: true, suspend: false, path: ./nothing, sourceRef: {kind: OCIRepository, name: flux-system}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: config, namespace: flux-system}\nspec: {interval: 1m, prune: true, path: ./config, sourceRef: {kind: OCIRepository, name: flux-system}}\n",
		// No helm-controller runs here: the HelmRelease shows the order of
		// krops's requests only.
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: cert-manager}\n",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: cert-manager, namespace: cert-manager}\nspec: {interval: 1h, chart: {spec: {chart: cert-manager, sourceRef: {kind: HelmRepository, name: jetstack, namespace: flux-system}}}}\n",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: capi-system}\n",
		"apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: CoreProvider\nmetadata: {name: cluster-api, namespace: capi-system}\nspec: {version: v1.14.2}\n",
		"apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: InfrastructureProvider\nmetadata: {name: docker, namespace: capi-system}\nspec: {version: v1.14.2}\n",
		"apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata: {name: flux, namespace: flux-system}\nspec: {distribution: {version: 2.x, registry: ghcr.io/fluxcd}}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: sops-age, namespace: default}\nstringData: {age.agekey: not-a-real-key}\n",
	} {
		s.kind.CreateYAML(t, ctx, d)
	}
	s.clusters(t, "local-management", "local-workload")
	// local-workload is a second API server, reached through the
	// kubeconfig Secret Cluster API would write (a STAND-IN: no provider
	// provisions it here); Flux on kind applies the same Service there.
	s.workload = testenv.APIServer(t, testenv.ClusterOptions{Name: "local-workload"})
	kc, err := os.ReadFile(s.workload.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s.kind.CreateYAML(t, ctx, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: local-workload-kubeconfig, namespace: default, labels: {cluster.x-k8s.io/cluster-name: local-workload}}\ntype: cluster.x-k8s.io/secret\ndata: {value: %s}\n", base64.StdEncoding.EncodeToString(kc)))
	s.kind.CreateYAML(t, ctx, "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: workload-apps, namespace: default}\nspec: {interval: 1m, prune: true, path: ./apps, sourceRef: {kind: OCIRepository, name: flux-system, namespace: flux-system}, kubeConfig: {secretRef: {name: local-workload-kubeconfig}}}\n")
	// Flux has applied the Services and the ConfigMap before the teardown
	// starts.
	s.waitFor(t, "the LoadBalancer Services and the ConfigMap from Flux", func() bool {
		var svc corev1.Service
		var cm corev1.ConfigMap
		return s.kind.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "ingress"}, &svc) == nil &&
			s.workload.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "ingress"}, &svc) == nil &&
			s.kind.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "applied"}, &cm) == nil
	})
	return s
}

// clusters creates Clusters whose infrastructure is a DevCluster (its
// provider is a STAND-IN here).
func (s *site) clusters(t *testing.T, names ...string) {
	t.Helper()
	for _, c := range names {
		s.kind.CreateYAML(t, s.ctx, fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: DevCluster\nmetadata: {name: %s, namespace: default, annotations: {krops.io/test: x}}\nspec: {backend: {inMemory: {}}}\n", c))
		s.kind.CreateYAML(t, s.ctx, fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: %s, namespace: default}\nspec: {infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: %s}}\n", c, c))
	}
}

// newBase is kind with the real Cluster API manager (and, with flux, the
// real Flux controllers), reached by the binary through a recording proxy,
// the given bootstrap.toml and plugins, and a STAND-IN engine for kind.
func newBase(t *testing.T, config string, plugins []string, flux bool) *site {
	t.Helper()
	return newBaseWith(t, config, plugins, flux, false)
}

// newBaseWith is newBase; with stack, the whole real Cluster API stack runs
// (core, kubeadm, KCP, CAPD's in-memory backend) instead of the core
// manager and the stand-in infrastructure.
func newBaseWith(t *testing.T, config string, plugins []string, flux, stack bool) *site {
	t.Helper()
	s := &site{}
	s.stuck.Store("")
	s.kind = testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-krops-local-host", Webhooks: true,
		CRDs: []testenv.CRDSet{testenv.CAPICore, testenv.CAPD, testenv.CAPIOperator, testenv.FluxSource, testenv.FluxKustomize, testenv.FluxHelm, testenv.FluxOperator}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.ctx = ctx
	if stack {
		s.capi = testenv.RunClusterAPIStack(t, s.kind)
	} else {
		s.capi = testenv.RunClusterAPI(t, s.kind)
		go s.standInInfrastructure(ctx)
	}
	if flux {
		testenv.Flux(t, s.kind)
	}
	s.rec = testenv.NewAPIRecorder(t, s.kind.Config)
	s.dir = t.TempDir()
	s.bin = builds.Binary(t, ".", "krops-sweep")
	pluginDir := filepath.Join(s.dir, "plugins")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range plugins {
		sdktest.Install(t, pluginDir, "github.com/kropsdev/krops/plugins/"+name, name)
	}
	files := map[string]string{"bootstrap.toml": config}
	images, err := os.ReadFile("../../airgap/images.txt")
	if err != nil {
		t.Fatal(err)
	}
	files["airgap/images.txt"] = string(images)
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(s.dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.engineDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(s.engineDir, "docker"), []byte(strings.ReplaceAll(teardownEngine, "@DIR@", s.engineDir)), 0o755); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"PATH=" + sdktest.PathWithoutEngines(t, "", s.engineDir), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + s.dir, "XDG_STATE_HOME=" + filepath.Join(s.dir, "state"),
		"KROPS_PLUGIN_DIR=" + pluginDir, "KUBECONFIG=" + s.rec.Kubeconfig(t, "kind-krops-local-host"), "MGMT_KUBECONFIG=" + filepath.Join(s.dir, "no-mgmt.yaml"),
		"CLUSTER_DELETE_TIMEOUT=90s", "PROVIDER_DELETE_TIMEOUT=30s"}
	return s
}

func (s *site) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *site) run(t *testing.T, extraEnv []string, args ...string) testenv.Result {
	t.Helper()
	return testenv.RunBinary(t, s.dir, append(append([]string{}, s.env...), extraEnv...), s.bin, args...)
}

// standInInfrastructure is a STAND-IN for CAPD (it does not run here): it
// holds a finalizer on every DevCluster and lets go half a second after the
// DevCluster is deleted, as a provider does once the infrastructure is gone
// (never for s.stuck).
func (s *site) standInInfrastructure(ctx context.Context) {
	const fin = "stand-in.krops.io/infrastructure"
	gvk := schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevClusterList"}
	for ctx.Err() == nil {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := s.kind.Client.List(ctx, list); err == nil {
			for i := range list.Items {
				u := &list.Items[i]
				fins := u.GetFinalizers()
				switch {
				case u.GetDeletionTimestamp() == nil && !slices.Contains(fins, fin):
					u.SetFinalizers(append(fins, fin))
					_ = s.kind.Client.Update(ctx, u)
				case u.GetDeletionTimestamp() != nil && u.GetName() != s.stuck.Load() && time.Since(u.GetDeletionTimestamp().Time) > 500*time.Millisecond:
					u.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == fin }))
					_ = s.kind.Client.Update(ctx, u)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *site) exists(t *testing.T, gvk schema.GroupVersionKind, ns, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := s.kind.Client.Get(s.ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func (s *site) kindDeleted() bool {
	_, err := os.Stat(filepath.Join(s.engineDir, "deleted"))
	return err == nil
}

// index of the first request matching method and a path suffix.
func index(reqs []string, method, suffix string) int {
	for i, r := range reqs {
		if strings.HasPrefix(r, method+" ") && strings.HasSuffix(r, suffix) {
			return i
		}
	}
	return -1
}

// The local-host teardown on kind, through the binary: a dry run changes
// nothing; then the real controllers carry the teardown out in order and
// kind goes last.
func TestTeardownLocalHostInOrder(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newSite(t)
	r := s.run(t, nil, "local-host", "--dry-run")
	if r.Code != 0 || !strings.Contains(r.Stderr, "would delete Kustomization flux-system/apps (owns Services default/ingress)") ||
		!strings.Contains(r.Stderr, "would delete Kustomization default/workload-apps (owns Services default/ingress on local-workload)") ||
		!strings.Contains(r.Stderr, "would delete Cluster default/local-workload") || !strings.Contains(r.Stderr, "would delete Cluster default/local-management") ||
		!strings.Contains(r.Stderr, "would remove the controller host kind") ||
		!strings.Contains(r.Stderr, "would suspend HelmRelease cert-manager/cert-manager") ||
		!strings.Contains(r.Stderr, "would delete Kustomization flux-system/config (Flux's controllers still run") ||
		strings.Count(r.Stderr, "would suspend Kustomization flux-system/config") != 1 {
		t.Fatalf("dry run: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if w := s.rec.Writes(); len(w) != 0 {
		t.Fatalf("the dry run wrote:\n%s", strings.Join(w, "\n"))
	}
	if s.kindDeleted() {
		t.Fatal("the dry run deleted kind")
	}

	// No helm-controller runs here, as when it is busy: krops releases
	// Flux's finalizer of the suspended HelmRelease itself after its grace;
	// another finalizer it leaves, and the HelmRelease is left to the Flux
	// Operator's uninstall with a warning instead of failing the teardown.
	hr := &unstructured.Unstructured{}
	hr.SetGroupVersionKind(schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"})
	if err := s.kind.Client.Get(s.ctx, client.ObjectKey{Namespace: "cert-manager", Name: "cert-manager"}, hr); err != nil {
		t.Fatal(err)
	}
	hr.SetFinalizers([]string{"finalizers.fluxcd.io", "example.com/audit"})
	if err := s.kind.Client.Update(s.ctx, hr); err != nil {
		t.Fatal(err)
	}

	s.rec.Reset()
	r = s.run(t, []string{"PROVIDER_DELETE_TIMEOUT=20s"}, "local-host", "--output", "json")
	if r.Code != 0 {
		t.Fatalf("teardown: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "released HelmRelease cert-manager/cert-manager: its controller had not finalized it after 10s") ||
		!strings.Contains(r.Stderr, "HelmRelease cert-manager/cert-manager still there after 20s: no Flux controller finalized it") {
		t.Errorf("the HelmRelease no controller finalizes was not released and reported:\n%s", r.Stderr)
	}
	if err := s.kind.Client.Get(s.ctx, client.ObjectKey{Namespace: "cert-manager", Name: "cert-manager"}, hr); err != nil ||
		!slices.Equal(hr.GetFinalizers(), []string{"example.com/audit"}) {
		t.Errorf("the HelmRelease should keep only the other finalizer: %v %v", hr.GetFinalizers(), err)
	}
	writes := s.rec.Writes()
	order := []int{
		index(writes, "DELETE", "/kustomizations/apps"),
		index(writes, "PATCH", "/kustomizations/clusters"),
		index(writes, "DELETE", "/clusters/local-workload"),
		index(writes, "DELETE", "/coreproviders/cluster-api"),
		index(writes, "DELETE", "/fluxinstances/flux"),
		index(writes, "DELETE", "/secrets/sops-age"),
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] < 0 || order[i] < 0 || order[i-1] > order[i] {
			t.Fatalf("requests out of order (%v):\n%s", order, strings.Join(writes, "\n"))
		}
	}
	// Flux's objects went after the providers and before the FluxInstance,
	// each applier suspended before its deletion; the real
	// kustomize-controller finalized them without pruning.
	for _, o := range []struct{ first, then string }{
		{"DELETE /coreproviders/cluster-api", "DELETE /kustomizations/config"},
		{"PATCH /kustomizations/config", "DELETE /kustomizations/config"},
		{"PATCH /helmreleases/cert-manager", "DELETE /helmreleases/cert-manager"},
		{"DELETE /kustomizations/config", "DELETE /fluxinstances/flux"},
		{"DELETE /kustomizations/clusters", "DELETE /fluxinstances/flux"},
		{"DELETE /helmreleases/cert-manager", "DELETE /fluxinstances/flux"},
		{"DELETE /ocirepositories/flux-system", "DELETE /fluxinstances/flux"},
	} {
		fm, fs, _ := strings.Cut(o.first, " ")
		tm, ts, _ := strings.Cut(o.then, " ")
		if f, th := index(writes, fm, fs), index(writes, tm, ts); f < 0 || th < 0 || f > th {
			t.Errorf("%s must come before %s:\n%s", o.first, o.then, strings.Join(writes, "\n"))
		}
	}
	if s.exists(t, schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}, "flux-system", "config") {
		t.Error("Kustomization flux-system/config is still there")
	}
	var applied corev1.ConfigMap
	if err := s.kind.Client.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "applied"}, &applied); err != nil {
		t.Errorf("what the suspended Kustomization applied was pruned (it goes with the host): %v", err)
	}
	// The infrastructure provider went before its core, per the order.
	if index(writes, "DELETE", "/infrastructureproviders/docker") > order[3] {
		t.Errorf("the core provider went before the infrastructure provider:\n%s", strings.Join(writes, "\n"))
	}
	if index(writes, "PATCH", "/kustomizations/apps") >= 0 {
		t.Error("the load balancer's Kustomization was suspended before deletion: its prune would be skipped")
	}
	// On kind, before a pivot, the management Cluster is an ordinary one:
	// it goes through its Cluster object, or its containers would outlive
	// kind.
	if s.exists(t, clusterGVK, "default", "local-workload") || s.exists(t, clusterGVK, "default", "local-management") {
		t.Error("local-workload and, on kind, local-management must be gone")
	}
	var svc corev1.Service
	if err := s.kind.Client.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "ingress"}, &svc); !apierrors.IsNotFound(err) {
		t.Errorf("the LoadBalancer Service is still there: %v", err)
	}
	if err := s.workload.Client.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "ingress"}, &svc); !apierrors.IsNotFound(err) {
		t.Errorf("the workload cluster's LoadBalancer Service is still there: %v", err)
	}
	if d := index(writes, "DELETE", "/kustomizations/workload-apps"); d < 0 || d > index(writes, "DELETE", "/clusters/local-workload") {
		t.Errorf("the workload's load balancer Kustomization must go before its Cluster:\n%s", strings.Join(writes, "\n"))
	}
	if !s.kindDeleted() {
		t.Errorf("kind was not deleted")
	}
	for _, want := range []string{`"controller_host": "kind"`, `"Cluster default/local-workload"`, `"Cluster default/local-management"`, `"kind cluster (kind-krops-local-host)"`, `"Secret default/sops-age"`, `"Kustomization flux-system/config"`, `"HelmRelease cert-manager/cert-manager"`, `"OCIRepository flux-system/flux-system"`} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("summary lacks %s:\n%s", want, r.Stdout)
		}
	}
}

// Unknown state stops before the step that needed it, keeps kind, exits 3;
// FORCE_KIND_DELETE removes kind anyway and names what is left; the lock
// and a manual environment are refused.
func TestTeardownGuards(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newSite(t)

	// The lock of the kind cluster is held by a live process.
	l, err := lock.Acquire(lock.Options{Dir: filepath.Join(s.dir, "state", "krops", "locks"), Name: "kind-krops-local-host", Holder: lock.Holder{RunID: "someone-else"}})
	if err != nil {
		t.Fatal(err)
	}
	r := s.run(t, nil, "local-host")
	l.Release()
	if r.Code != 2 || !strings.Contains(r.Stderr, "someone-else") || len(s.rec.Writes()) != 0 {
		t.Fatalf("lock: exit %d\n%s\nwrites %v", r.Code, r.Stderr, s.rec.Writes())
	}

	// Azure is torn down by hand.
	r = s.run(t, nil, "azure")
	if r.Code != 2 || !strings.Contains(r.Stdout, "az group delete") {
		t.Errorf("manual: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}

	// Listing Clusters is refused (an RBAC-restricted user): exit 3,
	// nothing deleted from there on, kind kept.
	s.rec.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/clusters") {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"clusters is forbidden"}`, http.StatusForbidden)
			return true
		}
		return false
	})
	s.rec.Reset()
	r = s.run(t, nil, "local-host")
	if r.Code != 3 || !strings.Contains(r.Stderr, "listing Clusters in default: the state is unknown") || index(s.rec.Writes(), "DELETE", "/clusters/local-workload") >= 0 || s.kindDeleted() {
		t.Fatalf("forbidden: exit %d\n%s\nwrites %v", r.Code, r.Stderr, s.rec.Writes())
	}
	// A server that hangs past the query timeout: the same.
	s.rec.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/clusters") {
			select {
			case <-req.Context().Done():
			case <-time.After(time.Minute):
			}
			return true
		}
		return false
	})
	r = s.run(t, nil, "local-host", "--query-timeout", "3s")
	if r.Code != 3 || !strings.Contains(r.Stderr, "the state is unknown") || s.kindDeleted() {
		t.Fatalf("hanging: exit %d\n%s", r.Code, r.Stderr)
	}
	// The API server goes away after answering the host probe: every
	// later call breaks off.
	s.rec.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if req.URL.Path == "/version" {
			return false
		}
		panic(http.ErrAbortHandler)
	})
	r = s.run(t, nil, "local-host")
	if r.Code != 3 || !strings.Contains(r.Stderr, "the state is unknown") || s.kindDeleted() {
		t.Fatalf("server gone: exit %d\n%s", r.Code, r.Stderr)
	}
	s.rec.Intercept(nil)

	// A Cluster whose infrastructure never lets go: the wait runs out,
	// exit 3, kind kept.
	s.stuck.Store("local-workload")
	r = s.run(t, []string{"CLUSTER_DELETE_TIMEOUT=5s"}, "local-host")
	if r.Code != 3 || !strings.Contains(r.Stderr, "Cluster default/local-workload still there after 5s (CLUSTER_DELETE_TIMEOUT)") || s.kindDeleted() {
		t.Fatalf("stuck: exit %d\n%s", r.Code, r.Stderr)
	}
	// FORCE_KIND_DELETE=1 removes kind anyway and says what is orphaned.
	r = s.run(t, []string{"CLUSTER_DELETE_TIMEOUT=5s", "FORCE_KIND_DELETE=1"}, "local-host")
	if r.Code != 1 || !s.kindDeleted() || !strings.Contains(r.Stdout, "Cluster default/local-workload") || !strings.Contains(r.Stdout, "Left:") {
		t.Fatalf("forced: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}

	// No controller host at all, and no context of one: with kind's
	// container still on the engine the Kubernetes side is skipped and the
	// exit is not 0; with none, it is gone, and the rerun is a no-op.
	if err := os.Remove(filepath.Join(s.engineDir, "deleted")); err != nil {
		t.Fatal(err)
	}
	r = s.run(t, []string{"KUBECONFIG=" + filepath.Join(s.dir, "none.yaml")}, "local-host")
	if r.Code != 1 || !strings.Contains(r.Stderr, "no controller host answered") {
		t.Errorf("no host, kind's container there: exit %d\n%s", r.Code, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(s.engineDir, "deleted"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = s.run(t, []string{"KUBECONFIG=" + filepath.Join(s.dir, "none.yaml")}, "local-host")
	if r.Code != 0 || !strings.Contains(r.Stdout+r.Stderr, "already gone") {
		t.Errorf("nothing left: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// A teardown ended after every step (as a crash would) finishes the job
// when rerun, with the same end state as one run.
func TestTeardownRerunAfterEveryStep(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newSite(t)
	for _, step := range []string{"load-balancers", "suspend-flux", "clusters", "providers", "cloud"} {
		r := s.run(t, []string{"KROPS_TEST_TEARDOWN_STOP_AFTER=" + step}, "local-host")
		if r.Code != 1 || !strings.Contains(r.Stderr, "stopped on request after a step "+step) || s.kindDeleted() {
			t.Fatalf("stop after %s: exit %d\n%s", step, r.Code, r.Stderr)
		}
	}
	r := s.run(t, nil, "local-host")
	if r.Code != 0 || !s.kindDeleted() {
		t.Fatalf("final rerun: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if s.exists(t, clusterGVK, "default", "local-workload") || s.exists(t, clusterGVK, "default", "local-management") {
		t.Error("local-workload and, on kind, local-management must be gone")
	}
	for _, k := range []struct {
		gvk      schema.GroupVersionKind
		ns, name string
	}{
		{schema.GroupVersionKind{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Kind: "CoreProvider"}, "capi-system", "cluster-api"},
		{schema.GroupVersionKind{Group: "fluxcd.controlplane.io", Version: "v1", Kind: "FluxInstance"}, "flux-system", "flux"},
		{schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}, "flux-system", "apps"},
		{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, "default", "sops-age"},
	} {
		if s.exists(t, k.gvk, k.ns, k.name) {
			t.Errorf("%s %s/%s is still there", k.gvk.Kind, k.ns, k.name)
		}
	}
}

// aws on kind: every Cluster but the management one is deleted through
// Cluster API and confirmed gone before the cloud sweep (the real aws
// plugin against moto) makes its first deletion; the management Cluster is
// never deleted through its own object (the sweep removes it); kind goes
// last.
func TestTeardownAWSDeletesWorkloadsBeforeTheSweep(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s, m, proxy := newAWSSite(t)
	var atFirstDeletion []string
	var once sync.Once
	yes := true
	proxy.Add(testenv.Rule{Mutating: &yes, Respond: func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(clusterGVK.GroupVersion().WithKind("ClusterList"))
			if err := s.kind.Client.List(s.ctx, list, client.InNamespace("default")); err == nil {
				for _, c := range list.Items {
					atFirstDeletion = append(atFirstDeletion, c.GetName())
				}
			}
		})
		proxy.Forward(w, r)
	}})
	// The site's kind is named for local-host: name it for aws.
	env := append([]string{"KROPS_AWS_POLL_INTERVAL=0", "KROPS_KIND_CLUSTER=krops-local-host"}, m.Environ(proxy.URL)...)
	// Credentials or an endpoint that do not work are found before the
	// first deletion: exit 3, nothing changed on kind.
	r := s.run(t, append(append([]string{}, env...), "AWS_ENDPOINT_URL=http://127.0.0.1:1"), "aws")
	if r.Code != 3 || len(s.rec.Writes()) != 0 {
		t.Fatalf("unreachable cloud: exit %d, writes %v\n%s", r.Code, s.rec.Writes(), r.Stderr)
	}
	r = s.run(t, env, "aws")
	if r.Code != 0 {
		t.Fatalf("teardown: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Join(atFirstDeletion, ",") != "eu-north-1-management" {
		t.Errorf("at the sweep's first deletion kind still held Clusters %v; want only the management one", atFirstDeletion)
	}
	writes := s.rec.Writes()
	if index(writes, "DELETE", "/clusters/eu-north-1-management") >= 0 {
		t.Errorf("the management Cluster was deleted through its own object:\n%s", strings.Join(writes, "\n"))
	}
	if index(writes, "DELETE", "/clusters/eu-north-1-workload") < 0 || index(writes, "DELETE", "/clusters/eu-west-1-workload") < 0 {
		t.Errorf("the workload Clusters were not deleted:\n%s", strings.Join(writes, "\n"))
	}
	if !s.kindDeleted() {
		t.Error("kind was not deleted")
	}
}

// aws after the pivot: the management cluster is the controller host, and
// the cloud sweep (the real aws plugin against moto) deletes it. The
// providers go before the sweep's first deletion, so nothing recreates what
// it deletes and nothing queries the host after it; once the management EKS
// cluster is deleted the host stops answering (the harness's API server
// breaks off every call, as a deleted endpoint does), its context is
// removed, the exit is 0, and a rerun is a no-op that exits 0 too.
func TestTeardownAWSAfterThePivotEndsWithTheManagementCluster(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s, m, proxy := newAWSSite(t)
	s.kind.CreateYAML(t, s.ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: capi-system}\n")
	s.kind.CreateYAML(t, s.ctx, "apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: CoreProvider\nmetadata: {name: cluster-api, namespace: capi-system}\nspec: {version: v1.14.2}\n")
	// The controllers' credentials the pivot applied (the aws plugin's
	// teardown policy names them): they go with the providers.
	for _, ns := range []string{"capa-system", "ack-system"} {
		s.kind.CreateYAML(t, s.ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n")
		s.kind.CreateYAML(t, s.ctx, "apiVersion: v1\nkind: Secret\nmetadata: {name: aws-credentials, namespace: "+ns+"}\nstringData: {credentials: x}\n")
	}
	mgmt := s.rec.Kubeconfig(t, "krops-aws-mgmt")
	// What the pivot leaves on the management cluster: its run, which is
	// what refuses a new bootstrap next to it.
	s.kind.CreateRunMetadataFor(t, s.ctx, "aws-20261204t120000z", "aws")
	// `task bootstrap ENV=aws` starts with `krops-kind preflight aws`: the
	// real binary, against moto directly (the proxy below records the
	// teardown's first cloud write).
	kindBin := builds.Binary(t, "../krops-kind", "krops-kind")
	preflight := func() testenv.Result {
		t.Helper()
		env := append([]string{"KUBECONFIG=" + filepath.Join(s.dir, "kind-is-gone.yaml"), "MGMT_KUBECONFIG=" + mgmt}, m.Environ("")...)
		return testenv.RunBinary(t, s.dir, append(append([]string{}, s.env...), env...), kindBin, "preflight", "aws")
	}
	// The pivot check's own line is what is asserted: moto's Service
	// Quotas does not know the Elastic IP quota, so the quota checks fail
	// here either way (and the exit is 2 either way).
	pivotCheck := func(r testenv.Result) string {
		for _, l := range strings.Split(r.Stdout+r.Stderr, "\n") {
			if strings.Contains(l, "earlier pivot") {
				return strings.TrimSpace(l)
			}
		}
		return ""
	}
	if r := preflight(); r.Code != 2 || !strings.HasPrefix(pivotCheck(r), "✗") || !strings.Contains(pivotCheck(r), "run aws-20261204t120000z pivoted into the management cluster behind context krops-aws-mgmt") {
		t.Fatalf("bootstrap's preflight next to the live management cluster: exit %d, want 2 (refused)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}

	var gone atomic.Bool
	var atFirstCloudDeletion []string
	var once sync.Once
	yes := true
	proxy.Add(testenv.Rule{Mutating: &yes, Respond: func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { atFirstCloudDeletion = s.rec.Writes() })
		proxy.Forward(w, r)
		if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/clusters/default_eu-north-1-management-control-plane") {
			gone.Store(true)
		}
	}})
	s.rec.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if gone.Load() {
			panic(http.ErrAbortHandler)
		}
		return false
	})
	env := append([]string{"KROPS_AWS_POLL_INTERVAL=0", "KROPS_KIND_CLUSTER=krops-local-host", "KUBECONFIG=" + filepath.Join(s.dir, "kind-is-gone.yaml"), "MGMT_KUBECONFIG=" + mgmt},
		m.Environ(proxy.URL)...)
	// The stand-in engine lists no kind container: kind went with the pivot.
	if err := os.WriteFile(filepath.Join(s.engineDir, "deleted"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The plugin is started once for the whole run (the preflight's read
	// of the cloud and the sweep use the same process): a wrapper counts.
	plugin := filepath.Join(s.dir, "plugins", "krops-provider-aws")
	starts := filepath.Join(s.dir, "plugin-starts")
	if err := os.Rename(plugin, plugin+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho start >> '"+starts+"'\nexec '"+plugin+".real' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, env, "aws")
	if r.Code != 0 || !strings.Contains(r.Stderr, "controller host: the management cluster (context krops-aws-mgmt)") {
		t.Fatalf("teardown: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if b, err := os.ReadFile(starts); err != nil || strings.Count(string(b), "start") != 1 {
		t.Errorf("the aws plugin was started %d times in one teardown, want once (%v)", strings.Count(string(b), "start"), err)
	}
	if !gone.Load() {
		t.Fatal("the sweep never deleted the management EKS cluster")
	}
	for _, ns := range []string{"capa-system", "ack-system"} {
		if index(atFirstCloudDeletion, "DELETE", "/namespaces/"+ns+"/secrets/aws-credentials") < 0 {
			t.Errorf("Secret %s/aws-credentials was not deleted before the sweep's first deletion; writes until then:\n%s", ns, strings.Join(atFirstCloudDeletion, "\n"))
		}
	}
	if !strings.Contains(r.Stdout, "Secret capa-system/aws-credentials") {
		t.Errorf("the summary does not list the controllers' credentials as deleted:\n%s", r.Stdout)
	}
	if index(atFirstCloudDeletion, "DELETE", "/coreproviders/cluster-api") < 0 {
		t.Errorf("the providers were not deleted before the sweep's first deletion; writes until then:\n%s", strings.Join(atFirstCloudDeletion, "\n"))
	}
	writes := s.rec.Writes()
	if index(writes, "DELETE", "/clusters/eu-north-1-management") >= 0 {
		t.Errorf("the management Cluster was deleted through its own object:\n%s", strings.Join(writes, "\n"))
	}
	if index(atFirstCloudDeletion, "DELETE", "/clusters/eu-north-1-workload") < 0 || index(atFirstCloudDeletion, "DELETE", "/clusters/eu-west-1-workload") < 0 {
		t.Errorf("the workload Clusters were not deleted before the sweep:\n%s", strings.Join(atFirstCloudDeletion, "\n"))
	}
	if has, err := kubecfg.HasContext(mgmt, "krops-aws-mgmt"); err != nil || has {
		t.Errorf("context krops-aws-mgmt is still in %s after the sweep removed its cluster (%v)", mgmt, err)
	}
	if !strings.Contains(r.Stdout, "by the cloud sweep") {
		t.Errorf("the summary does not say the management cluster went with the sweep:\n%s", r.Stdout)
	}
	again := s.run(t, env, "aws")
	if again.Code != 0 || !strings.Contains(again.Stdout+again.Stderr, "already gone") {
		t.Errorf("rerun: exit %d\n%s\n%s", again.Code, again.Stdout, again.Stderr)
	}
	// And a new bootstrap is no longer refused.
	if r := preflight(); !strings.HasPrefix(pivotCheck(r), "✔ earlier pivot: none (no context krops-aws-mgmt") {
		t.Errorf("bootstrap's preflight after the teardown: pivot check %q, want passed with no earlier pivot\n%s\n%s", pivotCheck(r), r.Stdout, r.Stderr)
	}
}

// newAWSSite is the aws environment's host (the harness's API server with
// the real Cluster API manager), its Clusters, the aws plugin, and moto
// holding the environment's footprint behind a fault proxy.
func newAWSSite(t *testing.T) (*site, *testenv.MotoServer, *testenv.FaultProxy) {
	t.Helper()
	s := newBase(t, awstest.BootstrapTOML, []string{"aws"}, false)
	m := testenv.Moto(t, testenv.MotoOptions{KeepEnv: true})
	awstest.Build(t, m.URL, awstest.Options{})
	proxy := testenv.NewFaultProxy(t, m.URL)
	s.clusters(t, "eu-north-1-management", "eu-north-1-workload", "eu-west-1-workload")
	return s, m, proxy
}

// local-talos: every Cluster goes, the management one included (the
// provider's policy: that releases the hardware).
func TestTeardownLocalTalosDeletesEveryCluster(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	config := strings.Replace(teardownConfig, "[environments.azure]", `[environments.local-talos]
provider = "talos"
sync = "github"
sync-path = "mgmt/local-talos"
mgmt-cluster = "local-talos-management"
mgmt-ready-timeout = "30m"
infra-provider-namespace = "capt-system"
infra-provider-name = "tinkerbell-tinkerbell"
provider-manifests = ["x.yaml"]

[environments.local-talos.teardown]
hardware-release = true

[environments.azure]`, 1)
	s := newBase(t, config, []string{"talos"}, false)
	s.clusters(t, "local-talos-management", "local-talos-workload")
	r := s.run(t, []string{"KROPS_KIND_CLUSTER=krops-local-host"}, "local-talos") // the site's kind
	if r.Code != 0 || s.exists(t, clusterGVK, "default", "local-talos-management") || s.exists(t, clusterGVK, "default", "local-talos-workload") || !s.kindDeleted() {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// local-host after the pivot: kind is gone, the management cluster answers
// through MGMT_KUBECONFIG and is the host; its containers go by prefix
// (exactly the prefix: local-managementish stays), the registry last.
func TestTeardownSelfManagedLocalHostRemovesItsContainers(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newBase(t, teardownConfig, []string{"docker"}, false)
	s.clusters(t, "local-management", "local-workload")
	mgmt := s.rec.Kubeconfig(t, "krops-local-host-mgmt")
	r := s.run(t, []string{"KUBECONFIG=" + filepath.Join(s.dir, "kind-is-gone.yaml"), "MGMT_KUBECONFIG=" + mgmt}, "local-host")
	if r.Code != 0 || !strings.Contains(r.Stderr, "controller host: the management cluster (context krops-local-host-mgmt)") {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if index(s.rec.Writes(), "DELETE", "/clusters/local-management") >= 0 {
		t.Error("the self-managed cluster was asked to delete itself through its Cluster object")
	}
	log, _ := os.ReadFile(filepath.Join(s.engineDir, "log"))
	var rms []string
	for _, l := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if strings.HasPrefix(l, "rm ") {
			rms = append(rms, l)
		}
	}
	want := []string{"rm -f -v local-management-lb", "rm -f -v local-management-control-plane-x1", "rm -f -v krops-registry"}
	if strings.Join(rms, "\n") != strings.Join(want, "\n") {
		t.Errorf("container removals:\n%s\nwant:\n%s", strings.Join(rms, "\n"), strings.Join(want, "\n"))
	}
	// The next bootstrap must not find a context for a cluster that is gone.
	if has, err := kubecfg.HasContext(mgmt, "krops-local-host-mgmt"); err != nil || has {
		t.Errorf("context krops-local-host-mgmt is still in %s after its cluster's containers went (%v)", mgmt, err)
	}
}

// local-host after the pivot, with the management cluster answering but
// none of its containers on the engine krops finds (another engine or
// socket, or other names): unknown state (exit 3). Nothing of the host is
// removed, the registry stays, and the context is kept, so a rerun with
// the right engine can finish.
func TestTeardownSelfManagedWithoutItsContainersIsUnknownState(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newBase(t, teardownConfig, []string{"docker"}, false)
	s.clusters(t, "local-management", "local-workload")
	mgmt := s.rec.Kubeconfig(t, "krops-local-host-mgmt")
	// The stand-in engine lists no local-management containers from now on.
	if err := os.WriteFile(filepath.Join(s.engineDir, "containers-removed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, []string{"KUBECONFIG=" + filepath.Join(s.dir, "kind-is-gone.yaml"), "MGMT_KUBECONFIG=" + mgmt}, "local-host")
	out := r.Stdout + r.Stderr
	if r.Code != 3 || !strings.Contains(out, "the container engine has no container named local-management or local-management-*") ||
		!strings.Contains(out, "nothing of the host was removed and its context is kept") || !strings.Contains(out, "CONTAINER_ENGINE or ENGINE_SOCK") {
		t.Fatalf("exit %d, want 3 naming the missing containers and the engine knobs\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	log, _ := os.ReadFile(filepath.Join(s.engineDir, "log"))
	if strings.Contains(string(log), "rm ") {
		t.Errorf("containers were removed on unknown state:\n%s", log)
	}
	if has, err := kubecfg.HasContext(mgmt, "krops-local-host-mgmt"); err != nil || !has {
		t.Errorf("context krops-local-host-mgmt was removed from %s although its cluster still answers (%v)", mgmt, err)
	}
}

// Two environments on one machine share the default context names. With
// the management cluster aws's (its run metadata says so), the local-host
// teardown refuses it (exit 2, naming both environments and the right
// teardown) and changes nothing, its aws workload Cluster included; so does
// its dry run.
func TestTeardownRefusesAnotherEnvironmentsHost(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newBase(t, teardownConfig, []string{"docker"}, false)
	s.clusters(t, "aws-management", "aws-workload")
	s.kind.CreateRunMetadataFor(t, s.ctx, "aws-20261201t191333z", "aws")
	s.kind.CreateYAML(t, s.ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: capa-system}\n")
	s.kind.CreateYAML(t, s.ctx, "apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: InfrastructureProvider\nmetadata: {name: aws, namespace: capa-system}\nspec: {version: v2.10.0}\n")
	mgmt := s.rec.Kubeconfig(t, "krops-local-host-mgmt")
	env := []string{"KUBECONFIG=" + filepath.Join(s.dir, "kind-is-gone.yaml"), "MGMT_KUBECONFIG=" + mgmt}
	for _, args := range [][]string{{"local-host", "--dry-run"}, {"local-host"}} {
		r := s.run(t, env, args...)
		out := r.Stdout + r.Stderr
		if r.Code != 2 || !strings.Contains(out, "carries run aws-20261201t191333z of environment aws, not local-host; nothing was changed") ||
			!strings.Contains(out, "task teardown ENV=aws") {
			t.Fatalf("%v on aws's management cluster: exit %d, want 2 naming both environments\n%s\n%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	if w := s.rec.Writes(); len(w) > 0 {
		t.Errorf("the refused teardown wrote to aws's management cluster:\n%s", strings.Join(w, "\n"))
	}
	if log, _ := os.ReadFile(filepath.Join(s.engineDir, "log")); strings.Contains(string(log), "rm ") {
		t.Errorf("the refused teardown removed containers:\n%s", log)
	}
	if has, err := kubecfg.HasContext(mgmt, "krops-local-host-mgmt"); err != nil || !has {
		t.Errorf("the refused teardown removed context krops-local-host-mgmt (%v)", err)
	}
	// Without the label (run metadata from an earlier krops), the
	// infrastructure provider is the evidence: aws's is refused too.
	var cm corev1.ConfigMap
	if err := s.kind.Client.Get(s.ctx, client.ObjectKey{Namespace: "flux-system", Name: "krops-run"}, &cm); err != nil {
		t.Fatal(err)
	}
	delete(cm.Labels, "krops.io/environment")
	if err := s.kind.Client.Update(s.ctx, &cm); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, env, "local-host")
	if r.Code != 2 || !strings.Contains(r.Stderr, "runs the infrastructure provider aws in capa-system, while local-host's is docker") {
		t.Fatalf("unlabelled run metadata on aws's cluster: exit %d, want 2 naming the provider\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if w := s.rec.Writes(); len(w) > 0 {
		t.Errorf("the refused teardown wrote to aws's management cluster:\n%s", strings.Join(w, "\n"))
	}
}

// A kind cluster whose bootstrap stopped in the seed serves neither Cluster
// API nor its operator: for a group it does not have at all the API server
// answers a plain-text 404, which must read as "nothing there" (discovery
// says the group is absent), so the teardown finishes and removes kind.
func TestTeardownOfAKindWithoutClusterAPI(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	bare := testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-krops-local-host"})
	s := newBase(t, teardownConfig, []string{"docker"}, false)
	rec := testenv.NewAPIRecorder(t, bare.Config)
	r := s.run(t, []string{"KUBECONFIG=" + rec.Kubeconfig(t, "kind-krops-local-host")}, "local-host")
	if r.Code != 0 || !s.kindDeleted() {
		t.Fatalf("teardown of a kind without Cluster API: exit %d (kind deleted: %t), want 0\n%s\n%s", r.Code, s.kindDeleted(), r.Stdout, r.Stderr)
	}
}

// The local-host teardown on kind against the real Cluster API stack: both
// clusters are provisioned for real (CAPD's in-memory backend); the
// teardown deletes the clusters teardown.capi-workloads names and, since
// kind is the host, the management Cluster, waits for the real cascade
// (KCP, Machine, DevMachine, DevCluster), and removes kind only once both
// are confirmed gone.
func TestTeardownLocalHostWithTheRealControllers(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newBaseWith(t, teardownConfig, []string{"docker"}, false, true)
	for _, name := range []string{"local-management", "local-workload"} {
		testenv.CreateInMemoryCluster(t, s.kind, "default", name)
	}
	for _, name := range []string{"local-management", "local-workload"} {
		testenv.WaitCluster(t, s.kind, "default", name, testenv.ClusterAvailable, 4*time.Minute)
	}
	r := s.run(t, nil, "local-host")
	if r.Code != 0 {
		t.Fatalf("teardown: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if s.exists(t, testenv.ClusterGVK, "default", "local-workload") {
		t.Error("the workload Cluster is still there after the teardown")
	}
	devMachines := &unstructured.UnstructuredList{}
	devMachines.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevMachineList"})
	if err := s.kind.Client.List(s.ctx, devMachines, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, m := range devMachines.Items {
		t.Errorf("DevMachine %s of a deleted cluster is left", m.GetName())
	}
	if s.exists(t, testenv.ClusterGVK, "default", "local-management") {
		t.Error("the management Cluster on kind is still there: its machines would outlive kind")
	}
	if !s.kindDeleted() {
		t.Errorf("kind was not removed after the workload cluster was confirmed gone:\n%s", r.Stderr)
	}
}

// A pivot that stopped after its move but before deleting kind: both
// answer, kind holds no Cluster, and the management cluster carries the
// run's metadata. The teardown runs there (on kind it would find nothing,
// delete kind and report success while the environment runs), deletes the
// workload, removes the management containers, kind, and the context.
func TestTeardownAfterAnUnfinishedPivotRunsOnTheManagementCluster(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newBase(t, teardownConfig, []string{"docker"}, false)
	s.clusters(t, "local-management", "local-workload")
	s.kind.CreateRunMetadata(t, s.ctx, "local-host-20261201t191333z")
	// The same API server behind both contexts: kind's and the
	// management cluster's; what tells them apart is the evidence.
	mgmt := s.rec.Kubeconfig(t, "krops-local-host-mgmt")
	r := s.run(t, []string{"MGMT_KUBECONFIG=" + mgmt}, "local-host", "--output", "json")
	if r.Code != 0 || !strings.Contains(r.Stdout, `"controller_host": "the management cluster"`) {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !s.exists(t, clusterGVK, "default", "local-management") || s.exists(t, clusterGVK, "default", "local-workload") {
		t.Error("on the management cluster, local-workload must be gone and local-management (self-managed) kept")
	}
	if !s.kindDeleted() {
		t.Error("the kind cluster the unfinished pivot left was not deleted")
	}
	log, _ := os.ReadFile(filepath.Join(s.engineDir, "log"))
	if !strings.Contains(string(log), "rm -f -v local-management-lb") {
		t.Errorf("the management cluster's containers were not removed:\n%s", log)
	}
	if has, err := kubecfg.HasContext(mgmt, "krops-local-host-mgmt"); err != nil || has {
		t.Errorf("context krops-local-host-mgmt is still in %s (%v)", mgmt, err)
	}
	for _, want := range []string{"left by an unfinished pivot", "context krops-local-host-mgmt in " + mgmt} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.Stdout)
		}
	}
}

// Kind answers, but the management context names a cluster that does not:
// the Clusters may have been moved there, so tearing kind down alone could
// report a live environment gone. Exit 3, nothing written, kind kept.
func TestTeardownStopsWhenKindAnswersAndTheManagementClusterDoesNot(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	s := newBase(t, teardownConfig, []string{"docker"}, false)
	s.clusters(t, "local-management", "local-workload")
	mgmt := s.rec.Kubeconfig(t, "krops-local-host-mgmt")
	kc, err := clientcmd.LoadFromFile(mgmt)
	if err != nil {
		t.Fatal(err)
	}
	kc.Clusters["krops-local-host-mgmt"].Server = "https://127.0.0.1:1"
	if err := clientcmd.WriteToFile(*kc, mgmt); err != nil {
		t.Fatal(err)
	}
	s.rec.Reset()
	r := s.run(t, []string{"MGMT_KUBECONFIG=" + mgmt}, "local-host")
	if r.Code != 3 || !strings.Contains(r.Stderr, "where an earlier pivot may have moved the Clusters") || !strings.Contains(r.Stderr, "config delete-context krops-local-host-mgmt") {
		t.Fatalf("exit %d, want 3 naming the management context\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if w := s.rec.Writes(); len(w) != 0 || s.kindDeleted() {
		t.Errorf("the teardown changed something on unknown state (kind deleted: %t):\n%s", s.kindDeleted(), strings.Join(w, "\n"))
	}
}
