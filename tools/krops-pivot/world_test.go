package main_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// world is one pivot's surroundings: "kind" and "target", two real
// kube-apiservers with the real Cluster API manager on kind, the real Flux
// Operator and Flux controllers on the target, a loopback registry and
// chart repository, and the docker provider plugin with a STAND-IN engine.
type world struct {
	kind, target *testenv.Cluster
	capiKind     *testenv.Controllers
	root         string // the repository (bootstrap.toml, trees)
	engineDir    string // the stand-in engine's log and state
	env          []string
	args         []string
	bin          string
	ctx          context.Context
	nodes        chan struct{} // closed: the stand-in kubelet registers a node
}

var worldConfig = testenv.BootstrapTOML(func() testenv.Env {
	e := testenv.LocalHost()
	e.ReadyTimeout = "2m"
	e.ProviderManifests = []string{"providers/namespaces.yaml", "providers/providers.yaml"}
	e.Keys = []string{`pivot-manifests = ["pivot/vars.yaml"]`, `pivot-sops-secrets = ["pivot/creds.sops.yaml"]`}
	e.Tables = `[environments.local-host.pivot-manifest-vars]
FROM_CONFIG = "set-in-bootstrap-toml"

[[environments.local-host.move-fallbacks]]
resource = "configmaps"
name = "global-identity"
manifest = "fallbacks/identity.yaml"`
	return e
}())

// treeProviders are local-host's Cluster API providers at the versions its
// tree pins (mgmt/local-host/capi-providers), without the addon provider
// this world does not run: on kind as the inventory Flux's install left,
// and on the target as the pivot's provider manifests.
func treeProviders(t testing.TB) []testenv.Provider {
	return testenv.TreeProviders(t, "../../mgmt/local-host/capi-providers")
}

func repoFiles(t testing.TB) map[string]string {
	var ns, providers strings.Builder
	for _, p := range treeProviders(t) {
		fmt.Fprintf(&ns, "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", p.Namespace)
		fmt.Fprintf(&providers, "---\napiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec: {version: %s}\n", p.Type, p.Name, p.Namespace, p.Version)
	}
	return map[string]string{
		"bootstrap.toml":              worldConfig,
		"providers/namespaces.yaml":   ns.String(),
		"providers/providers.yaml":    providers.String(),
		"pivot/vars.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pivot-vars, namespace: default}\ndata:\n  fromKind: ${FROM_KIND}\n  fromConfig: ${FROM_CONFIG}\n  withDefault: ${WITH_DEFAULT:=the-default}\n",
		"fallbacks/identity.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: global-identity, namespace: default}\ndata: {recreated: by-the-fallback}\n",
		"mgmt/local-host/synced.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: synced-on-the-management-cluster, namespace: default}\n",
	}
}

// engineScript is a STAND-IN for the docker CLI (no engine runs here). It
// answers what the docker provider and kind's library ask: the management
// cluster's published API port (the target server's), and kind's node
// containers until `rm` removes them. Every call is logged. The plugin
// runs it with a filtered environment, so its settings are written in.
const engineScript = `#!/bin/sh
STANDIN_DIR=@DIR@ STANDIN_API_PORT=@PORT@
echo "$*" >> "$STANDIN_DIR/log"
case "$1" in
info) exit 0 ;;
--version) echo "Docker version 28.2.2, build e6534b4" ;;
port) [ "$2" = local-management-lb ] || { echo "Error: No such container: $2" >&2; exit 1; }; echo "127.0.0.1:$STANDIN_API_PORT" ;;
ps)
	[ -f "$STANDIN_DIR/deleted" ] && exit 0
	case "$*" in
	*"io.x-k8s.kind.cluster=krops-local-host"*) echo krops-local-host-control-plane ;;
	*) echo krops-local-host ;;
	esac ;;
rm) touch "$STANDIN_DIR/deleted" ;;
*) echo "stand-in engine: unexpected $*" >&2; exit 2 ;;
esac
`

func newWorld(t *testing.T) *world {
	t.Helper()
	crds := []testenv.CRDSet{testenv.CAPICore, testenv.CAPD, testenv.CAPIOperator, testenv.FluxSource, testenv.FluxKustomize, testenv.FluxHelm, testenv.FluxOperator}
	w := &world{nodes: make(chan struct{})}
	w.kind = testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-krops-local-host", CRDs: crds, Webhooks: true})
	w.target = testenv.APIServer(t, testenv.ClusterOptions{Name: "target", CRDs: crds, Webhooks: true})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.ctx = ctx
	for _, c := range []*testenv.Cluster{w.kind, w.target} {
		testenv.LabelForMove(t, ctx, c)
		go standInInfrastructure(ctx, c)
	}
	w.capiKind = testenv.RunClusterAPI(t, w.kind)
	testenv.RunFluxOperator(t, w.target)
	testenv.Flux(t, w.target)
	go seedtest.StandInKubelet(ctx, w.target.Client)
	go testenv.StandInCAPIOperator(ctx, w.target)
	go w.standInNodes(ctx)

	w.root = t.TempDir()
	files := repoFiles(t)
	images, err := os.ReadFile("../../airgap/images.txt")
	if err != nil {
		t.Fatal(err)
	}
	files["airgap/images.txt"] = string(images)
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(w.root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	ageKey := w.sopsSecret(t, home)
	u, err := url.Parse(w.target.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	w.engineDir = t.TempDir()
	script := strings.NewReplacer("@DIR@", w.engineDir, "@PORT@", u.Port()).Replace(engineScript)
	if err := os.WriteFile(filepath.Join(w.engineDir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := testenv.Registry(t)
	fluxCharts := seedtest.StandInOperatorChart(t, reg, "0.61.0")
	charts := seedtest.ChartRepository(t,
		seedtest.Chart{Name: "cert-manager", Version: "1.21.2", Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stand-in-cert-manager}\n"}},
		seedtest.Chart{Name: "cluster-api-operator", Version: "0.29.0", Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stand-in-capi-operator}\n"}},
	)
	w.bin = testenv.BuildBinary(t, ".", "krops-pivot")
	plugin := testenv.BuildBinary(t, "../../plugins/docker", "krops-provider-docker")
	host, port, _ := strings.Cut(reg.Host, ":")
	w.env = []string{"AGE_KEY_FILE=" + ageKey, "PATH=" + sdktest.PathWithoutEngines(t, "", w.engineDir), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + home,
		"KUBECONFIG=" + w.kind.Kubeconfig, "MGMT_KUBECONFIG=" + filepath.Join(home, ".kube", "krops-local-host-mgmt.yaml"),
		"BOOTSTRAP_CONFIG=" + filepath.Join(w.root, "bootstrap.toml"), "KROPS_PLUGIN_DIR=" + filepath.Dir(plugin),
		"REGISTRY_HOST=" + host, "REGISTRY_PORT=" + port, "KROPS_OCI_GIT_SHA=0123456789abcdef0123456789abcdef01234567",
		"KROPS_OCI_GIT_REF=main", "KROPS_OCI_SOURCE_URL=https://github.com/kropsdev/krops", "LOCAL_RECONCILE_TIMEOUT=3m"}
	w.args = []string{"local-host", "--cert-manager-repository", charts, "--capi-operator-repository", charts, "--chart-repository", fluxCharts,
		"--registry-in-cluster", reg.Host, "--provider-timeout", "2m", "--node-timeout", "2m"}
	w.seedKind(t, ctx)
	return w
}

// pivotSecretValue is the value of the pivot-sops-secrets manifest: it must
// reach the target, and never the disk or the output.
const pivotSecretValue = "pivot-s3cret-9f2c7d"

// sopsSecret makes a real age key and encrypts the environment's
// pivot-sops-secrets manifest for it by .sops.yaml, with krops-sops, the
// way an operator does (docs/secrets.md). It returns the key file.
func (w *world) sopsSecret(t *testing.T, home string) string {
	t.Helper()
	sops := testenv.BuildBinary(t, "../krops-sops", "krops-sops")
	key := filepath.Join(home, "age.agekey")
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "AGE_KEY_FILE=" + key}
	r := testenv.RunBinary(t, w.root, env, sops, "keygen")
	pub, ok := strings.CutPrefix(strings.TrimSpace(r.Stdout), "Public key: ")
	if r.Code != 0 || !ok {
		t.Fatalf("krops-sops keygen: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	rules := "creation_rules:\n- path_regex: .*\\.sops\\.yaml$\n  encrypted_regex: ^(data|stringData)$\n  age: " + pub + "\n"
	plain := "apiVersion: v1\nkind: Secret\nmetadata: {name: pivot-creds, namespace: default}\nstringData: {password: " + pivotSecretValue + "}\n"
	for p, c := range map[string]string{".sops.yaml": rules, "pivot/creds.sops.yaml": plain} {
		if err := os.WriteFile(filepath.Join(w.root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := testenv.RunBinary(t, w.root, env, sops, "encrypt", "pivot/creds.sops.yaml"); r.Code != 0 {
		t.Fatalf("krops-sops encrypt: exit %d\n%s", r.Code, r.Stderr)
	}
	return key
}

// noPlaintextUnder fails when a file under one of dirs holds the secret.
func noPlaintextUnder(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), pivotSecretValue) {
				t.Errorf("%s holds the plaintext of pivot-sops-secrets", p)
			}
			return nil
		})
	}
}

func (w *world) run(t *testing.T, extraEnv ...string) testenv.Result {
	t.Helper()
	return w.runArgs(t, nil, extraEnv...)
}

func (w *world) runArgs(t *testing.T, extraArgs []string, extraEnv ...string) testenv.Result {
	t.Helper()
	return testenv.RunBinary(t, w.root, append(append([]string{}, w.env...), extraEnv...), w.bin, append(append([]string{}, w.args...), extraArgs...)...)
}

// standInInfrastructure is a STAND-IN for the infrastructure and control
// plane providers (CAPD and KCP do not run here): it reports every
// DevCluster provisioned and every KubeadmControlPlane initialized, as they
// would once machines exist.
func standInInfrastructure(ctx context.Context, c *testenv.Cluster) {
	mark := func(gvk schema.GroupVersionKind, field string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := c.Client.List(ctx, list); err != nil {
			return
		}
		for i := range list.Items {
			u := &list.Items[i]
			if v, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", field); v {
				continue
			}
			_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", field)
			_ = c.Client.Status().Update(ctx, u)
		}
	}
	for ctx.Err() == nil {
		mark(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevClusterList"}, "provisioned")
		mark(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneList"}, "controlPlaneInitialized")
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// standInNodes is a STAND-IN for a kubelet joining the target (none runs
// here): once w.nodes is closed, a Ready node registers.
func (w *world) standInNodes(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-w.nodes:
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "local-management-control-plane-1"}}
	if err := w.target.Client.Create(ctx, n); err != nil {
		return
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	_ = w.target.Client.Status().Update(ctx, n)
}

// seedKind puts on kind what bootstrap leaves there: Flux's namespace with
// the run metadata and a ConfigMap of variables, Flux Kustomizations, the
// Cluster API operator's installed providers, and three Clusters (each with its infrastructure
// cluster, control plane, machine template and kubeconfig Secret), as Flux
// and Cluster API would have made them.
func (w *world) seedKind(t *testing.T, ctx context.Context) {
	t.Helper()
	k := w.kind
	// The Flux namespace exists already (the harness makes it).
	docs := []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: krops-run, namespace: flux-system}\ndata: {KROPS_RUN_ID: pivot-test-run, KROPS_EXPIRES_AT: '9999-12-31T00:00:00Z', KROPS_REVISION: 0123456789abcdef0123456789abcdef01234567, KROPS_RUN_KIND: manual}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-vars, namespace: flux-system}\ndata: {FROM_KIND: read-from-kind}\n",
	}
	for _, name := range []string{"flux-system", "clusters"} {
		docs = append(docs, fmt.Sprintf("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: %s, namespace: flux-system}\nspec: {interval: 10m, prune: true, path: ./mgmt/local-host, sourceRef: {kind: OCIRepository, name: flux-system}}\n", name))
	}
	// local-host's workload Flux: appliers next to the Cluster, reaching
	// it through its kubeconfig Secret.
	docs = append(docs,
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: local-workload-flux, namespace: default}\nspec: {interval: 10m, prune: true, path: ./mgmt/local-host/addons/flux/instance, sourceRef: {kind: OCIRepository, name: flux-system, namespace: flux-system}, kubeConfig: {secretRef: {name: local-workload-kubeconfig, key: value}}}\n",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: local-workload-flux-operator, namespace: default}\nspec: {interval: 30m, kubeConfig: {secretRef: {name: local-workload-kubeconfig, key: value}}, chart: {spec: {chart: flux-operator, sourceRef: {kind: HelmRepository, name: flux-operator}}}}\n")
	providers := treeProviders(t)
	for _, p := range providers {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", p.Namespace))
	}
	for _, d := range docs {
		k.CreateYAML(t, ctx, d)
	}
	for _, p := range providers {
		if err := testenv.CreateOperatorProvider(ctx, k, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"local-management", "local-workload", "local-extra"} {
		w.createCluster(t, ctx, c)
	}
}

func (w *world) createCluster(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	k := w.kind
	u, _ := url.Parse(w.target.Config.Host)
	recorded := *w.target.Config
	// The endpoint as CAPD records it: reachable only inside the kind
	// network; the docker provider rewrites it.
	recorded.Host = "https://" + name + "-lb.invalid:6443"
	kcPath := filepath.Join(t.TempDir(), "kc")
	if err := testenv.WriteKubeconfig(&recorded, name+"-admin@"+name, kcPath); err != nil {
		t.Fatal(err)
	}
	kc, err := os.ReadFile(kcPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: DevMachineTemplate\nmetadata: {name: %s-control-plane, namespace: default}\nspec: {template: {spec: {backend: {inMemory: {}}}}}\n", name),
		fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1beta2\nkind: DevCluster\nmetadata: {name: %s, namespace: default, annotations: {krops.io/test: %q}}\nspec: {backend: {inMemory: {}}, controlPlaneEndpoint: {host: 127.0.0.1, port: %s}}\n", name, name, u.Port()),
		fmt.Sprintf("apiVersion: controlplane.cluster.x-k8s.io/v1beta2\nkind: KubeadmControlPlane\nmetadata: {name: %s-control-plane, namespace: default}\nspec: {replicas: 1, version: v1.34.0, machineTemplate: {spec: {infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: %s-control-plane}}}}\n", name, name),
		fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: %s, namespace: default, labels: {krops.io/environment: local-host, krops.io/role: %s}}\nspec:\n  clusterNetwork: {pods: {cidrBlocks: [10.244.0.0/16]}}\n  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: %s}\n  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: %s-control-plane}\n", name, name, name, name),
		fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s-kubeconfig, namespace: default, labels: {cluster.x-k8s.io/cluster-name: %s}}\ntype: cluster.x-k8s.io/secret\ndata: {value: %s}\n", name, name, base64.StdEncoding.EncodeToString(kc)),
	} {
		k.CreateYAML(t, ctx, d)
	}
	// STAND-IN for the control plane provider, which adopts the machine
	// template it uses: the template joins the Cluster's object graph.
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"})
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	tpl := &unstructured.Unstructured{}
	tpl.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevMachineTemplate"})
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name + "-control-plane"}, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: name, UID: cl.GetUID()}})
	if err := k.Client.Update(ctx, tpl); err != nil {
		t.Fatal(err)
	}
}

// TestMain fails the package if a process a test started (a plugin, an API
// server, a controller) outlives the tests.
func TestMain(m *testing.M) { sdktest.Main(m) }
