package bootcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/kindcfg"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/testenv"
)

const image = "docker.io/kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"

// standInKind is a STAND-IN for sigs.k8s.io/kind, which needs a container
// engine this machine does not have. Its "cluster" is a real kube-apiserver
// from the harness; it records what krops asked of it.
type standInKind struct {
	mu       sync.Mutex
	clusters map[string]bool
	calls    []string
	configs  [][]byte
	// kubeconfig and internal are what KubeConfig returns (external and
	// in-network addresses).
	kubeconfig, internal string
	createErr            error
	// files are each cluster's node files, relative to the synced
	// directory.
	files map[string]map[string]string
}

func (k *standInKind) List(context.Context) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for n := range k.clusters {
		out = append(out, n)
	}
	return out, nil
}

func (k *standInKind) Create(_ context.Context, name string, config []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "create "+name)
	k.configs = append(k.configs, config)
	if k.createErr != nil {
		return k.createErr
	}
	k.clusters[name] = true
	return nil
}

func (k *standInKind) Delete(_ context.Context, name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "delete "+name)
	delete(k.clusters, name)
	delete(k.files, name)
	return nil
}

// SyncNodeDir keeps the files per cluster, as one node would.
func (k *standInKind) SyncNodeDir(_ context.Context, name string, d NodeDir) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "sync "+name+" "+d.Path)
	if k.files == nil {
		k.files = map[string]map[string]string{}
	}
	if k.files[name] == nil {
		k.files[name] = map[string]string{}
	}
	for _, rel := range d.Stale(k.files[name][d.Manifest]) {
		for p := range k.files[name] {
			if p == rel || strings.HasPrefix(p, rel+"/") {
				delete(k.files[name], p)
			}
		}
	}
	for rel, content := range d.Files {
		k.files[name][rel] = content
	}
	return 1, nil
}

func (k *standInKind) KubeConfig(_ context.Context, name string, internal bool) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, fmt.Sprintf("kubeconfig %s internal=%t", name, internal))
	if internal {
		return k.internal, nil
	}
	return k.kubeconfig, nil
}

// standInProvider is a STAND-IN for the environment's plugin (the real
// plugins are exercised by their own tests).
type standInProvider struct {
	kind      ProviderKind
	hooked    []string
	manifests [][]byte
}

func (p *standInProvider) KindConfig(context.Context) (ProviderKind, error) { return p.kind, nil }
func (p *standInProvider) AfterKindCreate(_ context.Context, kubeconfig, kctx string) (sdk.HookResult, error) {
	p.hooked = append(p.hooked, kubeconfig+" "+kctx)
	return sdk.HookResult{Messages: []string{"registry krops-registry ready"}, Manifests: p.manifests}, nil
}

// standInNetwork is a STAND-IN for the engine's kind network.
type standInNetwork struct {
	members []string
	calls   []string
}

func (n *standInNetwork) Members(context.Context, string) ([]string, error) { return n.members, nil }
func (n *standInNetwork) Connect(_ context.Context, nw, c string) error {
	n.calls = append(n.calls, "connect "+nw+" "+c)
	n.members = append(n.members, c)
	return nil
}
func (n *standInNetwork) Disconnect(_ context.Context, nw, c string) error {
	n.calls = append(n.calls, "disconnect "+nw+" "+c)
	return nil
}

type fixture struct {
	cluster  *testenv.Cluster
	kind     *standInKind
	provider *standInProvider
	opts     Options
	out      *strings.Builder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-mgmt"})
	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	out := &strings.Builder{}
	f := &fixture{cluster: c, out: out,
		kind: &standInKind{clusters: map[string]bool{}, kubeconfig: string(kc), internal: string(kc)},
		provider: &standInProvider{kind: ProviderKind{ContainerdPatches: []string{"[plugins.patch]\n"},
			Mirrors: []kindcfg.Mirror{{Registry: "localhost:5001", Endpoints: []string{"http://krops-registry:5000"}, Source: "provider docker"}}}},
	}
	off := false
	f.opts = Options{
		Name: "mgmt", Kubeconfig: kubecfg.Ref{Path: filepath.Join(t.TempDir(), "kube", "config"), Context: "kind-mgmt"}, Environment: "local-host", NodeImage: image, EngineSock: "/var/run/docker.sock",
		RunID: "run-1", HealthTimeout: 5 * time.Second,
		Kind: f.kind, Provider: f.provider, Network: &standInNetwork{}, Runner: proc.Exec{},
		Progress: ui.New(ui.Options{Out: out, Terminal: &off}), Out: io.Discard,
	}
	return f
}

func (f *fixture) nodes(t *testing.T, ready ...bool) {
	t.Helper()
	ctx := context.Background()
	for i, r := range ready {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mgmt-control-plane-%d", i)}}
		if err := f.cluster.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		st := corev1.ConditionTrue
		reason := "KubeletReady"
		if !r {
			st, reason = corev1.ConditionFalse, "KubeletNotReady"
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: reason, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if err := f.cluster.Client.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCreateWritesKubeconfigRecordsConfigAndRunsTheHook(t *testing.T) {
	f := newFixture(t)
	f.nodes(t, true)
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("%v\n%s", err, f.out)
	}
	if got := strings.Join(f.kind.calls, ","); got != "create mgmt,kubeconfig mgmt internal=false,sync mgmt /etc/containerd/certs.d" {
		t.Errorf("kind calls: %s", got)
	}
	cfg := string(f.kind.configs[0])
	for _, want := range []string{"image: " + image, "hostPath: /var/run/docker.sock", "containerPath: /var/run/docker.sock", "[plugins.patch]", "krops.io/run: run-1"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, cfg)
		}
	}
	kc, err := clientcmd.LoadFromFile(f.opts.Kubeconfig.Path)
	if err != nil || kc.Contexts["kind-mgmt"] == nil {
		t.Errorf("kubeconfig: %v %v", kc, err)
	}
	if len(f.provider.hooked) != 1 || f.provider.hooked[0] != f.opts.Kubeconfig.Path+" kind-mgmt" {
		t.Errorf("hook calls: %v", f.provider.hooked)
	}
	var cm corev1.ConfigMap
	if err := f.cluster.Client.Get(context.Background(), clientKey(RecordNamespace, RecordName), &cm); err != nil || cm.Data["config.yaml"] != cfg {
		t.Errorf("recorded configuration: %v", err)
	}
	// Where the local registry is, for tools that follow kind's convention
	// and for the original lifecycle's readers.
	if err := f.cluster.Client.Get(context.Background(), clientKey(HostingNamespace, HostingName), &cm); err != nil ||
		cm.Data["localRegistryHosting.v1"] != "host: \"localhost:5001\"\nhostFromContainerRuntime: \"krops-registry:5000\"\nhostFromClusterNetwork: \"krops-registry:5000\"\nhelp: \"https://kind.sigs.k8s.io/docs/user/local-registry/\"\n" {
		t.Errorf("%s/%s: %v %q", HostingNamespace, HostingName, err, cm.Data)
	}
	if err := f.cluster.Client.Get(context.Background(), clientKey(RegistryConfigNS, RegistryConfig), &cm); err != nil || cm.Data["registry-url"] != "krops-registry:5000" {
		t.Errorf("%s/%s: %v %q", RegistryConfigNS, RegistryConfig, err, cm.Data)
	}
	for _, line := range []string{"✔ creating kind cluster mgmt", "✔ waiting for every node of mgmt to be Ready", "registry krops-registry ready"} {
		if !strings.Contains(f.out.String(), line) {
			t.Errorf("progress lacks %q:\n%s", line, f.out)
		}
	}

	if got := f.kind.files["mgmt"]["localhost:5001/hosts.toml"]; !strings.Contains(got, `[host."http://krops-registry:5000"]`) {
		t.Errorf("the provider's mirror in the node:\n%s", got)
	}
	if got := f.kind.files["mgmt"][kindcfg.Manifest]; got != "localhost:5001\n" {
		t.Errorf("mirror record %q", got)
	}

	// Reuse: healthy and unchanged, so nothing is created again; a mirror
	// added to the configuration reaches the node without a new cluster.
	f.kind.calls = nil
	f.opts.Mirrors = []kindcfg.Mirror{{Registry: "docker.io", Endpoints: []string{"https://mirror.example.com"}, Source: "bootstrap.toml [[mirrors]] entry 1"}}
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("reuse: %v", err)
	}
	if got := strings.Join(f.kind.calls, ","); got != "kubeconfig mgmt internal=false,sync mgmt /etc/containerd/certs.d" {
		t.Errorf("reuse called kind: %s", got)
	}
	if got := f.kind.files["mgmt"]["docker.io/hosts.toml"]; !strings.Contains(got, `[host."https://mirror.example.com"]`) {
		t.Errorf("the added mirror in the node:\n%s", got)
	}
	// ... and one taken out of it leaves the node, by the record.
	f.opts.Mirrors = nil
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("reuse: %v", err)
	}
	if _, left := f.kind.files["mgmt"]["docker.io/hosts.toml"]; left || f.kind.files["mgmt"]["localhost:5001/hosts.toml"] == "" {
		t.Errorf("after the mirror was removed, the node holds %v", f.kind.files["mgmt"])
	}
	// A mirror the provider and the configuration both claim is refused
	// before anything is touched.
	f.kind.calls = nil
	f.opts.Mirrors = []kindcfg.Mirror{{Registry: "localhost:5001", Endpoints: []string{"http://elsewhere:5000"}, Source: "bootstrap.toml [[mirrors]] entry 1"}}
	if err := Up(context.Background(), f.opts, false); err == nil || !strings.Contains(err.Error(), "mirrored twice") || len(f.kind.calls) != 0 {
		t.Errorf("a doubly mirrored registry: %v (kind calls %v)", err, f.kind.calls)
	}
	f.opts.Mirrors = nil

	// Drift: the provider now needs another containerd patch.
	f.provider.kind.ContainerdPatches = []string{"[plugins.other-patch]\n"}
	err = Up(context.Background(), f.opts, false)
	if !errors.Is(err, ErrDrift) || !strings.Contains(err.Error(), "containerd patches") || !strings.Contains(err.Error(), "--recreate") {
		t.Errorf("drift: %v", err)
	}

	// --recreate deletes and builds again with what is needed now.
	f.kind.calls = nil
	if err := Up(context.Background(), f.opts, true); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	if got := strings.Join(f.kind.calls, ","); got != "delete mgmt,create mgmt,kubeconfig mgmt internal=false,sync mgmt /etc/containerd/certs.d" {
		t.Errorf("recreate calls: %s", got)
	}
	if !strings.Contains(string(f.kind.configs[len(f.kind.configs)-1]), "other-patch") {
		t.Error("the rebuilt cluster does not carry the new patch")
	}
}

func TestAnUnhealthyClusterIsNotReused(t *testing.T) {
	f := newFixture(t)
	f.kind.clusters["mgmt"] = true
	f.nodes(t, true, false)
	err := Up(context.Background(), f.opts, false)
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "not Ready: mgmt-control-plane-1 (False, KubeletNotReady") ||
		!strings.Contains(err.Error(), "krops-kind up local-host --recreate") {
		t.Errorf("err = %v", err)
	}
	if strings.Contains(strings.Join(f.kind.calls, ","), "create") {
		t.Error("an unhealthy cluster must not be rebuilt without --recreate")
	}
}

func TestACreatedClusterWaitsForItsNodes(t *testing.T) {
	f := newFixture(t)
	f.opts.HealthTimeout = 30 * time.Second
	// The node registers and turns Ready only after Up started waiting:
	// the watch, not a poll, sees it.
	go func() {
		time.Sleep(time.Second)
		f.nodes(t, true)
	}()
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("%v\n%s", err, f.out)
	}
}

func TestAServerThatHangsTimesOut(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and never answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	f.kind.kubeconfig = strings.Replace(f.kind.kubeconfig, hostOf(t, f.kind.kubeconfig), ln.Addr().String(), 1)
	f.kind.clusters["mgmt"] = true
	f.opts.HealthTimeout = 2 * time.Second
	err = Up(context.Background(), f.opts, false)
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "not healthy after 2s") {
		t.Errorf("err = %v", err)
	}
}

func TestToolboxJoinsTheNetworkAndUsesTheInternalAddress(t *testing.T) {
	f := newFixture(t)
	f.nodes(t, true)
	nw := &standInNetwork{members: []string{"mgmt-control-plane"}}
	f.opts.Toolbox, f.opts.Self, f.opts.Network = true, "3f2a9c1b7d0e", nw
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.kind.calls, ","); !strings.Contains(got, "kubeconfig mgmt internal=true") {
		t.Errorf("kind calls: %s", got)
	}
	if strings.Join(nw.calls, ",") != "connect kind 3f2a9c1b7d0e" {
		t.Errorf("network calls: %v", nw.calls)
	}
	// Already a member (listed by full id): no second connect. Then down
	// leaves the network before deleting.
	nw.members, nw.calls = []string{"3f2a9c1b7d0e5a6b7c8d9e0f", "mgmt-control-plane"}, nil
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatal(err)
	}
	if deleted, err := Down(context.Background(), f.opts); err != nil || !deleted {
		t.Fatalf("down of a cluster that exists: deleted %v, %v", deleted, err)
	}
	if strings.Join(nw.calls, ",") != "disconnect kind 3f2a9c1b7d0e" || !strings.HasSuffix(strings.Join(f.kind.calls, ","), "delete mgmt") {
		t.Errorf("network %v, kind %v", nw.calls, f.kind.calls)
	}
}

func TestDownOfAMissingClusterSucceeds(t *testing.T) {
	f := newFixture(t)
	if deleted, err := Down(context.Background(), f.opts); err != nil || deleted {
		t.Fatalf("down of a missing cluster: deleted %v, %v", deleted, err)
	}
	if len(f.kind.calls) != 0 {
		t.Errorf("calls: %v", f.kind.calls)
	}
}

// The post-create task runs through the real mise, with argv, in the
// repository root; a failure aborts with the task's output.
func TestPostCreateTaskRunsThroughMise(t *testing.T) {
	mise := testenv.Program(t, "KROPS_MISE_BIN", "mise", "run `tools/task.sh tools`, which installs the pinned mise from npm")
	f := newFixture(t)
	f.nodes(t, true)
	repo := t.TempDir()
	state := t.TempDir()
	toml := `[tasks.federate]
run = "pwd > federated.txt"
[tasks.broken]
run = "echo 'no credentials for the federation' >&2; exit 7"
`
	if err := os.WriteFile(filepath.Join(repo, "mise.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	f.opts.Mise, f.opts.RepoRoot, f.opts.PostCreateTask = mise, repo, "federate"
	f.opts.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + state, "MISE_DATA_DIR=" + state + "/d", "MISE_CACHE_DIR=" + state + "/c",
		"MISE_STATE_DIR=" + state + "/s", "MISE_CONFIG_DIR=" + state + "/cfg", "MISE_TRUSTED_CONFIG_PATHS=" + repo, "MISE_OFFLINE=1"}
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("%v\n%s", err, f.out)
	}
	got, err := os.ReadFile(filepath.Join(repo, "federated.txt"))
	if err != nil || strings.TrimSpace(string(got)) != repo {
		t.Errorf("the task ran in %q (%v), want %s", got, err, repo)
	}
	f.opts.PostCreateTask = "broken"
	err = Up(context.Background(), f.opts, false)
	if err == nil || !strings.Contains(err.Error(), "post-kind-create-task broken") || !strings.Contains(err.Error(), "no credentials for the federation") {
		t.Errorf("a failing task: %v", err)
	}
	// The preflight asks the real mise whether the task is defined.
	if err := f.opts.CheckTask(context.Background()); err != nil {
		t.Errorf("a defined task: %v", err)
	}
	f.opts.PostCreateTask = "arc-federate"
	if err := f.opts.CheckTask(context.Background()); err == nil || !strings.Contains(err.Error(), "does not define it") || !strings.Contains(err.Error(), "[tasks.arc-federate]") {
		t.Errorf("an undefined task: %v", err)
	}
}

// BeforeCreate guards creation and --recreate's deletion, and only those:
// reusing a cluster that exists does not ask it.
func TestBeforeCreateStopsCreationAndRecreationButNotReuse(t *testing.T) {
	f := newFixture(t)
	f.nodes(t, true)
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("first create: %v", err)
	}
	refusal := errors.New("refused by the guard")
	asked := 0
	f.opts.BeforeCreate = func(context.Context) error { asked++; return refusal }
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("reuse: %v", err)
	}
	if asked != 0 {
		t.Errorf("reusing an existing cluster asked the guard")
	}
	f.kind.calls = nil
	if err := Up(context.Background(), f.opts, true); !errors.Is(err, refusal) {
		t.Fatalf("recreate: got %v, want the guard's refusal", err)
	}
	if len(f.kind.calls) != 0 || !f.kind.clusters["mgmt"] {
		t.Fatalf("a refused --recreate touched the cluster: %v", f.kind.calls)
	}
	delete(f.kind.clusters, "mgmt")
	if err := Up(context.Background(), f.opts, false); !errors.Is(err, refusal) {
		t.Fatalf("create: got %v, want the guard's refusal", err)
	}
	if len(f.kind.calls) != 0 || asked != 2 {
		t.Fatalf("a refused creation called kind %v (guard asked %d times)", f.kind.calls, asked)
	}
}

// What the provider's hook supplies (its controllers' credentials) is
// applied on the cluster, named but never shown, in errors too.
func TestTheProvidersManifestsAreAppliedUnseen(t *testing.T) {
	const marker = "AKIA-MARKER-never-shown"
	f := newFixture(t)
	f.nodes(t, true)
	f.provider.manifests = [][]byte{
		[]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: capa-system}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: aws-credentials, namespace: capa-system}\nstringData: {AWS_B64ENCODED_CREDENTIALS: " + marker + "}\n"),
	}
	if err := Up(context.Background(), f.opts, false); err != nil {
		t.Fatalf("%v\n%s", err, f.out)
	}
	var s corev1.Secret
	if err := f.cluster.Client.Get(context.Background(), clientKey("capa-system", "aws-credentials"), &s); err != nil || string(s.Data["AWS_B64ENCODED_CREDENTIALS"]) != marker {
		t.Errorf("the provider's Secret: %v", err)
	}
	if out := f.out.String(); !strings.Contains(out, "applied Secret capa-system/aws-credentials") || strings.Contains(out, marker) {
		t.Errorf("progress:\n%s", out)
	}
	// Refused by the API server (no such namespace), and not YAML: the
	// errors name the object or the manifest, never the content.
	for _, m := range []string{
		"apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: no-such-ns}\nstringData: {key: " + marker + "}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: creds\n  stringData: " + marker + "\n",
	} {
		f.provider.manifests = [][]byte{[]byte(m)}
		err := Up(context.Background(), f.opts, false)
		if err == nil || strings.Contains(err.Error(), marker) || strings.Contains(f.out.String(), marker) {
			t.Errorf("a manifest that does not apply: %v", err)
		}
	}
}
