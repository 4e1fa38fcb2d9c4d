package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/procfs"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/kit/lock"
	"github.com/kropsdev/krops/tools/testenv"
)

// The tests run the real krops-kind binary with the real docker plugin. No
// container engine runs here, so "docker" and "podman" on PATH are
// STAND-INS that fail like an engine that is not running.

func TestMain(m *testing.M) {
	// Helper mode: hold the kind lock like a running `krops-kind up`.
	if name := os.Getenv("KROPS_KIND_TEST_HOLD"); name != "" {
		l, err := lock.Acquire(lock.Options{Name: name, Holder: lock.Holder{RunID: "first-run", Command: "krops-kind up local-host"}})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Hour)
		l.Release()
	}
	sdktest.Main(m)
}

type fixture struct {
	dir, bin string
	env      []string
}

var toml = testenv.BootstrapTOML(testenv.LocalHost())

func setup(t *testing.T) fixture {
	t.Helper()
	testenv.Integration(t)
	dir := t.TempDir()
	f := fixture{dir: dir, bin: testenv.BuildBinary(t, ".", "krops-kind")}
	plugins := filepath.Join(dir, "plugins")
	stand := filepath.Join(dir, "standin-bin")
	for _, d := range []string{plugins, stand, filepath.Join(dir, "airgap")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sdktest.Install(t, plugins, "github.com/kropsdev/krops/plugins/docker", "docker")
	images, err := os.ReadFile("../../airgap/images.txt")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"bootstrap.toml":    toml,
		"airgap/images.txt": string(images),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, engine := range []string{"docker", "podman"} {
		script := "#!/bin/sh\necho \"Cannot connect to the " + engine + " daemon. Is it running?\" >&2\nexit 1\n"
		if err := os.WriteFile(filepath.Join(stand, engine), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.env = append([]string{"PATH=" + sdktest.PathWithoutEngines(t, "/usr/bin:/bin", stand), "HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"KROPS_PLUGIN_DIR=" + plugins, "KUBECONFIG=" + filepath.Join(dir, "kube", "config")}, sdktest.NoEngineEnv...)
	return f
}

func (f fixture) run(t *testing.T, extra []string, args ...string) testenv.Result {
	t.Helper()
	return testenv.RunBinary(t, f.dir, append(append([]string{}, f.env...), extra...), f.bin, args...)
}

func TestPreflightWithoutAnEngineNamesBoth(t *testing.T) {
	f := setup(t)
	r := f.run(t, nil, "preflight")
	if r.Code != 2 {
		t.Fatalf("exit %d, want 2:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"✗ container engine: no container engine answers: docker info", "podman info", "set CONTAINER_ENGINE", "ENGINE_SOCK",
		"✔ KUBECONFIG: " + filepath.Join(f.dir, "kube", "config"), "✔ node image: docker.io/kindest/node:v1.37.0@sha256:",
		"✔ earlier pivot: none (no context krops-local-host-mgmt in " + filepath.Join(f.dir, ".kube", "krops-local-host-mgmt.yaml") + ")"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("preflight output lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Count(r.Stdout, "✗ container engine:") != 1 {
		t.Errorf("the engine check must be reported once:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "nothing was changed") {
		t.Errorf("stderr: %s", r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "kube")); err == nil {
		t.Error("preflight created the kubeconfig directory")
	}
}

// A bad [[mirrors]] entry stops every command before anything runs (exit
// 2), naming the file, the entry and the fix, and never echoing a
// password it carries.
func TestABadMirrorIsRefusedByName(t *testing.T) {
	f := setup(t)
	for _, tc := range []struct{ entry, want string }{
		{"registry = \"https://docker.io\"\nendpoints = [\"https://m.example.com\"]", `registry "https://docker.io" is not a registry host`},
		{"registry = \"ghcr.io\"\nendpoints = [\"https://bob:hunter2@m.example.com\"]", "carries credentials"},
	} {
		cfg := filepath.Join(f.dir, "bootstrap.toml")
		if err := os.WriteFile(cfg, []byte(toml+"\n[[mirrors]]\n"+tc.entry+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := f.run(t, nil, "preflight")
		if r.Code != 2 || !strings.Contains(r.Stderr, cfg+" [[mirrors]] entry 1") || !strings.Contains(r.Stderr, tc.want) || strings.Contains(r.Stdout+r.Stderr, "hunter2") {
			t.Errorf("%s: exit %d, want 2 naming the entry and %q\n%s\n%s", tc.entry, r.Code, tc.want, r.Stdout, r.Stderr)
		}
	}
}

// After a pivot the management cluster carries the run's metadata: a new
// kind cluster next to it would build its Clusters a second time, so the
// preflight refuses (exit 2) naming the run. A management context whose
// cluster does not answer is unknown state (exit 3), whatever else failed.
func TestPreflightStopsNextToAnEarlierPivot(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	mgmt := testenv.APIServer(t, testenv.ClusterOptions{Name: "krops-local-host-mgmt"})
	mgmt.CreateRunMetadata(t, ctx, "local-host-20261201t191333z")
	env := []string{"MGMT_KUBECONFIG=" + mgmt.Kubeconfig}
	r := f.run(t, env, "preflight")
	want := "✗ earlier pivot: the management cluster holds an earlier pivot: run local-host-20261201t191333z pivoted into the management cluster behind context krops-local-host-mgmt in " + mgmt.Kubeconfig
	if r.Code != 2 || !strings.Contains(r.Stdout, want) || !strings.Contains(r.Stdout, "task teardown ENV=local-host") {
		t.Fatalf("exit %d, want 2 and %q:\n%s\n%s", r.Code, want, r.Stdout, r.Stderr)
	}

	if err := mgmt.Stop(); err != nil {
		t.Fatal(err)
	}
	r = f.run(t, env, "preflight")
	if r.Code != 3 || !strings.Contains(r.Stdout, "✗ earlier pivot: the management cluster behind context krops-local-host-mgmt in "+mgmt.Kubeconfig+" does not answer") ||
		!strings.Contains(r.Stdout, "config delete-context krops-local-host-mgmt") {
		t.Fatalf("exit %d, want 3 naming the context and how to forget it:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// --log-format json turns the same checks into JSON records, one per
// line, each naming its intent; the text symbols do not appear.
func TestPreflightInJSON(t *testing.T) {
	f := setup(t)
	r := f.run(t, nil, "--log-format", "json", "preflight")
	if r.Code != 2 {
		t.Fatalf("exit %d, want 2:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	intents := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var rec struct{ Level, Msg, Intent string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q\n%s", line, r.Stdout)
		}
		intents[rec.Intent]++
		if rec.Intent == "failure" && (rec.Level != "ERROR" || !strings.HasPrefix(rec.Msg, "container engine: ")) {
			t.Errorf("failure record: %+v", rec)
		}
	}
	if intents["failure"] != 1 || intents["success"] < 2 {
		t.Errorf("intents %v, want one failure and the successes", intents)
	}
	if strings.ContainsAny(r.Stdout, "✔✗") {
		t.Errorf("text symbols in JSON output:\n%s", r.Stdout)
	}
}

func TestConfigurationErrorsExit2(t *testing.T) {
	f := setup(t)
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"KUBECONFIG list", []string{"KUBECONFIG=/a:/b"}, []string{"up"}, "is a list of files"},
		{"unknown environment", nil, []string{"up", "nope"}, `unknown environment "nope"`},
		{"bad output", nil, []string{"status", "--output", "yaml"}, "--output"},
	}
	for _, tc := range cases {
		r := f.run(t, tc.env, tc.args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.name, r.Code, r.Stderr, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, "airgap", "images.txt"), []byte("docker.io/kindest/node:v1.37.0 pending\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, nil, "up"); r.Code != 2 || !strings.Contains(r.Stderr, "has no digest yet") {
		t.Errorf("unpinned node image: exit %d, %s", r.Code, r.Stderr)
	}
}

// Two runs on one cluster name: the second is refused, naming the first;
// once the first dies (SIGKILL), its lock is taken over.
func TestASecondRunOnTheSameClusterIsRefused(t *testing.T) {
	f := setup(t)
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "KROPS_KIND_TEST_HOLD=kind-krops-local-host", "XDG_STATE_HOME="+filepath.Join(f.dir, "state"))
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "held" {
		t.Fatalf("holder: %q", line)
	}
	for _, cmd := range []string{"up", "down"} {
		r := f.run(t, nil, cmd)
		want := fmt.Sprintf("kind-krops-local-host is locked by another krops run (run first-run, pid %d, command \"krops-kind up local-host\"", holder.Process.Pid)
		if r.Code != 2 || !strings.Contains(r.Stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", cmd, r.Code, r.Stderr, want)
		}
	}
	// Another cluster name runs side by side: it gets past the lock (and
	// stops at the missing engine).
	if r := f.run(t, []string{"KROPS_KIND_CLUSTER=other"}, "up"); strings.Contains(r.Stderr, "is locked") || !strings.Contains(r.Stderr, "no container engine answers") {
		t.Errorf("another name: exit %d, %s", r.Code, r.Stderr)
	}
	r := f.run(t, nil, "status", "--output", "json")
	var st struct {
		Lock *lock.Holder `json:"lock_holder"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.Lock == nil || st.Lock.PID != holder.Process.Pid {
		t.Errorf("status must name the holder: %v %s", err, r.Stdout)
	}
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	r = f.run(t, nil, "up")
	if !strings.Contains(r.Stderr, "took over the lock of kind cluster krops-local-host from a run that is no longer running (run first-run") ||
		!strings.Contains(r.Stderr, "no container engine answers") {
		t.Errorf("after the holder died: exit %d\n%s", r.Code, r.Stderr)
	}
}

func TestStatusWithoutAnEngine(t *testing.T) {
	f := setup(t)
	r := f.run(t, nil, "status")
	if r.Code != 0 || !strings.Contains(r.Stdout, "kind cluster krops-local-host (context kind-krops-local-host)") || !strings.Contains(r.Stdout, "engine: none answers") ||
		!strings.Contains(r.Stdout, "locked by: nobody") {
		t.Errorf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	r = f.run(t, []string{"BOOTSTRAP_KUBECONTEXT=bootstrap", "KROPS_KIND_CLUSTER=blue"}, "status", "-o", "json")
	if !strings.Contains(r.Stdout, `"name": "blue"`) || !strings.Contains(r.Stdout, `"context": "bootstrap"`) {
		t.Errorf("overrides: %s", r.Stdout)
	}
}

// Names the user supplies become container, network, lock and context names
// and are printed by status: a path, a newline or an upper-case name is exit
// 2 naming the variable, before any command reads the engine or a lock. So
// is a kubeconfig that is a symlink loop or does not parse (the preflight
// read a loop as "does not exist").
func TestBadNamesAndKubeconfigsAreRefused(t *testing.T) {
	f := setup(t)
	for _, name := range []string{"../../etc", "a\nb", "Blue"} {
		for _, cmd := range []string{"status", "preflight", "up", "down"} {
			r := f.run(t, []string{"KROPS_KIND_CLUSTER=" + name}, cmd)
			if r.Code != 2 || !strings.Contains(r.Stderr, "KROPS_KIND_CLUSTER (which overrides bootstrap.kind-cluster") || strings.Contains(r.Stdout, "kind cluster "+name) {
				t.Errorf("%s with KROPS_KIND_CLUSTER=%q: exit %d\n%s\n%s", cmd, name, r.Code, r.Stdout, r.Stderr)
			}
		}
	}
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: [\x01"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{loop: "too many levels of symbolic links", garbage: "want a kubeconfig", dir: "not a directory"} {
		r := f.run(t, []string{"KUBECONFIG=" + path}, "preflight")
		if r.Code != 2 || !strings.Contains(r.Stderr, "KUBECONFIG=") || !strings.Contains(r.Stderr, want) {
			t.Errorf("preflight with KUBECONFIG=%s: exit %d, want 2 and %q\n%s", path, r.Code, want, r.Stderr)
		}
	}
}

// A supervisor's SIGINT reaches krops-kind alone, not its process group,
// while the engine hangs behind a wrapper that started a child of its own.
// The run stops at once, exits 130 (not 0: status did not read the
// engine), and neither the wrapper nor its child is left running.
func TestASupervisorsInterruptLeavesNoEngineProcess(t *testing.T) {
	f := setup(t)
	stand := filepath.Join(f.dir, "standin-bin")
	pids := filepath.Join(f.dir, "engine.pids")
	wrapper := "#!/bin/sh\nsleep 300 &\necho $$ $! >> " + pids + "\nwait\n"
	if err := os.WriteFile(filepath.Join(stand, "docker"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(f.bin, "status")
	cmd.Dir, cmd.Env = f.dir, append(append([]string{}, f.env...), "CONTAINER_ENGINE=docker")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as under a supervisor: no terminal group shares the signal
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var engine []int
	for deadline := time.Now().Add(20 * time.Second); len(engine) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pids); err == nil {
			var w, c int
			if _, err := fmt.Sscan(string(b), &w, &c); err == nil {
				engine = []int{w, c}
			}
		}
	}
	if len(engine) == 0 {
		_ = cmd.Process.Kill()
		t.Fatalf("the engine wrapper never ran:\n%s", out.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("status ignored the interrupt:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d after %v, want 130:\n%s", code, time.Since(start), out.String())
	}
	for _, pid := range engine {
		alive := true
		for deadline := time.Now().Add(5 * time.Second); alive && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			alive = procfs.Alive(pid)
		}
		if alive {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("engine process %d survived the interrupt", pid)
		}
	}
}

// Two environments on one machine: each has its own kind cluster, kind
// context, lock and management kubeconfig by default, so a local-host
// management cluster that holds a pivot stops local-host's bootstrap and
// not staging's, and a run holding local-host's kind lock does not block
// staging's.
func TestTwoEnvironmentsSideBySide(t *testing.T) {
	f := setup(t)
	staging := testenv.Env{Name: "staging", Provider: "docker", MgmtCluster: "staging-management", InfraNamespace: "capd-system", InfraName: "docker"}
	if err := os.WriteFile(filepath.Join(f.dir, "bootstrap.toml"), []byte(testenv.BootstrapTOML(testenv.LocalHost(), staging)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mgmt := testenv.APIServer(t, testenv.ClusterOptions{Name: "krops-local-host-mgmt"})
	mgmt.CreateRunMetadataFor(t, ctx, "local-host-20261201t191333z", "local-host")
	raw, err := os.ReadFile(mgmt.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := filepath.Join(f.dir, ".kube")
	if err := os.MkdirAll(kube, 0o700); err != nil {
		t.Fatal(err)
	}
	// Where local-host's pivot writes it when MGMT_KUBECONFIG is unset.
	if err := os.WriteFile(filepath.Join(kube, "krops-local-host-mgmt.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}

	r := f.run(t, nil, "preflight", "local-host")
	if r.Code != 2 || !strings.Contains(r.Stdout, "✗ earlier pivot: the management cluster holds an earlier pivot: run local-host-20261201t191333z") {
		t.Fatalf("local-host next to its own pivot: exit %d, want 2 and the earlier pivot\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	r = f.run(t, nil, "preflight", "staging")
	if want := "✔ earlier pivot: none (no context krops-staging-mgmt in " + filepath.Join(kube, "krops-staging-mgmt.yaml") + ")"; !strings.Contains(r.Stdout, want) ||
		strings.Contains(r.Stdout, "local-host-20261201t191333z") {
		t.Errorf("staging next to local-host's pivot: want %q\n%s\n%s", want, r.Stdout, r.Stderr)
	}

	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "KROPS_KIND_TEST_HOLD=kind-krops-local-host", "XDG_STATE_HOME="+filepath.Join(f.dir, "state"))
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "held" {
		t.Fatalf("holder: %q", line)
	}
	type status struct {
		Name    string       `json:"name"`
		Context string       `json:"context"`
		Lock    *lock.Holder `json:"lock_holder"`
	}
	got := map[string]status{}
	for _, env := range []string{"local-host", "staging"} {
		r := f.run(t, nil, "status", env, "--output", "json")
		var st status
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
			t.Fatalf("status %s: %v\n%s\n%s", env, err, r.Stdout, r.Stderr)
		}
		got[env] = st
	}
	if l, s := got["local-host"], got["staging"]; l.Name != "krops-local-host" || l.Context != "kind-krops-local-host" || l.Lock == nil ||
		s.Name != "krops-staging" || s.Context != "kind-krops-staging" || s.Lock != nil {
		t.Errorf("status per environment: %+v", got)
	}
	if r := f.run(t, nil, "up", "staging"); strings.Contains(r.Stderr, "is locked") || !strings.Contains(r.Stderr, "no container engine answers") {
		t.Errorf("staging's up while local-host's lock is held: exit %d, %s", r.Code, r.Stderr)
	}
}

// KROPS_KIND_NODE_IMAGE replaces the inventory's pin (a mirror's copy, or
// an image built locally, which has no registry digest): the preflight
// names it and where it came from, even while the pin is pending; a value
// that is not an image reference is exit 2 naming the variable.
func TestNodeImageKnob(t *testing.T) {
	f := setup(t)
	if err := os.WriteFile(filepath.Join(f.dir, "airgap", "images.txt"), []byte("docker.io/kindest/node:v1.37.0 pending\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := f.run(t, []string{"KROPS_KIND_NODE_IMAGE=krops.local/kind-node:v1.37.2"}, "preflight")
	if !strings.Contains(r.Stdout, "✔ node image: krops.local/kind-node:v1.37.2 (KROPS_KIND_NODE_IMAGE)") {
		t.Errorf("preflight with a node image knob:\n%s\n%s", r.Stdout, r.Stderr)
	}
	if r := f.run(t, nil, "preflight"); r.Code != 2 || !strings.Contains(r.Stderr, "has no digest yet") {
		t.Errorf("without the knob the pending pin is refused: exit %d\n%s", r.Code, r.Stderr)
	}
	r = f.run(t, []string{"KROPS_KIND_NODE_IMAGE=Not A/Reference::x"}, "status")
	if r.Code != 2 || !strings.Contains(r.Stderr, "KROPS_KIND_NODE_IMAGE=") || !strings.Contains(r.Stderr, "image reference") {
		t.Errorf("bad node image: exit %d\n%s", r.Code, r.Stderr)
	}
	// CAPD's machines run the image too, at the Kubernetes version its tag
	// starts with: the docker provider refuses a tag without one.
	r = f.run(t, []string{"KROPS_KIND_NODE_IMAGE=krops.local/kind-node:latest"}, "preflight")
	if out := r.Stdout + r.Stderr; r.Code != 2 || !strings.Contains(out, `KROPS_KIND_NODE_IMAGE="krops.local/kind-node:latest"`) || !strings.Contains(out, "retag") {
		t.Errorf("a node image tag without a Kubernetes version: exit %d, want 2 naming it\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}
