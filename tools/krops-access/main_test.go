package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
)

// TestMain fails the package if a process a test started (a plugin, an API
// server) outlives the tests.
func TestMain(m *testing.M) { sdktest.Main(m) }

// fixture is a "kind" API server holding a Cluster API inventory (two
// Clusters, the workload's kubeconfig Secret as CAPD records it: an
// endpoint only the kind network resolves) and a "workload" API server
// behind it. The docker provider plugin is the real one; the docker CLI it
// asks for the load balancer's published port is a STAND-IN answering with
// the workload server's loopback port.
type fixture struct {
	kind, workload *testenv.Cluster
	engine         *testenv.StandInEngine
	repo, bin      string
	env            []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		kind:     testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-krops-local-host", CRDs: []testenv.CRDSet{testenv.CAPICore}}),
		workload: testenv.APIServer(t, testenv.ClusterOptions{Name: "local-workload"}),
		repo:     t.TempDir(),
	}
	ctx := context.Background()
	u, err := url.Parse(f.workload.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	recorded := *f.workload.Config
	recorded.Host = "https://local-workload-lb.invalid:6443"
	kc := filepath.Join(t.TempDir(), "recorded.kubeconfig")
	if err := testenv.WriteKubeconfig(&recorded, "local-workload-admin@local-workload", kc); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"local-management", "local-workload"} {
		f.kind.CreateYAML(t, ctx, fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: %s, namespace: default}\nspec: {paused: true}\n", name))
	}
	f.kind.CreateYAML(t, ctx, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: local-workload-kubeconfig, namespace: default}\ndata: {value: %q}\n", b64(raw)))
	toml := testenv.BootstrapTOML(testenv.LocalHost()) + "\n[environments.local-host.seed]\nworkloads = [\"local-workload\"]\n"
	if err := os.WriteFile(filepath.Join(f.repo, "bootstrap.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	f.engine = testenv.NewStandInEngine(t, map[string]string{"local-workload-lb": "127.0.0.1:" + u.Port(), "local-management-lb": "127.0.0.1:" + u.Port()})
	f.bin = testenv.BuildBinary(t, ".", "krops-access")
	plugins := filepath.Dir(testenv.BuildBinary(t, "../../plugins/docker", "krops-provider-docker"))
	home := t.TempDir()
	f.env = []string{"PATH=" + sdktest.PathWithoutEngines(t, "", f.engine.Dir), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + home,
		"KUBECONFIG=" + f.kind.Kubeconfig, "BOOTSTRAP_KUBECONTEXT=kind-krops-local-host", "MGMT_KUBECONFIG=" + filepath.Join(home, "no-mgmt-yet.kubeconfig"),
		"KROPS_PLUGIN_DIR=" + plugins}
	return f
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (f *fixture) run(t *testing.T, args ...string) testenv.Result {
	t.Helper()
	return testenv.RunBinary(t, f.repo, f.env, f.bin, args...)
}

// kubeconfigs writes one file per provisioned Cluster, 0600, its context
// named after the cluster, the endpoint rewritten to the published port;
// a Cluster without a kubeconfig yet is said and skipped.
func TestKubeconfigsWritesWhatAPersonUses(t *testing.T) {
	f := newFixture(t)
	r := f.run(t, "kubeconfigs", "local-host")
	if r.Code != 0 {
		t.Fatalf("kubeconfigs: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	path := filepath.Join(f.repo, ".kube", "local-workload.kubeconfig")
	if r.Stdout != "local-workload\t"+path+"\n" {
		t.Errorf("stdout %q", r.Stdout)
	}
	for _, want := range []string{"Cluster API inventory: context kind-krops-local-host", "local-management: no kubeconfig yet", "✔ " + path + " (from Secret default/local-workload-kubeconfig; answers)"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, st, err)
	}
	if d, _ := os.Stat(filepath.Dir(path)); d.Mode().Perm() != 0o700 {
		t.Errorf(".kube is %v", d.Mode().Perm())
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "local-workload" || len(cfg.Contexts) != 1 || cfg.Clusters["local-workload"] == nil {
		t.Fatalf("contexts %v, current %q", cfg.Contexts, cfg.CurrentContext)
	}
	if got, want := cfg.Clusters["local-workload"].Server, "https://127.0.0.1:"+strings.TrimPrefix(mustPort(t, f.workload.Config.Host), ":"); got != want {
		t.Errorf("server %s, want %s (the published port)", got, want)
	}
	if !strings.Contains(f.engine.Calls(), "port local-workload-lb 6443/tcp") {
		t.Errorf("engine calls:\n%s", f.engine.Calls())
	}

	// A provider's user kubeconfig wins (CAPA's for EKS refreshes its token).
	user := strings.Replace(string(mustRead(t, path)), "local-workload", "via-user-secret", -1)
	f.kind.CreateYAML(t, context.Background(), fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: local-workload-user-kubeconfig, namespace: default}\ndata: {value: %q}\n", b64([]byte(user))))
	r = f.run(t, "kubeconfigs", "local-host", "--dir", "out")
	if r.Code != 0 || !strings.Contains(r.Stderr, "from Secret default/local-workload-user-kubeconfig") {
		t.Fatalf("with a user kubeconfig: exit %d\n%s", r.Code, r.Stderr)
	}
	if cfg, err := clientcmd.LoadFromFile(filepath.Join(f.repo, "out", "local-workload.kubeconfig")); err != nil || cfg.CurrentContext != "local-workload" {
		t.Errorf("the user kubeconfig, renamed: %v %v", cfg, err)
	}
}

// mgmt-kubeconfig writes the management cluster's kubeconfig again into
// MGMT_KUBECONFIG, under the environment's context, beside what is there.
func TestMgmtKubeconfigRewritesTheContext(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.run(t, "mgmt-kubeconfig", "local-host")
	if r.Code != 1 || !strings.Contains(r.Stderr, "management cluster local-management") || !strings.Contains(r.Stderr, "no kubeconfig Secret default/local-management-kubeconfig") {
		t.Errorf("before Cluster API wrote it: exit %d\n%s", r.Code, r.Stderr)
	}
	recorded := *f.workload.Config
	recorded.Host = "https://local-management-lb.invalid:6443"
	kc := filepath.Join(t.TempDir(), "mgmt.kubeconfig")
	if err := testenv.WriteKubeconfig(&recorded, "local-management-admin@local-management", kc); err != nil {
		t.Fatal(err)
	}
	f.kind.CreateYAML(t, ctx, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: local-management-kubeconfig, namespace: default}\ndata: {value: %q}\n", b64(mustRead(t, kc))))
	mgmtPath := ""
	for _, kv := range f.env {
		if v, ok := strings.CutPrefix(kv, "MGMT_KUBECONFIG="); ok {
			mgmtPath = v
		}
	}
	// Another context in the file stays.
	if err := os.WriteFile(mgmtPath, mustRead(t, f.kind.Kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	r = f.run(t, "mgmt-kubeconfig", "local-host")
	if r.Code != 0 || !strings.Contains(r.Stderr, "from Secret default/local-management-kubeconfig on context kind-krops-local-host in") || !strings.Contains(r.Stderr, "(answers)") {
		t.Fatalf("mgmt-kubeconfig: exit %d\n%s", r.Code, r.Stderr)
	}
	cfg, err := clientcmd.LoadFromFile(mgmtPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Contexts["kind-krops-local-host"] == nil || len(cfg.Contexts) != 2 {
		t.Errorf("contexts after the rewrite: %v", cfg.Contexts)
	}
	for name, c := range cfg.Contexts {
		if name != "kind-krops-local-host" && cfg.Clusters[c.Cluster].Server != "https://127.0.0.1:"+mustPort(t, f.workload.Config.Host) {
			t.Errorf("context %s: server %s", name, cfg.Clusters[c.Cluster].Server)
		}
	}
}

// No inventory anywhere: exit 1 naming each place looked at.
func TestNoInventoryNamesWhereItLooked(t *testing.T) {
	f := newFixture(t)
	f.env = append(f.env, "BOOTSTRAP_KUBECONTEXT=kind-gone")
	for _, args := range [][]string{{"kubeconfigs", "local-host"}, {"port-forward", "local-host"}} {
		r := f.run(t, args...)
		if r.Code != 1 || !strings.Contains(r.Stderr, "no Cluster API inventory found") || !strings.Contains(r.Stderr, "no-mgmt-yet.kubeconfig") || !strings.Contains(r.Stderr, "kind-gone") {
			t.Errorf("%v: exit %d\n%s", args, r.Code, r.Stderr)
		}
	}
}

// port-forward finds the workload cluster and says clearly what is
// missing on it. (The forward itself needs a kubelet: the real-engine
// lane runs it against a real pod.)
func TestPortForwardSaysWhatIsMissing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.run(t, "port-forward", "local-host")
	if r.Code != 1 || !strings.Contains(r.Stderr, "no Service podinfo/podinfo: is the app deployed there yet") || !strings.Contains(r.Stderr, "on cluster local-workload") {
		t.Errorf("no Service: exit %d\n%s", r.Code, r.Stderr)
	}
	f.workload.CreateYAML(t, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: podinfo}\n")
	f.workload.CreateYAML(t, ctx, "apiVersion: v1\nkind: Service\nmetadata: {name: podinfo, namespace: podinfo}\nspec: {selector: {app: podinfo}, ports: [{name: http, port: 9898, targetPort: http}, {name: grpc, port: 9999, targetPort: grpc}]}\n")
	// Podinfo's chart gives its Service two ports (the real-engine lane
	// found it): the one named http is the default.
	if r = f.run(t, "port-forward", "local-host"); r.Code != 1 || !strings.Contains(r.Stderr, "service podinfo/podinfo has no pods") {
		t.Errorf("no pods: exit %d\n%s", r.Code, r.Stderr)
	}
	f.workload.CreateYAML(t, ctx, "apiVersion: v1\nkind: Pod\nmetadata: {name: podinfo-abc, namespace: podinfo, labels: {app: podinfo}}\nspec: {containers: [{name: podinfo, image: podinfo, ports: [{name: http, containerPort: 9898}]}]}\n")
	if r = f.run(t, "port-forward", "local-host"); r.Code != 1 || !strings.Contains(r.Stderr, "service podinfo/podinfo has no Ready pod (podinfo-abc Pending)") {
		t.Errorf("no Ready pod: exit %d\n%s", r.Code, r.Stderr)
	}
	if r = f.run(t, "port-forward", "local-host", "--cluster", "local-other"); r.Code != 1 || !strings.Contains(r.Stderr, "no kubeconfig Secret default/local-other-kubeconfig") {
		t.Errorf("unknown cluster: exit %d\n%s", r.Code, r.Stderr)
	}
	f.workload.CreateYAML(t, ctx, "apiVersion: v1\nkind: Service\nmetadata: {name: two, namespace: podinfo}\nspec: {selector: {app: podinfo}, ports: [{name: a, port: 80}, {name: b, port: 81}]}\n")
	if r = f.run(t, "port-forward", "local-host", "--service", "two"); r.Code != 1 || !strings.Contains(r.Stderr, "service podinfo/two has ports 80, 81 and none is named http: name one with --service-port") {
		t.Errorf("two ports, none named http: exit %d\n%s", r.Code, r.Stderr)
	}
	if r = f.run(t, "port-forward", "local-host", "--local-port", "70000"); r.Code != 2 {
		t.Errorf("bad port: exit %d\n%s", r.Code, r.Stderr)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPort(t *testing.T, host string) string {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}
