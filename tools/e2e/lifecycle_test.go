package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

// repo is the repository root, from this package's directory.
const repo = "../.."

// e2eConfig is local-host as bootstrap.toml declares it, syncing the e2e
// variant of its tree (mgmt/local-host-e2e): Flux follows the two
// Kustomizations that tree has, and no workload cluster runs Flux (an
// in-memory API server cannot).
var e2eConfig = testenv.BootstrapTOML(func() testenv.Env {
	e := testenv.LocalHost()
	e.SyncPath = "mgmt/local-host-e2e"
	e.ReadyTimeout = "5m"
	e.ProviderManifests = []string{
		"mgmt/local-host/capi-providers/capi-system/namespace.yaml",
		"mgmt/local-host/capi-providers/capi-system/providers.yaml",
		"mgmt/local-host/capi-providers/capd-system/namespace.yaml",
		"mgmt/local-host/capi-providers/capd-system/provider.yaml",
	}
	e.Tables = `[environments.local-host.seed]
wait = ["clusterclasses", "clusters"]

[environments.local-host.teardown]
capi-workloads = ["local-workload"]
mgmt-container-prefix = "local-management"`
	return e
}())

// lifecycle is everything around one run of the chain: the repository
// copy it runs in, the binaries (built with the stand-in kind), the
// loopback registry and chart repositories, the stand-in kind, the target
// API server that becomes the management cluster, and the stand-in
// engine CLI.
type lifecycle struct {
	root, bin, home, engineDir string
	env                        []string
	kind                       *standInKind
	target                     *testenv.Cluster
	lb                         *mgmtLoadBalancer
	seedFlags, pivotFlags      []string
	// registryPort is the loopback registry's, which REGISTRY_PORT passes
	// to the docker provider.
	registryPort string
	ctx          context.Context
}

func newLifecycle(t testing.TB) *lifecycle {
	t.Helper()
	testenv.Integration(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l := &lifecycle{ctx: ctx, home: t.TempDir(), kind: newStandInKind(t)}
	l.root = repoCopy(t)
	l.bin = buildBinaries(t)

	// The management cluster's API server as the pivot meets it: Flux
	// runs there (the pivot installs it), the Cluster API controllers
	// start only once the pivot is done (see TestLocalHostLifecycle).
	l.target = testenv.APIServer(t, testenv.ClusterOptions{Name: "local-management", CRDs: allCRDs, Webhooks: true})
	testenv.LabelForMove(t, ctx, l.target)
	testenv.RunFluxOperator(t, l.target)
	testenv.Flux(t, l.target)
	go seedtest.StandInKubelet(ctx, l.target.Client)
	go standInGarbageCollector(ctx, l.target)
	go testenv.StandInCAPIOperator(ctx, l.target)
	if err := testenv.StandInNodes(ctx, l.target.Client, "local-management-control-plane", 1); err != nil {
		t.Fatal(err)
	}
	l.lb = newMgmtLoadBalancer(t, l.target, clusterCA("default", "local-management", func() []*testenv.Cluster {
		cs := l.kind.apis()
		return append(cs, l.target)
	}))

	reg := testenv.Registry(t)
	fluxCharts := seedtest.StandInOperatorChart(t, reg, "0.61.0")
	charts := seedtest.ChartRepository(t,
		seedtest.Chart{Name: "cert-manager", Version: "1.21.2", Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stand-in-cert-manager}\n"}},
		seedtest.Chart{Name: "cluster-api-operator", Version: "0.29.0", Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stand-in-capi-operator}\n"}},
	)
	l.seedFlags = []string{"--chart-repository", fluxCharts, "--registry-in-cluster", reg.Host}
	l.pivotFlags = []string{"--chart-repository", fluxCharts, "--registry-in-cluster", reg.Host,
		"--cert-manager-repository", charts, "--capi-operator-repository", charts, "--provider-timeout", "3m", "--node-timeout", "2m"}

	host, port, _ := strings.Cut(reg.Host, ":")
	l.registryPort = port
	l.engineDir = standInEngine(t, port, l.lb.Port)
	l.env = []string{
		"PATH=" + sdktest.PathWithoutEngines(t, "", l.engineDir), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + l.home, "XDG_STATE_HOME=" + filepath.Join(l.home, "state"),
		"KUBECONFIG=" + filepath.Join(l.home, ".kube", "config"), "BOOTSTRAP_CONFIG=" + filepath.Join(l.root, "bootstrap.toml"),
		"KROPS_PLUGIN_DIR=" + l.bin, "KROPS_STANDIN_KIND_URL=" + l.kind.URL,
		"REGISTRY_HOST=" + host, "REGISTRY_PORT=" + port, "BOOTSTRAP_PIVOT=1",
		"KROPS_OCI_GIT_SHA=0123456789abcdef0123456789abcdef01234567", "KROPS_OCI_GIT_REF=main", "KROPS_OCI_SOURCE_URL=https://github.com/kropsdev/krops",
		"LOCAL_RECONCILE_TIMEOUT=5m", "XDG_CACHE_HOME=" + taskCache(t),
	}
	return l
}

// bootstrap is `task bootstrap ENV=local-host` (Taskfile.yml), command by
// command, with the flags that point the charts at the loopback
// repositories; TestBootstrapMirrorsTheTaskfile keeps the two in step.
func (l *lifecycle) bootstrap() [][]string {
	chain := bootstrapChain(l.seedFlags, l.pivotFlags)
	for i, argv := range chain {
		chain[i] = append([]string{argv[0], "--log-format", "json"}, argv[1:]...)
	}
	return chain
}

func bootstrapChain(seedFlags, pivotFlags []string) [][]string {
	return [][]string{
		{"krops-kind", "preflight", "local-host"},
		{"krops-flux-seed", "preflight", "local-host"},
		{"krops-kind", "up", "local-host"},
		append([]string{"krops-flux-seed", "--from-bootstrap", "local-host"}, seedFlags...),
		append([]string{"krops-pivot", "--from-bootstrap", "local-host"}, pivotFlags...),
	}
}

// runOptions shape one run.
type runOptions struct {
	env []string
	// onEvent sees every JSON progress event (--log-format json) as it
	// comes, with the process, so a test can kill it at a boundary.
	onEvent func(ev event, p *os.Process)
}

// event is one line of a binary's JSON progress output.
type event struct {
	Msg     string  `json:"msg"`
	Intent  string  `json:"intent"`
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error"`
}

// result is a finished run: its output, exit code, wall time, and the time
// its steps spent waiting on controllers.
type result struct {
	testenv.Result
	wall, waiting time.Duration
	events        []event
}

// run runs a krops binary (or a program, by path) in the repository copy
// and, while it runs, carries out the stand-in kind's creations and
// deletions on the test goroutine.
func (l *lifecycle) run(t testing.TB, o runOptions, argv ...string) result {
	t.Helper()
	bin := argv[0]
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(l.bin, bin)
	}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Dir = l.root
	cmd.Env = append(append([]string{}, l.env...), o.env...)
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	events := make(chan event, 64)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			errOut.WriteString(line + "\n")
			var ev event
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Msg != "" {
				events <- ev
			}
		}
	}()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = pw.Close(); <-read; close(done) }()
	// A stand-in kind request that stops the test goroutine leaves this
	// loop without the binary's exit: kill it, so nothing outlives the test.
	finished := false
	defer func() {
		if !finished {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	r := result{}
	for {
		select {
		case req := <-l.kind.reqs:
			l.kind.handle(t, req)
		case ev := <-events:
			r.events = append(r.events, ev)
			if ev.Msg == "step done" && ev.Intent == "waiting" {
				r.waiting += time.Duration(ev.Seconds * float64(time.Second))
			}
			if o.onEvent != nil {
				o.onEvent(ev, cmd.Process)
			}
		case <-done:
			for len(events) > 0 {
				r.events = append(r.events, <-events)
			}
			r.wall = time.Since(start)
			r.Result = testenv.Result{Stdout: out.String(), Stderr: errOut.String(), Code: cmd.ProcessState.ExitCode()}
			finished = true
			return r
		}
	}
}

func (l *lifecycle) mustRun(t testing.TB, o runOptions, argv ...string) result {
	t.Helper()
	r := l.run(t, o, argv...)
	t.Logf("%s: exit %d in %s (waiting on controllers %s)", label(argv), r.Code, r.wall.Round(100*time.Millisecond), r.waiting.Round(100*time.Millisecond))
	if r.Code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s\nstand-in engine calls:\n%s", strings.Join(argv, " "), r.Code, r.Stdout, r.Stderr, l.engineLog())
	}
	return r
}

func (l *lifecycle) engineLog() string {
	b, _ := os.ReadFile(filepath.Join(l.engineDir, "log"))
	return string(b)
}

// apis are the API servers of the stand-in kind clusters that exist.
func (k *standInKind) apis() []*testenv.Cluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*testenv.Cluster
	for _, c := range k.clusters {
		out = append(out, c.api)
	}
	return out
}

// repoCopy is the part of the repository the chain reads: bootstrap.toml
// (the e2e one), the trees and the image inventory.
func repoCopy(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"mgmt", "workload"} {
		if out, err := exec.Command("cp", "-R", filepath.Join(repo, d), filepath.Join(root, d)).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", d, err, out)
		}
	}
	images, err := os.ReadFile(filepath.Join(repo, "airgap", "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"bootstrap.toml": []byte(e2eConfig), "airgap/images.txt": images} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// buildBinaries builds the lifecycle's binaries with the stand-in kind
// (tag krops_standin_kind; krops-flux-seed and the docker provider do not
// import kind, so the tag leaves them as released) into one directory. One
// `go build` of all five links them in parallel, and without symbol
// tables: a third of the time of five builds.
func buildBinaries(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	pkgs := []string{"../krops-kind", "../krops-flux-seed", "../krops-pivot", "../krops-sweep", "../../plugins/docker"}
	args := append(append(append([]string{"build", "-tags", "krops_standin_kind"}, testenv.BuildFlags()...), "-o", dir+string(filepath.Separator)), pkgs...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	// The plugin host finds providers by this name.
	if err := os.Rename(filepath.Join(dir, "docker"), filepath.Join(dir, "krops-provider-docker")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// standInEngine is a STAND-IN for the docker CLI (no engine runs here).
// It answers what the docker provider and krops-sweep ask: the registry
// container (running, publishing the loopback registry's port, on the kind
// network), the management cluster's published API port (the stand-in
// load balancer's), and the management cluster's one container: CAPD's
// in-memory backend makes none, so the load balancer container the
// endpoint is published from is the whole of it, listed until removed.
// Every call is logged. The plugin runs it with a filtered
// environment, so its settings are written in.
func standInEngine(t testing.TB, registryPort string, lbPort int) string {
	t.Helper()
	dir := t.TempDir()
	script := strings.NewReplacer("@DIR@", dir, "@REGPORT@", registryPort, "@LBPORT@", itoa(lbPort)).Replace(`#!/bin/sh
echo "$*" >> "@DIR@/log"
case "$1" in
info) exit 0 ;;
--version) echo "Docker version 28.2.2, build e6534b4" ;;
container)
	[ "$2 $3" = "inspect krops-registry" ] || { echo "Error: No such container: $3" >&2; exit 1; }
	[ -f "@DIR@/registry-removed" ] && { echo "Error: No such container: $3" >&2; exit 1; }
	echo '[{"State":{"Running":true},"NetworkSettings":{"Ports":{"5000/tcp":[{"HostIp":"127.0.0.1","HostPort":"@REGPORT@"}]},"Networks":{"kind":{}}}}]' ;;
port)
	[ "$2" = local-management-lb ] && [ ! -f "@DIR@/lb-removed" ] || { echo "Error: No such container: $2" >&2; exit 1; }
	echo "127.0.0.1:@LBPORT@" ;;
ps)
	case "$*" in
	*"name=^local-management"*) [ -f "@DIR@/lb-removed" ] || echo local-management-lb ;;
	esac ;;
rm)
	case "$*" in
	*krops-registry*) touch "@DIR@/registry-removed" ;;
	*local-management-lb*) touch "@DIR@/lb-removed" ;;
	esac ;;
*) echo "stand-in engine: unexpected $*" >&2; exit 2 ;;
esac
`)
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// label names a command for the log: the program and its first argument
// after the log-format flag.
func label(argv []string) string {
	var words []string
	for i := 0; i < len(argv) && len(words) < 2; i++ {
		if argv[i] == "--log-format" {
			i++
			continue
		}
		words = append(words, filepath.Base(argv[i]))
	}
	return strings.Join(words, " ")
}
