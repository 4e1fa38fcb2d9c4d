//go:build realengine

package e2e_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// The local-host clusters Cluster API builds on the engine.
const (
	laneMgmt     = "local-management"
	laneWorkload = "local-workload"
)

// task runs `tools/task.sh <args>` from the checkout as a user does, with
// the lane's environment: the repository's Taskfile builds the binaries
// into bin/ and runs them, plugins included (KROPS_PLUGIN_DIR is not set).
// The Go and tool caches stay the machine's, so the build is the warm one a
// user's second run gets.
func (r *realEnv) task(t *testing.T, extra []string, onLine func(string), args ...string) (testenv.Result, time.Duration, *os.ProcessState) {
	t.Helper()
	cmd := exec.Command(filepath.Join(r.repo, "tools", "task.sh"), args...)
	cmd.Dir = r.repo
	for _, e := range r.env {
		if !strings.HasPrefix(e, "KROPS_PLUGIN_DIR=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		v, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		cmd.Env = append(cmd.Env, k+"="+strings.TrimSpace(string(v)))
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(append(cmd.Env, "XDG_CACHE_HOME="+cache), extra...)
	if onLine == nil {
		onLine = func(string) {}
	}
	return watch(t, cmd, onLine)
}

// cpu is the CPU time a finished process and the children it waited for
// used: for the task runner, krops's binaries (and the build it starts).
func cpu(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// stockForLocalHost puts in the lane's registry everything an offline
// `task bootstrap ENV=local-host` pulls, where the knobs and mirrors the
// test sets send it, as an air-gapped user stocks the registry before a
// bootstrap: the Flux Operator's chart and image and the Flux controllers
// (KROPS_FLUX_REGISTRY); cert-manager's and the Cluster API operator's
// charts and images; the Cluster API images and the cluster-api release's
// mirror (KROPS_PROVIDER_REPOSITORY); Podinfo's chart and image.
func stockForLocalHost(t *testing.T, r *realEnv, f *fluxLane, l *capiLane) {
	t.Helper()
	f.stock(t)
	pushToLaneRegistry(t, append(operatorImages(t, r.repo), l.images()...))
	laneCharts(t, r.repo, "localhost:5001")
	vars := map[string]string{"KROPS_ENVIRONMENT": "local-host", "KROPS_PROVIDER_FETCH": "oci", "KROPS_PROVIDER_REPOSITORY": "http://" + laneRegistryInNet + "/capi"}
	pushProviderRelease(t, l, providerTypes(splitObjects(t, fluxExpand(t, kustomizeYAML(t, filepath.Join(r.repo, "mgmt/local-host/capi-providers")), vars))))
	stockPodinfoAsPinned(t, r.repo)
}

// stockPodinfoAsPinned pushes Podinfo's chart where the workload tree's
// OCIRepository asks for it (<KROPS_OCI_CHART_REPOSITORY>/podinfo at the
// tag it pins), and its image under the ghcr.io mirror. STAND-IN, named:
// the module proxy serves Podinfo 6.9.2 and the tree pins a newer tag, so
// the 6.9.2 chart is pushed under the pinned tag (its appVersion, and so
// its image, stay 6.9.2).
func stockPodinfoAsPinned(t *testing.T, repo string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "workload", "shared", "podinfo", "helm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+tag: "?([^"\s]+)"?$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("workload/shared/podinfo/helm.yaml pins no tag")
	}
	p := stockPodinfo(t, repo)
	ch, err := chartloader.LoadDir(podinfoChartDir(t, repo))
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version = string(m[1])
	seedtest.PushChart(t, "localhost:5001", ch)
	t.Logf("Podinfo: chart %s pushed as %s (stand-in for the pinned version), image %s", p.version, ch.Metadata.Version, p.image)
}

// milestones records when each watched state is first seen, and the
// engine containers' summed memory at its peak, while the lifecycle runs.
type milestones struct {
	mu      sync.Mutex
	start   time.Time
	seen    map[string]time.Duration
	peakMiB float64
	stop    chan struct{}
	done    chan struct{}
}

// watchMilestones polls checks (name -> true once reached) every 5 s.
func watchMilestones(checks map[string]func() bool) *milestones {
	m := &milestones{start: time.Now(), seen: map[string]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			for name, ok := range checks {
				m.mu.Lock()
				_, had := m.seen[name]
				m.mu.Unlock()
				if !had && ok() {
					m.mu.Lock()
					m.seen[name] = time.Since(m.start)
					m.mu.Unlock()
				}
			}
			if mib := engineMemoryMiB(); mib > 0 {
				m.mu.Lock()
				m.peakMiB = max(m.peakMiB, mib)
				m.mu.Unlock()
			}
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *milestones) finish() (map[string]time.Duration, float64) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen, m.peakMiB
}

// engineMemoryMiB sums the memory the engine reports for its containers.
func engineMemoryMiB() float64 {
	out, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}").Output()
	if err != nil {
		return 0
	}
	var sum float64
	for _, ln := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		used := strings.TrimSpace(strings.SplitN(ln, "/", 2)[0])
		for unit, mul := range map[string]float64{"GiB": 1024, "MiB": 1, "KiB": 1.0 / 1024, "kB": 1.0 / 1024, "MB": 1, "GB": 1024} {
			if v, ok := strings.CutSuffix(used, unit); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					sum += f * mul
				}
				break
			}
		}
	}
	return sum
}

// kubectlWith runs kubectl with a kubeconfig file and its current context.
func kubectlWith(path string, args ...string) (string, error) {
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", path}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// hostKubeconfig writes the kubeconfig Cluster API keeps for cluster (in
// the Secret on the cluster host reads) with the server the host reaches:
// the load balancer's published port.
func hostKubeconfig(t *testing.T, host func(...string) (string, error), cluster, dir string) (string, error) {
	t.Helper()
	kc, err := host("get", "secret", "-n", "default", cluster+"-kubeconfig", "-o", "jsonpath={.data.value}")
	if err != nil || kc == "" {
		return "", fmt.Errorf("the %s kubeconfig Secret: %v %s", cluster, err, kc)
	}
	raw, err := base64.StdEncoding.DecodeString(kc)
	if err != nil {
		return "", err
	}
	port, err := exec.Command("docker", "port", cluster+"-lb", "6443/tcp").Output()
	if err != nil {
		return "", fmt.Errorf("docker port %s-lb: %v", cluster, err)
	}
	first := strings.Split(strings.TrimSpace(string(port)), "\n")[0]
	p := first[strings.LastIndex(first, ":")+1:]
	path := filepath.Join(dir, cluster+".kubeconfig")
	server := regexp.MustCompile(`server: https://[^\s]+`).ReplaceAll(raw, []byte("server: https://127.0.0.1:"+p))
	return path, os.WriteFile(path, server, 0o600)
}

// TestRealEngineLocalHostLifecycle is the whole local-host lifecycle on the
// real engine, through the commands users run: `tools/task.sh kind`, the
// registry stocked as an air-gapped user stocks it, then
// `tools/task.sh bootstrap ENV=local-host` unchanged: kind, Flux as pods
// following the tree (cert-manager, the Cluster API operator, the
// providers fetched from the release's mirror, the ClusterClasses), CAPD
// building local-management and local-workload as node containers, the
// workload cluster's own Flux (put in from kind through its kubeconfig
// Secret) reconciling Podinfo, then the pivot into local-management and
// kind deleted. Podinfo answers on the host through krops-access, and
// `tools/task.sh teardown ENV=local-host` leaves nothing the engine or the
// kubeconfig lists; a second teardown is a no-op.
//
// STAND-INS, named: cert-manager's programs, helm-controller and
// notification-controller, the charts built from modules, the release
// files built from the modules (as in the other lanes); CAPD's load
// balancer image and the node image's CNI; Podinfo 6.9.2 under the pinned
// tag (stockPodinfoAsPinned).
func TestRealEngineLocalHostLifecycle(t *testing.T) {
	r := newRealEnv(t)
	f := newFluxLane(t)
	l := newCAPILane(t)
	engineLeft := func() []string {
		return append(append(leftovers(t, laneCluster), capdContainers(t, laneMgmt)...), capdContainers(t, laneWorkload)...)
	}
	if left := engineLeft(); len(left) > 0 {
		t.Fatalf("the engine already runs %v: the lane starts from an engine without them (tear down with `tools/task.sh teardown ENV=local-host`)", left)
	}
	dir := t.TempDir()
	mgmtKC := filepath.Join(r.home, ".kube", "krops-local-host-mgmt.yaml")
	kind := func(args ...string) (string, error) { return r.kubectl(t, args...) }
	mgmt := func(args ...string) (string, error) { return kubectlWith(mgmtKC, args...) }
	// The cluster host: kind until the pivot, then the management cluster.
	host := func(args ...string) (string, error) {
		if _, err := os.Stat(mgmtKC); err == nil {
			if out, err := mgmt(args...); err == nil {
				return out, nil
			}
		}
		return kind(args...)
	}
	head := strings.TrimSpace(engineless(t, "git", "-C", r.repo, "rev-parse", "HEAD"))
	knobs := []string{r.withMirrors(t, ghcrMirror+k8sMirror+quayMirror),
		"KROPS_OCI_GIT_SHA=" + head, "KROPS_OCI_GIT_REF=HEAD", "KROPS_OCI_SOURCE_URL=https://github.com/kropsdev/krops",
		"KROPS_CHART_REPOSITORY=oci://localhost:5001/charts", "KROPS_PROVIDER_REPOSITORY=oci://" + providerRepository,
		"KROPS_FLUX_REGISTRY=" + fluxRegistry,
		// Flux on kind follows the tree through both clusters and the
		// workload Flux before the pivot: more than the 15 min default on
		// 2 cores.
		"LOCAL_RECONCILE_TIMEOUT=40m"}
	volumesBefore := engine(t, "volume", "ls", "-q")
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "fluxinstance,kustomization,helmrelease,ocirepository,helmrepository", "-A"},
				{"get", "cluster,machine,kubeadmcontrolplane,dockermachine", "-A"}, {"get", "coreprovider,bootstrapprovider,controlplaneprovider,infrastructureprovider", "-A"},
				{"get", "events", "-A", "--sort-by=.lastTimestamp"}} {
				out, _ := host(q...)
				t.Logf("kubectl %s:\n%s", strings.Join(q, " "), out)
			}
			if wkc, err := hostKubeconfig(t, host, laneWorkload, dir); err == nil {
				out, _ := kubectlWith(wkc, "get", "pods,fluxinstance,kustomization,helmrelease,ocirepository", "-A")
				t.Logf("on %s:\n%s", laneWorkload, out)
			}
		}
		// Whatever the outcome, the engine keeps nothing of the run.
		if left := engineLeft(); len(left) > 0 {
			_, _, _ = r.task(t, knobs, nil, "teardown", "ENV=local-host")
			for _, c := range append(capdContainers(t, laneMgmt), capdContainers(t, laneWorkload)...) {
				_ = exec.Command("docker", "rm", "-f", strings.Fields(c)[0]).Run()
			}
			_, _ = r.run(t, nil, "krops-sweep", "local-host")
		}
	})

	phases := map[string]time.Duration{}
	var kropsCPU time.Duration
	ledger := startCPULedger(t)
	res, took, ps := r.task(t, knobs, nil, "kind", "ENV=local-host")
	if res.Code != 0 {
		t.Fatalf("task kind: exit %d after %v\n%s\n%s", res.Code, took, res.Stdout, res.Stderr)
	}
	phases["kind"], kropsCPU = took, kropsCPU+cpu(ps)
	start := time.Now()
	stockForLocalHost(t, r, f, l)
	phases["stocking the registry"] = time.Since(start)

	// What the bootstrap reaches, seen from outside while it runs.
	ready := `jsonpath={.status.conditions[?(@.type=="Ready")].status}`
	available := `jsonpath={.status.conditions[?(@.type=="Available")].status}`
	workloadKC := ""
	watched := watchMilestones(map[string]func() bool{
		"Flux Ready on kind": func() bool {
			out, err := kind("get", "fluxinstance", "flux", "-n", "flux-system", "-o", ready)
			return err == nil && out == "True"
		},
		"providers Ready": func() bool {
			out, err := host("get", "kustomization", "capi-providers", "-n", "flux-system", "-o", ready)
			return err == nil && out == "True"
		},
		"management cluster Available": func() bool {
			out, err := host("get", "cluster", laneMgmt, "-o", available)
			return err == nil && out == "True"
		},
		"workload cluster Available": func() bool {
			out, err := host("get", "cluster", laneWorkload, "-o", available)
			return err == nil && out == "True"
		},
		"workload Flux Ready": func() bool {
			out, err := host("get", "kustomization", "local-workload-flux", "-n", "default", "-o", ready)
			return err == nil && out == "True"
		},
		"Podinfo Ready": func() bool {
			if workloadKC == "" {
				if p, err := hostKubeconfig(t, host, laneWorkload, dir); err == nil {
					workloadKC = p
				}
			}
			out, err := kubectlWith(workloadKC, "get", "helmrelease", "podinfo", "-n", "podinfo", "-o", ready)
			return workloadKC != "" && err == nil && out == "True"
		},
		"kind deleted": func() bool {
			out, err := exec.Command("docker", "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+laneCluster, "--format", "{{.Names}}").Output()
			return err == nil && strings.TrimSpace(string(out)) == ""
		},
	})
	var lines []string
	var lineMu sync.Mutex
	stamp := func(ln string) {
		lineMu.Lock()
		lines = append(lines, fmt.Sprintf("%6s %s", time.Since(watched.start).Round(time.Second), ln))
		lineMu.Unlock()
	}
	// Fault: the pivot SIGKILLed in the middle of the move (15 s after it
	// begins; the move takes minutes here), then the same command again.
	// The rerun must not seed kind again (its Flux is suspended for the
	// move) and the pivot must resume.
	// task runs it by the Taskfile's relative path (bin/krops-pivot).
	pivotBin := "bin/krops-pivot --from-bootstrap"
	var killOnce sync.Once
	killed := make(chan time.Duration, 1)
	onBootstrap := func(ln string) {
		stamp(ln)
		if strings.Contains(ln, "• moving the Cluster API objects") {
			killOnce.Do(func() {
				time.AfterFunc(15*time.Second, func() {
					err := exec.Command("pkill", "-KILL", "-f", pivotBin).Run()
					stamp(fmt.Sprintf("[test] SIGKILL to %s: %v", pivotBin, err))
					killed <- time.Since(watched.start)
				})
			})
		}
	}
	res, took, ps = r.task(t, knobs, onBootstrap, "bootstrap", "ENV=local-host")
	phases["bootstrap"], kropsCPU = took, kropsCPU+cpu(ps)
	firstRun := res
	var killedAt time.Duration
	select {
	case killedAt = <-killed:
	default:
	}
	if killedAt > 0 && res.Code != 0 && !strings.Contains(res.Stderr, "✔ moving the Cluster API objects") {
		res, took, ps = r.task(t, knobs, onBootstrap, "bootstrap", "ENV=local-host")
		phases["bootstrap"], kropsCPU = phases["bootstrap"]+took, kropsCPU+cpu(ps)
		if res.Code == 0 && (!strings.Contains(res.Stderr, "not seeding it again; the pivot resumes next") || !strings.Contains(res.Stderr, "resuming: the move began in an earlier run")) {
			t.Errorf("the rerun after the pivot's SIGKILL did not step the seed aside and resume the move")
		}
	} else {
		t.Errorf("the pivot was not killed in the middle of the move (killed at %v; first run exit %d)", killedAt, res.Code)
	}
	seen, peak := watched.finish()
	t.Logf("task bootstrap, pivot SIGKILLed %v in (first run exit %d), then rerun: exit %d, both %v, their processes' CPU %v; output with times:\n%s\n%s", killedAt.Round(time.Second), firstRun.Code, res.Code, phases["bootstrap"].Round(time.Second), kropsCPU.Round(time.Second), strings.Join(lines, "\n"), res.Stdout)
	var order []string
	for k := range seen {
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool { return seen[order[i]] < seen[order[j]] })
	for _, k := range order {
		t.Logf("bootstrap: %s after %v", k, seen[k].Round(time.Second))
	}
	t.Logf("engine containers' memory at its peak: %.0f MiB", peak)
	if res.Code != 0 {
		t.Fatalf("task bootstrap ENV=local-host: exit %d", res.Code)
	}

	// After the pivot the management cluster manages itself and the
	// workload cluster; kind is gone.
	if left := leftovers(t, laneCluster); len(left) != 1 || !strings.HasPrefix(left[0], "container krops-registry") {
		t.Errorf("after the pivot the engine has %v, want only the registry of krops's own (kind deleted)", left)
	}
	for _, c := range []string{laneMgmt, laneWorkload} {
		if out, err := mgmt("get", "cluster", c, "-o", available); err != nil || out != "True" {
			t.Errorf("Cluster %s on the management cluster (Available): %q %v", c, out, err)
		}
	}
	if workloadKC == "" {
		p, err := hostKubeconfig(t, mgmt, laneWorkload, dir)
		if err != nil {
			t.Fatal(err)
		}
		workloadKC = p
	}
	waitFor(t, "Podinfo Ready on "+laneWorkload, 10*time.Minute, func() (bool, string) {
		out, err := kubectlWith(workloadKC, "get", "helmrelease", "podinfo", "-n", "podinfo", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
		return err == nil && strings.HasPrefix(out, "True"), out
	})
	status, body := forwardAndGet(t, r, "/version", regexp.MustCompile(`to pod podinfo/podinfo-[a-z0-9-]+ port 9898 \(Service podinfo\) on cluster local-workload`))
	t.Logf("podinfo: HTTP %d %s", status, strings.TrimSpace(body))
	// The management cluster manages itself through Flux: every
	// Kustomization of the tree Ready there, the releases the pivot
	// installed taken over by helm-controller.
	start = time.Now()
	waitFor(t, "the management cluster's Flux Kustomizations Ready", 15*time.Minute, func() (bool, string) {
		out, err := mgmt("get", "kustomization", "-n", "flux-system", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`)
		return err == nil && out != "" && !strings.Contains(out, "=False") && !strings.Contains(out, "=Unknown") && strings.Count(out, "=True") == strings.Count(out, "="), out
	})
	t.Logf("the management cluster's Flux Ready %v after Podinfo answered", time.Since(start).Round(time.Second))

	// Fault: the management cluster's API server (its control-plane
	// node container) paused while the teardown deletes the workload
	// Cluster: the state is unknown, so exit 3 with the management
	// cluster, the registry and the context kept; the rerun once it is
	// back finishes.
	cpNode := strings.TrimSpace(engine(t, "ps", "--filter", "label=io.x-k8s.kind.cluster="+laneMgmt, "--filter", "label=io.x-k8s.kind.role=control-plane", "--format", "{{.Names}}"))
	if cpNode == "" || strings.Contains(cpNode, "\n") {
		t.Fatalf("the management cluster's control-plane node container: %q", cpNode)
	}
	var pausedAt time.Duration
	start = time.Now()
	faulted, took, ps := r.task(t, knobs, func(ln string) {
		if pausedAt == 0 && strings.Contains(ln, "deleting Clusters") {
			pausedAt = time.Since(start)
			engine(t, "pause", cpNode)
		}
	}, "teardown", "ENV=local-host")
	phases["teardown"], kropsCPU = took, kropsCPU+cpu(ps)
	mgmtLeft := capdContainers(t, laneMgmt)
	engine(t, "unpause", cpNode)
	if pausedAt == 0 {
		t.Fatalf("the teardown never reached the Clusters' deletion (exit %d)\n%s\n%s", faulted.Code, faulted.Stdout, faulted.Stderr)
	}
	t.Logf("teardown with the management cluster's API server paused %v in: exit %d after %v\n%s\n%s", pausedAt.Round(time.Second), faulted.Code, took.Round(time.Second), faulted.Stderr, faulted.Stdout)
	if faulted.Code != 3 {
		t.Errorf("teardown with the management cluster's API server paused: exit %d, want 3", faulted.Code)
	}
	if len(mgmtLeft) != 3 {
		t.Errorf("after the exit 3 the management cluster's containers are %v, want its three (load balancer, control plane, worker)", mgmtLeft)
	}
	if engine(t, "ps", "-a", "--filter", "name=^krops-registry$", "--format", "{{.Names}}") != "krops-registry" {
		t.Errorf("after the exit 3 the engine lost the registry")
	}
	if b, err := os.ReadFile(mgmtKC); err != nil || !strings.Contains(string(b), "krops-local-host-mgmt") {
		t.Errorf("after the exit 3 the management kubeconfig lost its context: %v", err)
	}

	res, took, ps = r.task(t, knobs, nil, "teardown", "ENV=local-host")
	phases["teardown"], kropsCPU = phases["teardown"]+took, kropsCPU+cpu(ps)
	if res.Code != 0 {
		t.Fatalf("task teardown (rerun): exit %d after %v\n%s\n%s", res.Code, took, res.Stdout, res.Stderr)
	}
	t.Logf("task teardown took %v\n%s\n%s", took.Round(time.Second), res.Stderr, res.Stdout)
	if strings.Contains(res.Stderr, "admission webhook") {
		t.Logf("the teardown's rerun met Cluster API's webhooks restarting after the pause, waited for them and went on")
	}
	// What is left is what the engine and the kubeconfig list, not what
	// krops reports.
	if left := engineLeft(); len(left) > 0 {
		t.Errorf("after teardown the engine still has %v", left)
	}
	if v := newVolumes(t, volumesBefore); len(v) > 0 {
		t.Errorf("after teardown the engine still has the volumes %v", v)
	}
	if n := engine(t, "network", "ls", "--format", "{{.Name}}"); strings.Contains(n, "krops") {
		t.Errorf("after teardown the engine still has a network of krops:\n%s", n)
	}
	for _, kc := range []string{filepath.Join(r.home, ".kube", "config"), mgmtKC} {
		if b, err := os.ReadFile(kc); err == nil && (strings.Contains(string(b), laneCluster) || strings.Contains(string(b), laneMgmt)) {
			t.Errorf("after teardown %s still names the environment's clusters:\n%s", kc, b)
		}
	}
	again, _, _ := r.task(t, knobs, nil, "teardown", "ENV=local-host")
	if again.Code != 0 {
		t.Errorf("a second teardown: exit %d, want 0 (nothing to do)\n%s", again.Code, again.Stderr)
	}

	var wall time.Duration
	var report []string
	for _, k := range []string{"kind", "stocking the registry", "bootstrap", "teardown"} {
		wall += phases[k]
		report = append(report, fmt.Sprintf("%s %v", k, phases[k].Round(time.Second)))
	}
	t.Logf("phases: %s", strings.Join(report, ", "))
	lifecycle := phases["kind"] + phases["bootstrap"] + phases["teardown"]
	t.Logf("krops's own CPU (the task runner, the binaries and their build) %v of the lifecycle's %v wall time: %.1f%%",
		kropsCPU.Round(time.Second), lifecycle.Round(time.Second), 100*kropsCPU.Seconds()/lifecycle.Seconds())
	split := ledger.report(kropsCPU)
	t.Logf("of which the build (tools/scripts/build.sh and below: the binaries relinked once for the new version, then skipped) %v; krops's programs (task, the binaries, their plugins and the docker calls they make) %v, %.1f%% of the wall time; not sampled %v. By program:\n%s",
		split.build.Round(100*time.Millisecond), split.programs.Round(100*time.Millisecond), 100*split.programs.Seconds()/lifecycle.Seconds(), split.unsampled.Round(100*time.Millisecond), strings.Join(split.by, "\n"))
}
