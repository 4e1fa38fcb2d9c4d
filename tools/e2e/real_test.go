//go:build realengine

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/tools/testenv"
)

// The real-engine lane (`task e2e:real`, docs/testing.md): krops-kind and
// the docker provider against a real Docker engine and real kind nodes, from
// the node image tools/realengine/nodeimage.sh builds (KROPS_KIND_NODE_IMAGE)
// and the registry:2 tools/realengine/images.sh builds. Nothing is pulled.
// Release builds of the binaries: no stand-in of any kind.

// realEnv is what the lane's binaries run with: the machine's PATH (the real
// docker), a home of its own, the repository's bootstrap.toml.
type realEnv struct {
	bin, home string
	env       []string
}

func newRealEnv(t *testing.T) *realEnv {
	t.Helper()
	image := os.Getenv("KROPS_KIND_NODE_IMAGE")
	if image == "" {
		testenv.Missing(t, "KROPS_KIND_NODE_IMAGE (the lane's node image)", "run `tools/task.sh e2e:real`, which builds it with tools/realengine/nodeimage.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput(); err != nil {
		testenv.Missing(t, "a Docker engine that answers", "run `tools/task.sh e2e:real` (tools/realengine/engine.sh starts one): "+strings.TrimSpace(string(out)))
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := &realEnv{bin: t.TempDir(), home: t.TempDir()}
	args := append(append([]string{"build"}, testenv.BuildFlags()...), "-o", r.bin+string(filepath.Separator), "../krops-kind", "../krops-sweep", "../../plugins/docker")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("building the release binaries: %v\n%s", err, out)
	}
	if err := os.Rename(filepath.Join(r.bin, "docker"), filepath.Join(r.bin, "krops-provider-docker")); err != nil {
		t.Fatal(err)
	}
	r.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.home, "XDG_STATE_HOME=" + filepath.Join(r.home, "state"),
		"KUBECONFIG=" + filepath.Join(r.home, ".kube", "config"), "BOOTSTRAP_CONFIG=" + filepath.Join(repo, "bootstrap.toml"),
		"KROPS_PLUGIN_DIR=" + r.bin, "KROPS_KIND_NODE_IMAGE=" + image, "KROPS_RUN_ID=real-" + time.Now().UTC().Format("20060102t150405z")}
	return r
}

func (r *realEnv) run(t *testing.T, extra []string, name string, args ...string) (testenv.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res := testenv.RunBinary(t, r.home, append(append([]string{}, r.env...), extra...), filepath.Join(r.bin, name), args...)
	return res, time.Since(start)
}

// engine runs the docker CLI and returns its trimmed output.
func engine(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// leftovers lists what krops's local-host path leaves on the engine: the
// kind cluster's containers, the registry, their volumes.
func leftovers(t *testing.T, cluster string) []string {
	t.Helper()
	var out []string
	for _, q := range [][]string{
		{"ps", "-a", "--filter", "label=io.x-k8s.kind.cluster=" + cluster, "--format", "container {{.Names}}"},
		{"ps", "-a", "--filter", "name=^krops-registry$", "--format", "container {{.Names}}"},
	} {
		if s := engine(t, q...); s != "" {
			out = append(out, strings.Split(s, "\n")...)
		}
	}
	return out
}

func TestRealEngineKindAndRegistry(t *testing.T) {
	r := newRealEnv(t)
	const cluster, node, registry = "krops-local-host", "krops-local-host-control-plane", "krops-registry"
	if l := leftovers(t, cluster); len(l) > 0 {
		t.Fatalf("the engine already runs %v: the lane starts from an engine without them (remove them, or tear down with `tools/task.sh teardown ENV=local-host`)", l)
	}
	volumesBefore := engine(t, "volume", "ls", "-q")

	up, took := r.run(t, nil, "krops-kind", "up", "local-host")
	if up.Code != 0 {
		t.Fatalf("krops-kind up: exit %d after %v\n%s\n%s", up.Code, took, up.Stdout, up.Stderr)
	}
	t.Logf("krops-kind up (create) took %v\n%s", took.Round(time.Second), up.Stderr)

	st, _ := r.run(t, nil, "krops-kind", "status", "local-host", "--output", "json")
	var status struct {
		Exists, Healthy bool
		NodeImage       string `json:"node_image"`
		Nodes           []struct {
			Name  string
			Ready bool
		}
	}
	if err := json.Unmarshal([]byte(st.Stdout), &status); err != nil || !status.Exists || !status.Healthy || len(status.Nodes) != 1 || !status.Nodes[0].Ready ||
		status.NodeImage != os.Getenv("KROPS_KIND_NODE_IMAGE") {
		t.Fatalf("status: %v\n%s\n%s", err, st.Stdout, st.Stderr)
	}

	// The registry runs as a container on the kind network, published on
	// 127.0.0.1:5001.
	got := strings.Fields(engine(t, "inspect", "-f", "{{.State.Running}} {{range $n, $_ := .NetworkSettings.Networks}}{{$n}} {{end}}", registry))
	if len(got) < 2 || got[0] != "true" || !slices.Contains(got[1:], "kind") {
		t.Fatalf("registry container (running, networks): %q", got)
	}
	// The node's containerd (kind's own version) pulls localhost:5001/...
	// through the mirror krops configured, from that registry.
	t.Logf("node runtime: %s", engine(t, "exec", node, "containerd", "--version"))
	// Any image will do as the probe: the registry's own, pushed under a
	// new name (the engine treats 127.0.0.1 registries as plain HTTP).
	engine(t, "tag", "registry:2", "localhost:5001/krops-lane/probe:1")
	engine(t, "push", "localhost:5001/krops-lane/probe:1")
	_ = exec.Command("docker", "rmi", "localhost:5001/krops-lane/probe:1").Run()
	if out, err := exec.Command("docker", "exec", node, "crictl", "pull", "localhost:5001/krops-lane/probe:1").CombinedOutput(); err != nil {
		t.Fatalf("the node could not pull through its registry mirror: %v\n%s\ncontainerd's registry configuration:\n%s", err, out,
			engine(t, "exec", node, "sh", "-c", "grep -n -A3 'registry' /etc/containerd/config.toml; ls -R /etc/containerd/certs.d 2>/dev/null || true"))
	}

	// A second up reuses the cluster.
	again, took := r.run(t, nil, "krops-kind", "up", "local-host")
	if again.Code != 0 || strings.Contains(again.Stderr, "creating kind cluster") {
		t.Fatalf("second up: exit %d\n%s", again.Code, again.Stderr)
	}
	t.Logf("krops-kind up (reuse) took %v", took.Round(time.Second))

	// Another node image is drift: refused, then rebuilt with --recreate.
	other := os.Getenv("KROPS_KIND_NODE_IMAGE") + "-drift"
	engine(t, "tag", os.Getenv("KROPS_KIND_NODE_IMAGE"), other)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", other).Run() })
	drift, _ := r.run(t, []string{"KROPS_KIND_NODE_IMAGE=" + other}, "krops-kind", "up", "local-host")
	if drift.Code != 2 || !strings.Contains(drift.Stderr, "node image") {
		t.Fatalf("drift: exit %d, want 2 naming the node image\n%s", drift.Code, drift.Stderr)
	}
	rec, took := r.run(t, []string{"KROPS_KIND_NODE_IMAGE=" + other}, "krops-kind", "up", "local-host", "--recreate")
	if rec.Code != 0 || !strings.Contains(rec.Stderr, "creating kind cluster") {
		t.Fatalf("--recreate: exit %d\n%s", rec.Code, rec.Stderr)
	}
	t.Logf("krops-kind up --recreate took %v", took.Round(time.Second))

	// Teardown (kind without Cluster API: the seed never ran) removes the
	// cluster and the registry; the engine keeps nothing of them.
	down, took := r.run(t, []string{"KROPS_KIND_NODE_IMAGE=" + other}, "krops-sweep", "local-host")
	if down.Code != 0 {
		t.Fatalf("teardown: exit %d\n%s\n%s", down.Code, down.Stdout, down.Stderr)
	}
	t.Logf("teardown took %v", took.Round(time.Second))
	if l := leftovers(t, cluster); len(l) > 0 {
		t.Errorf("after teardown the engine still has %v", l)
	}
	if after := engine(t, "volume", "ls", "-q"); after != volumesBefore {
		t.Errorf("volumes before the lane:\n%s\nafter teardown:\n%s", volumesBefore, after)
	}
	fmt.Fprintln(os.Stderr) // keep the lane's log readable under -v
}
