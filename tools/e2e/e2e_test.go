package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/testenv"
)

func itoa(n int) string { return strconv.Itoa(n) }

// phase is one part of the lifecycle, for the report.
type phase struct {
	name          string
	wall, waiting time.Duration
}

// The local-host lifecycle end to end, with a fault in every phase and a
// rerun of the same command after each:
//
//   - `task bootstrap`'s chain creates "kind", the engine failing half
//     way through the first create (exit 1; the rerun creates it); the
//     real Flux Operator and Flux reconcile the e2e tree; the source-controller dies during the
//     seed (the seed runs out of time, exit 1; the rerun converges);
//   - the real Cluster API controllers provision local-management and
//     local-workload, and krops-pivot moves them, killed (SIGKILL) at every
//     step boundary and rerun until it finishes; kind is deleted;
//   - bootstrapping again is refused: a new kind would build the moved
//     Clusters a second time;
//   - the management cluster's own Cluster API controllers take over;
//   - `tools/task.sh teardown` loses the management cluster's API in the
//     middle (exit 3 through task, nothing more deleted), and the rerun
//     once it is back deletes the workload cluster through the real
//     cascade, removes the management cluster's one stand-in container
//     (its load balancer: the in-memory backend makes no others) and the
//     registry, and forgets its context.
func TestLocalHostLifecycle(t *testing.T) {
	// Each phase's time goes to the log, for the budget (docs/testing.md).
	mark := time.Now()
	lap := func(phase string) {
		t.Logf("phase %s took %s", phase, time.Since(mark).Round(100*time.Millisecond))
		mark = time.Now()
	}
	defer lap("teardown")
	l := newLifecycle(t)
	lap("harness")
	chain := l.bootstrap()
	kindWithAFailingEngine(t, l, chain[:3])
	lap("kind")
	if got := strings.Join(l.kind.created, ","); got != "krops-local-host" {
		t.Fatalf("kind clusters created: %q, want mgmt", got)
	}
	// The node's containerd sends localhost:<port> to the registry
	// container (the real lane proves the pull itself).
	hosts, ok := l.kind.nodeFile("krops-local-host", "/etc/containerd/certs.d/localhost:"+l.registryPort+"/hosts.toml")
	if !ok || !strings.Contains(hosts, `[host."http://krops-registry:5000"]`) {
		t.Errorf("the kind node's mirror for the local registry (found: %t):\n%s", ok, hosts)
	}

	seedWithoutSourceController(t, l, chain[3])
	lap("seed")
	runID := l.runID(t)
	pivotKilledAtEveryStep(t, l, chain[4])
	lap("pivot")
	if got := strings.Join(l.kind.deleted, ","); got != "krops-local-host" {
		t.Errorf("kind clusters deleted by the pivot: %q, want mgmt", got)
	}
	if _, err := os.Stat(filepath.Join(l.home, ".kube", "krops-local-host-mgmt.yaml")); err != nil {
		t.Errorf("the management cluster's kubeconfig: %v", err)
	}
	if got := l.targetRunID(t); got != runID {
		t.Errorf("the management cluster carries run %q, kind had %q", got, runID)
	}

	bootstrapAgainIsRefused(t, l, chain, runID)
	lap("bootstrap-again")

	l.controllersTakeOver(t)
	lap("controllers-take-over")
	teardownLosingTheAPI(t, l)
	if has, err := kubecfg.HasContext(filepath.Join(l.home, ".kube", "krops-local-host-mgmt.yaml"), "krops-local-host-mgmt"); err != nil || has {
		t.Errorf("the teardown left context krops-local-host-mgmt behind (%v): the next bootstrap would stop on it", err)
	}
}

// bootstrapAgainIsRefused reruns `task bootstrap`'s first commands after
// the pivot: a new kind would run a second Cluster API that builds the
// moved Clusters again, so its preflight and `krops-kind up` refuse
// (exit 2), naming the run, and no kind cluster is created.
func bootstrapAgainIsRefused(t *testing.T, l *lifecycle, chain [][]string, runID string) {
	t.Helper()
	for _, argv := range [][]string{chain[0], chain[2]} {
		r := l.run(t, runOptions{}, argv...)
		if r.Code != 2 || !strings.Contains(r.Stdout+r.Stderr, "run "+runID+" pivoted into the management cluster behind context krops-local-host-mgmt") {
			t.Errorf("%s after the pivot: exit %d, want 2 naming run %s\n%s\n%s", label(argv), r.Code, runID, r.Stdout, r.Stderr)
		}
	}
	if got := strings.Join(l.kind.created, ","); got != "krops-local-host" {
		t.Errorf("kind clusters created: %q, want only the first bootstrap's mgmt", got)
	}
}

// kindWithAFailingEngine runs `task bootstrap`'s first three commands
// with the engine failing half way through the first create: `krops-kind
// up` exits 1 naming the engine's error, no cluster is left, and the rerun
// creates it.
func kindWithAFailingEngine(t *testing.T, l *lifecycle, argv [][]string) {
	t.Helper()
	l.mustRun(t, runOptions{}, argv[0]...)
	l.mustRun(t, runOptions{}, argv[1]...)
	l.kind.mu.Lock()
	l.kind.failCreates = 1
	l.kind.mu.Unlock()
	r := l.run(t, runOptions{}, argv[2]...)
	if r.Code != 1 || !strings.Contains(r.Stderr, "creating kind cluster krops-local-host") || !strings.Contains(r.Stderr, "exit status 125") {
		t.Fatalf("krops-kind up with the engine failing: exit %d, want 1 naming the engine's error\n%s", r.Code, r.Stderr)
	}
	if l.kind.cluster("krops-local-host") != nil {
		t.Fatal("a failed create left a kind cluster behind")
	}
	l.mustRun(t, runOptions{}, argv[2]...)
}

// seedWithoutSourceController kills the source-controller on kind as the
// seed applies the FluxInstance: Flux cannot fetch the artifact, the seed's
// wait runs out (exit 1, naming what it waited for), and once the
// controller is back the same command converges.
func seedWithoutSourceController(t *testing.T, l *lifecycle, argv []string) {
	t.Helper()
	flux := l.kind.cluster("krops-local-host").flux
	killed := false
	r := l.run(t, runOptions{env: []string{"LOCAL_RECONCILE_TIMEOUT=20s"}, onEvent: func(ev event, _ *os.Process) {
		if !killed && ev.Msg == "step started" && strings.HasPrefix(ev.Step, "FluxInstance") {
			flux.Kill(t, "source-controller")
			killed = true
		}
	}}, argv...)
	if !killed || r.Code != 1 || !strings.Contains(r.Stderr, "Kustomization flux-system/flux-system") {
		t.Fatalf("seed without source-controller (killed: %t): exit %d\n%s", killed, r.Code, r.Stderr)
	}
	flux.Start(t, "source-controller")
	l.mustRun(t, runOptions{}, argv...)
}

// pivotKilledAtEveryStep runs the pivot and kills it (SIGKILL) right
// after the first step it finishes that no earlier run was killed after,
// and reruns it, until a run finishes on its own: every step boundary the
// pivot reaches (its own steps and the seed's inside it) is a crash point
// once.
func pivotKilledAtEveryStep(t *testing.T, l *lifecycle, argv []string) {
	t.Helper()
	var killedAfter []string
	for run := 1; ; run++ {
		if run > 60 {
			t.Fatal("the pivot never finished")
		}
		killed := false
		r := l.run(t, runOptions{onEvent: func(ev event, p *os.Process) {
			if killed || ev.Msg != "step done" || slices.Contains(killedAfter, ev.Step) {
				return
			}
			_ = p.Signal(syscall.SIGKILL)
			killed = true
			killedAfter = append(killedAfter, ev.Step)
		}}, argv...)
		t.Logf("pivot run %d: exit %d in %s (waiting on controllers %s)", run, r.Code, r.wall.Round(100*time.Millisecond), r.waiting.Round(100*time.Millisecond))
		// Exit 0 with killed set: the kill came as the last step ended.
		if r.Code == 0 {
			t.Logf("the pivot finished on run %d, after %d kills, each right after a step:\n  %s", run, len(killedAfter), strings.Join(killedAfter, "\n  "))
			for _, want := range []string{"moving", "deleting kind", "FluxInstance"} {
				if !slices.ContainsFunc(killedAfter, func(s string) bool { return strings.HasPrefix(s, want) }) {
					t.Errorf("no kill right after a step starting %q", want)
				}
			}
			return
		}
		if !killed || r.Code != -1 {
			// Not our SIGKILL: the pivot failed by itself.
			t.Fatalf("pivot run %d: exit %d (killed: %t)\n%s\nstand-in engine calls:\n%s", run, r.Code, killed, r.Stderr, l.engineLog())
		}
	}
}

// controllersTakeOver starts the management cluster's own Cluster API
// controllers (installed by the pivot through the operator, which cannot
// run here) and waits until the moved Clusters are Available again.
func (l *lifecycle) controllersTakeOver(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	testenv.RunClusterAPIStack(t, l.target)
	for _, name := range []string{"local-management", "local-workload"} {
		testenv.WaitCluster(t, l.target, "default", name, testenv.ClusterAvailable, 4*time.Minute)
	}
	return time.Since(start)
}

// teardownLosingTheAPI takes the management cluster's API away as the
// teardown starts deleting Clusters: it stops with exit 3 (unknown state),
// through task, and removes nothing more; once the API is back, the rerun
// finishes.
func teardownLosingTheAPI(t *testing.T, l *lifecycle) {
	t.Helper()
	argv := l.teardown(t)
	down := false
	r := l.run(t, runOptions{onEvent: func(ev event, _ *os.Process) {
		if !down && ev.Msg == "step started" && strings.HasPrefix(ev.Step, "deleting Clusters") {
			l.lb.Down()
			down = true
		}
	}}, argv...)
	if !down || r.Code != 3 {
		t.Fatalf("teardown without the management cluster's API (down: %t): exit %d, want 3\n%s\nstand-in engine calls:\n%s", down, r.Code, r.Stderr, l.engineLog())
	}
	if log := l.engineLog(); strings.Contains(log, "rm ") {
		t.Errorf("the teardown removed containers on unknown state:\n%s", log)
	}
	if err := l.lb.Up(); err != nil {
		t.Fatal(err)
	}
	r = l.mustRun(t, runOptions{}, argv...)
	if l.exists(t, "local-workload") {
		t.Error("the workload Cluster is still there after the teardown")
	}
	if !l.exists(t, "local-management") {
		t.Error("the teardown asked the management Cluster to delete itself")
	}
	log := l.engineLog()
	for _, want := range []string{"ps -a --filter name=^local-management", "rm -f -v local-management-lb", "rm -f -v krops-registry"} {
		if !strings.Contains(log, want) {
			t.Errorf("the teardown did not run %q; engine calls:\n%s", want, log)
		}
	}
}

// teardown is `tools/task.sh teardown ENV=local-host`, the README's
// command, with the stand-in-kind builds as BIN.
func (l *lifecycle) teardown(t testing.TB) []string {
	t.Helper()
	return []string{filepath.Join(absRepo(t), "tools", "task.sh"), "teardown", "ENV=local-host", "BIN=" + l.bin, "--", "--log-format", "json"}
}

// taskCache is a cache directory (XDG_CACHE_HOME) in which tools/task.sh
// finds the pinned task it would otherwise install: the test's HOME is
// empty, and installing task there would download and build it each run.
func taskCache(t testing.TB) string {
	t.Helper()
	bin := testenv.Program(t, "KROPS_TASK_BIN", "task", "run tests through `tools/task.sh test`, which installs the pinned task")
	script, err := os.ReadFile(filepath.Join(repo, "tools", "task.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TASK_VERSION=(\S+)`).FindSubmatch(script)
	if m == nil {
		t.Fatal("tools/task.sh sets no TASK_VERSION")
	}
	cache := t.TempDir()
	dir := filepath.Join(cache, "krops", "tools", "task-"+string(m[1]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "task")); err != nil {
		t.Fatal(err)
	}
	return cache
}

func absRepo(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (l *lifecycle) exists(t testing.TB, name string) bool {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testenv.ClusterGVK)
	err := l.target.Client.Get(l.ctx, client.ObjectKey{Namespace: "default", Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// runID is the run kind's krops-run ConfigMap records.
func (l *lifecycle) runID(t testing.TB) string {
	t.Helper()
	return runIDOn(t, l.kind.cluster("krops-local-host").api)
}

func (l *lifecycle) targetRunID(t testing.TB) string {
	t.Helper()
	return runIDOn(t, l.target)
}

func runIDOn(t testing.TB, c *testenv.Cluster) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Client.Get(t.Context(), client.ObjectKey{Namespace: "flux-system", Name: "krops-run"}, &cm); err != nil {
		t.Fatalf("the run metadata: %v", err)
	}
	return cm.Data["KROPS_RUN_ID"]
}

// report prints the phases: wall time, waiting on controllers, krops's own.
func report(t testing.TB, phases []phase) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %8s %8s %8s\n", "phase", "wall", "waiting", "own")
	for _, p := range phases {
		fmt.Fprintf(&b, "%-28s %7.1fs %7.1fs %7.1fs\n", p.name, p.wall.Seconds(), p.waiting.Seconds(), (p.wall - p.waiting).Seconds())
	}
	return b.String()
}
