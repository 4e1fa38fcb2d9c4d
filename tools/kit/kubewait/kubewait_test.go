package kubewait_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/configartifact"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/testenv"
)

var kustomizations = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}

func ks(name string) kubewait.Target {
	return kubewait.Target{Resource: kustomizations, Kind: "Kustomization", Namespace: "flux-system", Name: name}
}

// fluxWithArtifact runs the real Flux source-controller and
// kustomize-controller, and pushes an artifact holding two directories to a
// real loopback registry: good/ (a ConfigMap) and broken/ (a manifest the
// API server refuses).
func fluxWithArtifact(t *testing.T) (*testenv.Cluster, dynamic.Interface) {
	t.Helper()
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxSource, testenv.FluxKustomize}})
	testenv.Flux(t, cluster)
	reg := testenv.Registry(t)
	root := t.TempDir()
	files := map[string]string{
		"good/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seeded\n  namespace: default\ndata:\n  a: b\n",
		"broken/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Valid_Name\n  namespace: default\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: root, Paths: []string{"good", "broken"}, Revision: "main@sha1:0000000000000000000000000000000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	repo := reg.Host + "/krops/wait"
	if _, err := configartifact.Push(ctx, a, repo+":latest", configartifact.PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	cluster.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: src, namespace: flux-system}
spec: {interval: 1m, url: "oci://%s", ref: {tag: latest}, insecure: true}
`, repo))
	return cluster, dynamic.NewForConfigOrDie(cluster.Config)
}

func kustomization(name, path string) string {
	return fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %s, namespace: flux-system}
spec: {interval: 1m, retryInterval: 5s, timeout: 30s, prune: true, path: ./%s, sourceRef: {kind: OCIRepository, name: src}}
`, name, path)
}

// The real controllers reconcile; the wait sees their conditions.
func TestWaitsForTheRealFluxControllers(t *testing.T) {
	cluster, dyn := fluxWithArtifact(t)
	ctx := context.Background()

	t.Run("a Kustomization that applies is waited for, and progress is shown", func(t *testing.T) {
		var mu sync.Mutex
		var seen []string
		// Created after the wait starts: "not found yet" first.
		go func() {
			time.Sleep(500 * time.Millisecond)
			cluster.CreateYAML(t, ctx, kustomization("good", "good"))
		}()
		err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 2 * time.Minute, OnChange: func(s []kubewait.State) {
			mu.Lock()
			seen = append(seen, s[0].String())
			mu.Unlock()
		}}, ks("good"))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 || seen[len(seen)-1] != "Kustomization flux-system/good: Ready" {
			t.Errorf("progress %q", seen)
		}
	})

	t.Run("a timeout names the blocking Kustomization with Flux's message", func(t *testing.T) {
		cluster.CreateYAML(t, ctx, kustomization("broken", "broken"))
		err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 20 * time.Second}, ks("good"), ks("broken"))
		var te *kubewait.TimeoutError
		if !errors.As(err, &te) || len(te.Blocking) != 1 || te.Blocking[0].Target.Name != "broken" {
			t.Fatalf("err = %v", err)
		}
		// Flux retries, so the wait may end on False or back on Unknown;
		// either way the refusal's reason is there.
		if msg := te.Blocking[0].String(); !strings.Contains(msg, "Not_A_Valid_Name") {
			t.Errorf("blocking %q must carry Flux's reason", msg)
		}
	})

	t.Run("Ctrl-C stops the wait at once", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		go func() { time.Sleep(300 * time.Millisecond); cancel() }()
		start := time.Now()
		err := kubewait.All(cctx, kubewait.Options{Client: dyn, Timeout: time.Minute}, ks("never-created"))
		if !errors.Is(err, kubewait.ErrInterrupted) || !strings.Contains(err.Error(), "Kustomization flux-system/never-created: not found yet") {
			t.Errorf("err = %v", err)
		}
		// Bounded by the minute-long timeout otherwise.
		if time.Since(start) > 30*time.Second {
			t.Errorf("the interrupted wait took %v", time.Since(start))
		}
	})
}

// A Ready=True that speaks for an older generation is stale. The condition
// is written by hand here (a STAND-IN for a controller that has not caught
// up with a spec change yet).
func TestAStaleReadyIsNotReady(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxKustomize}})
	ctx := context.Background()
	cluster.CreateYAML(t, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n")
	u := cluster.CreateYAML(t, ctx, kustomization("k", "x"))
	if err := testenv.SetCondition(ctx, cluster.Client, u, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	if err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 10 * time.Second}, ks("k")); err != nil {
		t.Fatalf("ready at generation 1: %v", err)
	}
	cur, err := dyn.Resource(kustomizations).Namespace("flux-system").Get(ctx, "k", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["spec"].(map[string]any)["path"] = "./y" // generation 2
	if _, err := dyn.Resource(kustomizations).Namespace("flux-system").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 2 * time.Second}, ks("k"))
	var te *kubewait.TimeoutError
	if !errors.As(err, &te) || !strings.Contains(te.Blocking[0].Message, "stale (it speaks for generation 1, the object is at 2)") {
		t.Errorf("err = %v", err)
	}
}

// A controller that retries flips False, Unknown, False: the last failure
// stays visible while the condition is Unknown.
func TestTheLastFailureOutlivesARetry(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxKustomize}})
	ctx := context.Background()
	cluster.CreateYAML(t, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n")
	u := cluster.CreateYAML(t, ctx, kustomization("k", "x"))
	set := func(status metav1.ConditionStatus, reason, msg string) {
		if err := testenv.SetCondition(ctx, cluster.Client, u, metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: msg, ObservedGeneration: 1}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		set(metav1.ConditionFalse, "BuildFailed", "kustomize build failed: bad patch")
		time.Sleep(300 * time.Millisecond)
		set(metav1.ConditionUnknown, "Progressing", "Reconciliation in progress")
	}()
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 2 * time.Second}, ks("k"))
	var te *kubewait.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v", err)
	}
	got := te.Blocking[0].String()
	if !strings.Contains(got, "Ready=Unknown Progressing") || !strings.Contains(got, "(last failure: Ready=False BuildFailed: kustomize build failed: bad patch)") {
		t.Errorf("blocking %q", got)
	}
}

// A controller that sets Stalled=True has given up until the object
// changes: the wait ends with its reason instead of running into the
// timeout, and the other targets' waits end with it. The conditions are
// written by hand (a STAND-IN for the Flux Operator's terminal BuildFailed,
// which the real-engine lane met).
func TestAStalledTargetEndsTheWait(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxKustomize}})
	ctx := context.Background()
	cluster.CreateYAML(t, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n")
	u := cluster.CreateYAML(t, ctx, kustomization("k", "x"))
	for _, c := range []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "BuildFailed", Message: "failed to read /etc/os-release", ObservedGeneration: 1},
		{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "BuildFailed", Message: "failed to read /etc/os-release", ObservedGeneration: 1},
	} {
		if err := testenv.SetCondition(ctx, cluster.Client, u, c); err != nil {
			t.Fatal(err)
		}
	}
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	// A timeout the test would notice: a wait that ignored the stall
	// would end in a TimeoutError after it.
	err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 2 * time.Minute}, ks("never-there"), ks("k"))
	var se *kubewait.StalledError
	if !errors.As(err, &se) || se.State.Target.Name != "k" ||
		err.Error() != "Kustomization flux-system/k is stalled (its controller gave up and retries only when the object changes): Ready=False BuildFailed: failed to read /etc/os-release" {
		t.Fatalf("err = %v", err)
	}

	// Stalled for an older generation speaks for nothing: the spec
	// changed, the controller will try again.
	cur, err := dyn.Resource(kustomizations).Namespace("flux-system").Get(ctx, "k", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["spec"].(map[string]any)["path"] = "./y" // generation 2
	if _, err := dyn.Resource(kustomizations).Namespace("flux-system").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 2 * time.Second}, ks("k"))
	var te *kubewait.TimeoutError
	if !errors.As(err, &te) || te.Blocking[0].Stalled {
		t.Errorf("after a spec change: err = %v", err)
	}
}

// A wait that sees no change repeats its summary at the heartbeat, and a
// change restarts the count; without a heartbeat it reports changes only.
func TestHeartbeatRepeatsAQuietWait(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxKustomize}})
	ctx := context.Background()
	cluster.CreateYAML(t, ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n")
	dyn := dynamic.NewForConfigOrDie(cluster.Config)
	var mu sync.Mutex
	var lines []string
	report := func(l string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, l)
	}
	err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 1500 * time.Millisecond, Report: report, Heartbeat: 400 * time.Millisecond}, ks("never"))
	if !errors.Is(err, kubewait.ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	mu.Lock()
	got := append([]string(nil), lines...)
	mu.Unlock()
	beats := 0
	for _, l := range got {
		if strings.HasPrefix(l, "still waiting after ") && strings.HasSuffix(l, ": 0 of 1 ready; waiting for Kustomization flux-system/never: not found yet") {
			beats++
		}
	}
	// 1.5 s at 0.4 s: three beats, give or take the scheduler.
	if beats != len(got) || beats < 2 || beats > 3 {
		t.Errorf("reported (%d beats):\n%s", beats, strings.Join(got, "\n"))
	}
	lines = nil
	if err := kubewait.All(ctx, kubewait.Options{Client: dyn, Timeout: 900 * time.Millisecond, Report: report}, ks("never")); !errors.Is(err, kubewait.ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	if len(lines) != 0 {
		t.Errorf("without a heartbeat, a wait without a change reports nothing: %q", lines)
	}
}
