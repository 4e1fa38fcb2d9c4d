//go:build realengine

package e2e_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// The real-engine lane (`task e2e:real`, docs/testing.md): krops-kind and
// the docker provider against a real Docker engine and real kind nodes, from
// the node image tools/realengine/nodeimage.sh builds (KROPS_KIND_NODE_IMAGE)
// and the registry:2 tools/realengine/images.sh builds. Nothing is pulled.
// Release builds of the binaries: no stand-in of any kind.

// realEnv is what the lane's binaries run with: the machine's PATH (the real
// docker), a home of its own, the repository's bootstrap.toml.
type realEnv struct {
	bin, home, repo string
	env             []string
}

// withMirrors returns a BOOTSTRAP_CONFIG setting for the repository's
// bootstrap.toml with extra appended, in a directory whose trees link to
// the repository's (relative paths resolve as they do in the checkout).
func (r *realEnv) withMirrors(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"mgmt", "workload", "airgap"} {
		if err := os.Symlink(filepath.Join(r.repo, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	base, err := os.ReadFile(filepath.Join(r.repo, "bootstrap.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap.toml"), append(base, []byte("\n"+extra)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return "BOOTSTRAP_CONFIG=" + filepath.Join(dir, "bootstrap.toml")
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
	r := &realEnv{bin: t.TempDir(), home: t.TempDir(), repo: repo}
	args := append(append([]string{"build"}, testenv.BuildFlags()...), "-o", r.bin+string(filepath.Separator), "../krops-kind", "../krops-flux-seed", "../krops-sweep", "../krops-access", "../../plugins/docker")
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

// runWatching is run with a hand on the binary while it runs: onLine sees
// each line of its stderr, on the test goroutine (so it may fail the test or
// act on the engine), and a fault injected there meets the binary mid-step.
func (r *realEnv) runWatching(t *testing.T, extra []string, onLine func(line string), name string, args ...string) (testenv.Result, time.Duration) {
	t.Helper()
	cmd := exec.Command(filepath.Join(r.bin, name), args...)
	cmd.Dir = r.home
	cmd.Env = append(append([]string{}, r.env...), extra...)
	res, took, _ := watch(t, cmd, onLine)
	return res, took
}

// watch runs cmd, handing each line of its stderr to onLine on the test
// goroutine, and returns its result, wall time and process state.
func watch(t *testing.T, cmd *exec.Cmd, onLine func(line string)) (testenv.Result, time.Duration, *os.ProcessState) {
	t.Helper()
	name := filepath.Base(cmd.Path)
	var out, errOut strings.Builder
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waited := make(chan error, 1)
	go func() { err := cmd.Wait(); _ = pw.Close(); waited <- err }()
	// A failing onLine leaves through Goexit: the binary goes with the test.
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			for range lines {
			}
		}
	}()
	for ln := range lines {
		errOut.WriteString(ln + "\n")
		onLine(ln)
	}
	<-waited
	return testenv.Result{Stdout: out.String(), Stderr: errOut.String(), Code: cmd.ProcessState.ExitCode()}, time.Since(start), cmd.ProcessState
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

	// A user's mirror for docker.io, pointed at the local registry: the
	// node must fetch docker.io/library/... from it.
	mirrored := r.withMirrors(t, "[[mirrors]]\nregistry = \"docker.io\"\nendpoints = [\"http://"+registry+":5000\"]\n")
	up, took := r.run(t, []string{mirrored}, "krops-kind", "up", "local-host")
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
	// containerd reads registries from the hosts directory only: the
	// deprecated registry.mirrors table (gone in containerd 2.4, and fatal
	// beside config_path) is nowhere in the node's configuration.
	cfg := engine(t, "exec", node, "cat", "/etc/containerd/config.toml")
	if !strings.Contains(cfg, `config_path = "/etc/containerd/certs.d"`) || strings.Contains(cfg, "registry.mirrors") {
		t.Errorf("the node's containerd configuration:\n%s", cfg)
	}
	for _, probe := range []struct{ push, pull string }{
		{"localhost:5001/krops-lane/probe:1", "localhost:5001/krops-lane/probe:1"},            // the provider's mirror
		{"localhost:5001/library/krops-lane-probe:1", "docker.io/library/krops-lane-probe:1"}, // the configuration's
	} {
		engine(t, "tag", "registry:2", probe.push)
		engine(t, "push", probe.push)
		_ = exec.Command("docker", "rmi", probe.push).Run()
		if out, err := exec.Command("docker", "exec", node, "crictl", "pull", probe.pull).CombinedOutput(); err != nil {
			t.Fatalf("the node could not pull %s through its registry mirror: %v\n%s\ncontainerd's registry configuration:\n%s", probe.pull, err, out,
				engine(t, "exec", node, "sh", "-c", "grep -n -A3 'registry' /etc/containerd/config.toml; for f in $(find /etc/containerd/certs.d -type f); do echo \"== $f\"; cat \"$f\"; done"))
		}
	}

	// Tools that follow kind's local-registry convention find the registry.
	if hosting, err := r.kubectl(t, "-n", "kube-public", "get", "configmap", "local-registry-hosting", "-o", "jsonpath={.data.localRegistryHosting\\.v1}"); err != nil ||
		!strings.Contains(hosting, `host: "localhost:5001"`) || !strings.Contains(hosting, `hostFromClusterNetwork: "krops-registry:5000"`) {
		t.Errorf("kube-public/local-registry-hosting: %v\n%s", err, hosting)
	}
	portForwardForReal(t, r)

	// A second up reuses the cluster; the mirror taken out of the
	// configuration leaves the node, the provider's stays.
	again, took := r.run(t, nil, "krops-kind", "up", "local-host")
	if again.Code != 0 || strings.Contains(again.Stderr, "creating kind cluster") {
		t.Fatalf("second up: exit %d\n%s", again.Code, again.Stderr)
	}
	t.Logf("krops-kind up (reuse) took %v", took.Round(time.Second))
	if hosts := engine(t, "exec", node, "sh", "-c", "cd /etc/containerd/certs.d && find . -type f | sort"); hosts != "./.krops-mirrors\n./localhost:5001/hosts.toml" {
		t.Errorf("the node's hosts directory after the mirror was removed:\n%s", hosts)
	}

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

// fluxImage is one Flux controller image as the Flux Operator names it:
// the lane pushes it under KROPS_FLUX_REGISTRY by this tag.
type fluxImage struct{ name, tag string }

// operatorFluxImages reads the images the Flux Operator at dir renders for
// the newest Flux it ships (data/flux-images/<flux>/upstream-alpine.yaml).
func operatorFluxImages(t *testing.T, dir string) (string, map[string]fluxImage) {
	t.Helper()
	versions, err := filepath.Glob(filepath.Join(dir, "data", "flux-images", "v*"))
	if err != nil || len(versions) == 0 {
		t.Fatalf("no Flux versions under %s/data/flux-images: %v", dir, err)
	}
	slices.SortFunc(versions, func(a, b string) int {
		c, _ := version.MustParseSemantic(filepath.Base(a)).Compare(filepath.Base(b))
		return c
	})
	flux := versions[len(versions)-1]
	b, err := os.ReadFile(filepath.Join(flux, "upstream-alpine.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Images []struct{ Name, NewTag string } `json:"images"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]fluxImage{}
	for _, i := range doc.Images {
		out[i.Name[strings.LastIndex(i.Name, "/")+1:]] = fluxImage{i.Name, i.NewTag}
	}
	return filepath.Base(flux), out
}

// engineless runs a program other than the engine and returns its output.
func engineless(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlAt runs kubectl against the lane's kind cluster through the
// kubeconfig at path.
func kubectlAt(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", path, "--context", "kind-krops-local-host"}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// kubectl runs kubectl against the lane's kind cluster.
func (r *realEnv) kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return kubectlAt(t, filepath.Join(r.home, ".kube", "config"), args...)
}

// fluxLane is what a seed on real nodes needs from the lane's images: the
// operator's image, and the controller images at the tags it names.
type fluxLane struct {
	version, operatorImage string
	pinned                 map[string]fluxImage
	components             []string
}

// The lane's cluster, node, registry and its in-cluster address.
const (
	laneCluster       = "krops-local-host"
	laneNode          = "krops-local-host-control-plane"
	laneRegistry      = "krops-registry"
	laneRegistryInNet = laneRegistry + ":5000"
)

// ghcrMirror is the [[mirrors]] entry the Flux tests append to the
// configuration: ghcr.io through the local registry, as an air-gapped user
// runs.
const ghcrMirror = "[[mirrors]]\nregistry = \"ghcr.io\"\nendpoints = [\"http://" + laneRegistryInNet + "\"]\n"

// newFluxLane checks that the lane built every image the seed will run.
func newFluxLane(t *testing.T) *fluxLane {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		testenv.Missing(t, "kubectl", "install kubectl (the lane reads the cluster with it)")
	}
	opDir := testenv.Testbin("KROPS_FLUX_OPERATOR_BIN")
	if opDir == "" {
		testenv.MissingTestbin(t, "the Flux Operator (KROPS_FLUX_OPERATOR_BIN)", testenv.HowToGetFluxOperator)
	}
	f := &fluxLane{components: []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"},
		operatorImage: "ghcr.io/controlplaneio-fluxcd/flux-operator:" + testenv.FluxOperator.Version}
	f.version, f.pinned = operatorFluxImages(t, opDir)
	images := []string{f.operatorImage}
	for _, c := range f.components {
		images = append(images, f.pinned[c].name+":"+f.pinned[c].tag)
	}
	for _, img := range images {
		if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
			testenv.Missing(t, "the image "+img, "run tools/realengine/images.sh (`tools/task.sh e2e:real` does)")
		}
	}
	return f
}

// fluxRegistry is KROPS_FLUX_REGISTRY in the Flux lanes: the local
// registry as the nodes reach it (their containerd sends localhost:5001 to
// it over plain HTTP).
const fluxRegistry = "localhost:5001/fluxcd"

// stock puts the images and the chart where the running kind node and the
// seed find them: the operator's image pushed to the local registry (the
// node pulls it through its ghcr.io mirror), the controller images pushed
// under KROPS_FLUX_REGISTRY with the tags the operator names them by there,
// the chart pushed to the registry. It returns the chart's repository as
// the host reaches it (localhost:5001).
func (f *fluxLane) stock(t *testing.T) string {
	t.Helper()
	pushed := "localhost:5001/controlplaneio-fluxcd/flux-operator:" + testenv.FluxOperator.Version
	engine(t, "tag", f.operatorImage, pushed)
	engine(t, "push", pushed)
	_ = exec.Command("docker", "rmi", pushed).Run()
	for _, c := range f.components {
		p := f.pinned[c]
		dst := fluxRegistry + "/" + c + ":" + p.tag
		engine(t, "tag", p.name+":"+p.tag, dst)
		engine(t, "push", dst)
		_ = exec.Command("docker", "rmi", dst).Run()
	}
	return seedtest.PushOperatorChart(t, "localhost:5001", seedtest.OperatorChart{Version: "0.61.0", Image: f.operatorImage})
}

// publishedDigest is the config artifact's digest the seed names in its
// progress, pushed to the registry as this machine or the toolbox reaches it.
var publishedDigest = regexp.MustCompile(`(?:localhost:5001|` + regexp.QuoteMeta(laneRegistryInNet) + `)/krops@(sha256:[0-9a-f]{64})`)

// checkSeeded asserts what a seed leaves on the node: the FluxInstance
// Ready at the operator's newest Flux, every controller running from
// KROPS_FLUX_REGISTRY at the tag the operator names, flux-system Ready at the published digest (so
// source-controller fetched it from the registry's in-cluster name), and
// the local-host tree's Kustomizations applied from it.
func (f *fluxLane) checkSeeded(t *testing.T, kubectl func(...string) (string, error), seedStderr string) {
	t.Helper()
	// client-go's own retries (a watch on a CRD the operator has not
	// installed yet) are debug detail, not lines in the progress output.
	if strings.Contains(seedStderr, "reflector.go") || strings.Contains(seedStderr, "Failed to watch") {
		t.Errorf("client-go's log lines reached the seed's progress output")
	}
	published := publishedDigest.FindStringSubmatch(seedStderr)
	if published == nil {
		t.Fatalf("the seed named no published artifact digest")
	}
	if got, err := kubectl("get", "fluxinstance", "flux", "-n", "flux-system", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.lastAppliedRevision}`); err != nil ||
		!strings.HasPrefix(got, "True v"+strings.TrimPrefix(f.version, "v")) {
		t.Errorf("FluxInstance flux-system/flux (Ready, revision): %q %v", got, err)
	}
	images, err := kubectl("get", "pods", "-n", "flux-system", "-o", `jsonpath={range .items[*]}{.status.phase} {.spec.containers[0].image}{"\n"}{end}`)
	if err != nil {
		t.Fatal(images)
	}
	want := []string{"Running " + f.operatorImage}
	for _, c := range f.components {
		want = append(want, "Running "+fluxRegistry+"/"+c+":"+f.pinned[c].tag)
	}
	got := strings.Split(images, "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("pods in flux-system (phase, image):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, err := kubectl("get", "kustomization", "flux-system", "-n", "flux-system", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.lastAppliedRevision}`); err != nil ||
		got != "True latest@"+published[1] {
		t.Errorf("Kustomization flux-system/flux-system (Ready, revision): %q %v", got, err)
	}
	names, err := kubectl("get", "kustomization", "-n", "flux-system", "-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{end}`)
	for _, k := range []string{"cert-manager", "capi-operator", "capi-providers", "clusterclasses", "clusters", "addons"} {
		if err != nil || !slices.Contains(strings.Fields(names), k) {
			t.Errorf("Kustomization %s not applied from the artifact: have %q %v", k, names, err)
		}
	}
}

// followTree waits for Flux on kind to take the local-host tree through
// its first two Kustomizations, as bootstrap's does: the HelmRepositories
// read KROPS_CHART_REPOSITORY from krops-sync (the lane's registry by its
// in-cluster name, plain HTTP), the real source-controller pulls the charts
// from it, helm-controller (the lane's stand-in) installs them, and the
// Kustomizations' health checks pass once cert-manager (the lane's
// stand-in programs under its real chart) and the operator run. It returns
// how long each took from the seed's end.
func followTree(t *testing.T, kubectl func(...string) (string, error)) map[string]time.Duration {
	t.Helper()
	took := map[string]time.Duration{}
	start := time.Now()
	for _, k := range []struct{ name, ns, repo string }{{"cert-manager", "cert-manager", "jetstack"}, {"capi-operator", "capi-operator-system", "capi-operator"}} {
		waitFor(t, "Kustomization flux-system/"+k.name+" Ready", 10*time.Minute, func() (bool, string) {
			out, err := kubectl("get", "kustomization", k.name, "-n", "flux-system", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
			return err == nil && strings.HasPrefix(out, "True "), out
		})
		took["Kustomization "+k.name+" Ready"] = time.Since(start)
		got, err := kubectl("get", "helmrepository", k.repo, "-n", k.ns, "-o", "jsonpath={.spec.type} {.spec.url} {.spec.insecure}")
		if want := "oci oci://" + laneRegistryInNet + "/charts true"; err != nil || got != want {
			t.Errorf("HelmRepository %s/%s (type, url, insecure): %q %v, want %q from krops-sync", k.ns, k.repo, got, err, want)
		}
	}
	return took
}

// dumpOnFailure logs the cluster's Flux state when t has failed.
func dumpOnFailure(t *testing.T, kubectl func(...string) (string, error)) {
	if !t.Failed() {
		return
	}
	for _, q := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "fluxinstance,kustomization,ocirepository,helmrepository,helmchart,helmrelease", "-A"},
		{"describe", "pods", "-n", "flux-system"}, {"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"get", "fluxinstance", "-A", "-o", "yaml"}, {"logs", "-n", "flux-system", "deploy/flux-operator", "--tail=60"}} {
		out, _ := kubectl(q...)
		t.Logf("kubectl %s:\n%s", strings.Join(q, " "), out)
	}
}

// TestRealEngineFluxOnKind is krops-flux-seed on real kind nodes: the Flux
// Operator installed with the Helm SDK from a chart in the local registry,
// its image pulled by the node through the ghcr.io mirror krops configures,
// and the FluxInstance's controllers running as pods that fetch the config
// artifact from the registry over the cluster network and apply the
// local-host tree's top Kustomization. The first seed meets a fault: the
// engine restarts kind's node container while it waits for Flux; the rerun
// converges on the same run's metadata.
//
// Then Flux follows the tree through its first two Kustomizations
// (followTree): cert-manager and the Cluster API operator from the charts
// KROPS_CHART_REPOSITORY serves out of the local registry, as the product
// writes it to krops-sync; and the workload tree's Podinfo through that
// Flux, answering on the host (podinfoThroughFlux).
//
// STAND-INS, named: the chart (seedtest.PushOperatorChart: the operator
// module's manifests, v0.59.0, under chart version 0.61.0; no chart ships
// in a Go module); helm-controller and notification-controller images
// (tools/realengine/images.sh: the proxy serves neither module):
// helm-controller is krops-standin-helmcontroller, which installs
// HelmReleases with the Helm SDK, notification-controller reconciles
// nothing; cert-manager's four programs (krops-standin-certmanager under
// its real chart) and the charts of cert-manager and the operator built
// from their modules (laneCharts). The seed runs with --no-follow: past
// the operator the tree's providers fetch their components from GitHub,
// which the offline lane cannot reach. The Flux controller images cannot carry the digests the operator pins for
// ghcr.io/fluxcd (they are built here, not pulled), so the lane runs the
// product's KROPS_FLUX_REGISTRY: they are pushed to the local registry,
// where the operator names them by tag; the operator's own image, pinned
// by tag, is pulled through the node's ghcr.io mirror.
func TestRealEngineFluxOnKind(t *testing.T) {
	r := newRealEnv(t)
	f := newFluxLane(t)
	if l := leftovers(t, laneCluster); len(l) > 0 {
		t.Fatalf("the engine already runs %v: the lane starts from an engine without them (remove them, or tear down with `tools/task.sh teardown ENV=local-host`)", l)
	}
	kubectl := func(args ...string) (string, error) { return r.kubectl(t, args...) }
	defer dumpOnFailure(t, kubectl)
	kindNode := laneCluster + "-control-plane"
	t.Cleanup(func() {
		// A failed run keeps nothing on the engine either.
		if t.Failed() {
			_, _ = r.run(t, nil, "krops-sweep", "local-host")
		}
	})

	mirrored := r.withMirrors(t, ghcrMirror+k8sMirror+quayMirror)
	up, upTook := r.run(t, []string{mirrored}, "krops-kind", "up", "local-host")
	if up.Code != 0 {
		t.Fatalf("krops-kind up: exit %d after %v\n%s\n%s", up.Code, upTook, up.Stdout, up.Stderr)
	}
	t.Logf("krops-kind up took %v", upTook.Round(time.Second))
	chart := f.stock(t)
	// The tree's first two Kustomizations install cert-manager and the
	// Cluster API operator from charts: both charts sit beside the
	// flux-operator chart (one KROPS_CHART_REPOSITORY), their images in the
	// registry the node's quay.io and registry.k8s.io mirrors reach.
	pushToLaneRegistry(t, operatorImages(t, r.repo))
	laneCharts(t, r.repo, "localhost:5001")

	// The configuration lives outside the checkout (withMirrors): the
	// artifact's revision comes from the checkout's git, as the knobs allow.
	head := strings.TrimSpace(engineless(t, "git", "-C", r.repo, "rev-parse", "HEAD"))
	revision := []string{mirrored, "KROPS_OCI_GIT_SHA=" + head, "KROPS_OCI_GIT_REF=HEAD", "KROPS_OCI_SOURCE_URL=https://github.com/kropsdev/krops",
		"KROPS_CHART_REPOSITORY=" + chart, "KROPS_FLUX_REGISTRY=" + fluxRegistry}
	// Fault: the engine restarts kind's node container while the seed waits
	// for Flux. The seed may ride it out or stop saying what to do; either
	// way the rerun of the same command converges, on the same run.
	start := time.Now()
	var restartedAt, restartTook time.Duration
	first, firstTook := r.runWatching(t, revision, func(line string) {
		if restartedAt == 0 && strings.Contains(line, "waiting for Flux to take over") {
			restartedAt = time.Since(start)
			engine(t, "restart", kindNode)
			restartTook = time.Since(start) - restartedAt
		}
	}, "krops-flux-seed", "local-host", "--no-follow")
	if restartedAt == 0 {
		t.Fatalf("the seed never waited for Flux (exit %d)\n%s", first.Code, first.Stderr)
	}
	if !slices.Contains([]int{0, 1, 3}, first.Code) || strings.Contains(first.Stderr, "panic") {
		t.Errorf("the seed with kind's node restarted under it: exit %d, want 0, 1 or 3 and no panic\n%s", first.Code, first.Stderr)
	}
	t.Logf("the seed with kind's node restarted %v in (the restart took %v): exit %d after %v\n%s", restartedAt.Round(time.Second), restartTook.Round(time.Second), first.Code, firstTook.Round(time.Second), first.Stderr)
	runUID := func() string {
		var uid string
		waitFor(t, "kind's API server answering", 3*time.Minute, func() (bool, string) {
			out, err := kubectl("get", "configmap", "krops-run", "-n", "flux-system", "-o", "jsonpath={.metadata.uid}")
			uid = out
			return err == nil && out != "", out
		})
		return uid
	}
	before := runUID()
	seed, seedTook := r.run(t, revision, "krops-flux-seed", "local-host", "--no-follow")
	if after := runUID(); after != before {
		t.Errorf("the rerun replaced the run's metadata (ConfigMap krops-run uid %s, then %s)", before, after)
	}
	if seed.Code != 0 {
		t.Fatalf("krops-flux-seed: exit %d after %v\n%s\n%s", seed.Code, seedTook, seed.Stdout, seed.Stderr)
	}
	t.Logf("krops-flux-seed (Flux %s) took %v\n%s", f.version, seedTook.Round(time.Second), seed.Stderr)
	f.checkSeeded(t, kubectl, seed.Stderr)
	for what, took := range followTree(t, kubectl) {
		t.Logf("the tree on kind: %s after %v", what, took.Round(time.Second))
	}
	podinfo := podinfoThroughFlux(t, r, kubectl)
	for _, what := range []string{"chart pulled", "HelmRelease Ready", "pruned"} {
		t.Logf("podinfo through Flux: %s after %v", what, podinfo[what].Round(time.Second))
	}

	down, took := r.run(t, nil, "krops-sweep", "local-host")
	if down.Code != 0 {
		t.Fatalf("teardown: exit %d\n%s\n%s", down.Code, down.Stdout, down.Stderr)
	}
	t.Logf("teardown took %v\n%s\n%s", took.Round(time.Second), down.Stderr, down.Stdout)
	// Flux's own objects went while its controllers ran, before the
	// FluxInstance: the operator's uninstall then has no finalizer to wait
	// on (it once waited five minutes for the Kustomization CRD).
	last := -1
	for _, want := range []string{"Kustomization flux-system/flux-system", "OCIRepository flux-system/flux-system", "FluxInstance flux-system/flux"} {
		i := strings.Index(down.Stdout, "- "+want+"\n")
		if i < 0 || i < last {
			t.Errorf("the teardown's summary lacks %q, or lists it out of order:\n%s", want, down.Stdout)
		}
		last = i
	}
	if l := leftovers(t, laneCluster); len(l) > 0 {
		t.Errorf("after teardown the engine still has %v", l)
	}
}

// TestRealEngineToolbox runs the lifecycle's tasks through the real toolbox
// image (`task toolbox:build`; KROPS_TOOLBOX_IMAGE) against the real engine,
// as far as the lane runs natively, from an engine without a kind network
// and as a user who is not root: the container starts off the network and
// krops-kind joins it from inside; the kubeconfig lands in the checkout's
// .kube/, owned by that user; the seed inside pushes the artifact to the
// registry by its name on the kind network and installs the chart from
// there (plain HTTP), and Flux comes up Ready on the node; teardown through
// the toolbox leaves nothing. It also measures the toolbox's start overhead
// against the same task run natively.
//
// STAND-INS, named: as in TestRealEngineFluxOnKind (the chart, two
// controller images); the test stocks the registry between `task kind`
// and `task seed` (the registry comes up with kind) instead of running
// `task bootstrap` in one go; the chain past Flux (cert-manager, Cluster
// API) is the whole-lifecycle lane's.
func TestRealEngineToolbox(t *testing.T) {
	r := newRealEnv(t)
	f := newFluxLane(t)
	image := os.Getenv("KROPS_TOOLBOX_IMAGE")
	if image == "" {
		image = "krops-toolbox:dev"
	}
	if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
		testenv.Missing(t, "the toolbox image "+image, "run `KROPS_TOOLBOX_LOCAL_BASES=1 tools/task.sh toolbox:build` (`tools/task.sh e2e:real` does)")
	}
	if l := leftovers(t, laneCluster); len(l) > 0 {
		t.Fatalf("the engine already runs %v: the lane starts from an engine without them", l)
	}
	// A fresh engine has no kind network; the lane's earlier tests leave
	// an empty one behind, as kind does.
	if members := engine(t, "network", "ls", "--filter", "name=^kind$", "--format", "{{.Name}}"); members != "" {
		if in := engine(t, "network", "inspect", "kind", "--format", "{{len .Containers}}"); in != "0" {
			t.Fatalf("the kind network has %s containers: the lane starts from an engine without a kind cluster", in)
		}
		engine(t, "network", "rm", "kind")
	}
	checkout := t.TempDir()
	if out, err := exec.Command("sh", "-c", `git -C "$1" archive HEAD | tar -x -C "$2"`, "_", r.repo, checkout).CombinedOutput(); err != nil {
		t.Fatalf("a checkout of HEAD: %v\n%s", err, out)
	}
	// The checkout's own configuration carries the ghcr.io mirror: the
	// toolbox sees only the repository.
	conf, err := os.OpenFile(filepath.Join(checkout, "bootstrap.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conf.WriteString("\n" + ghcrMirror); err != nil {
		t.Fatal(err)
	}
	conf.Close()
	toolbox := filepath.Join(r.bin, "krops-toolbox")
	if out, err := exec.Command("go", append(append([]string{"build"}, testenv.BuildFlags()...), "-o", toolbox, "../krops-toolbox")...).CombinedOutput(); err != nil {
		t.Fatalf("building krops-toolbox: %v\n%s", err, out)
	}
	head := strings.TrimSpace(engineless(t, "git", "-C", r.repo, "rev-parse", "HEAD"))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.home, "KROPS_KIND_NODE_IMAGE=" + os.Getenv("KROPS_KIND_NODE_IMAGE"), "KROPS_TOOLBOX_IMAGE=" + image,
		// The checkout is an archive: its source is given, as a CI job would.
		"KROPS_OCI_GIT_SHA=" + head, "KROPS_OCI_GIT_REF=HEAD", "KROPS_OCI_SOURCE_URL=https://github.com/kropsdev/krops",
		"KROPS_CHART_REPOSITORY=oci://" + laneRegistryInNet + "/charts", "KROPS_FLUX_REGISTRY=" + fluxRegistry}
	user := asUser(t, []string{checkout, r.home}, []string{r.bin})
	run := func(args ...string) (testenv.Result, time.Duration) {
		start := time.Now()
		bin, argv := user.command(toolbox, append([]string{"run", "--"}, args...)...)
		res := testenv.RunBinary(t, checkout, env, bin, argv...)
		return res, time.Since(start)
	}
	kc := filepath.Join(checkout, ".kube", "config")
	// The kind context written inside the toolbox names the API server on
	// the kind network (docs/toolbox.md), which this host does not resolve:
	// the test reads the cluster from its node.
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command("docker", append([]string{"exec", laneNode, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	defer dumpOnFailure(t, kubectl)

	up, took := run("kind", "ENV=local-host")
	if up.Code != 0 || !strings.Contains(up.Stderr+up.Stdout, "joining the kind network") {
		t.Fatalf("task toolbox -- kind: exit %d after %v\n%s\n%s", up.Code, took, up.Stdout, up.Stderr)
	}
	t.Logf("task toolbox -- kind ENV=local-host (create) took %v", took.Round(time.Second))
	if server, err := kubectlAt(t, kc, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"); err != nil || server != "https://"+laneNode+":6443" {
		t.Errorf("the kind context written inside the toolbox: server %q (%v), want the node on the kind network", server, err)
	}
	f.stock(t)

	seed, took := run("seed", "ENV=local-host", "--", "--no-follow")
	if seed.Code != 0 {
		t.Fatalf("task toolbox -- seed: exit %d after %v\n%s\n%s", seed.Code, took, seed.Stdout, seed.Stderr)
	}
	t.Logf("task toolbox -- seed ENV=local-host -- --no-follow took %v\n%s", took.Round(time.Second), seed.Stderr)
	if !strings.Contains(seed.Stderr, laneRegistryInNet+"/krops@sha256:") {
		t.Errorf("the seed inside did not push to the registry by its name on the kind network")
	}
	f.checkSeeded(t, kubectl, seed.Stderr)
	for _, p := range []string{kc, filepath.Join(checkout, ".kube")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != user.uid {
			t.Errorf("%s is owned by uid %d, not the caller's %d", p, uid, user.uid)
		}
	}

	// Inside the toolbox the management kubeconfig defaults to the
	// checkout's .kube/ (beside KUBECONFIG), where it outlives the
	// container: a management cluster found there (here kind under the
	// management context, carrying the run metadata the seed wrote, as a
	// pivoted cluster does) stops the next bootstrap's preflight with exit
	// 2, nothing changed. The file is removed again before the teardown.
	mgmtKC := filepath.Join(checkout, ".kube", "krops-local-host-mgmt.yaml")
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mgmtKC, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	engineless(t, "kubectl", "--kubeconfig", mgmtKC, "config", "rename-context", "kind-krops-local-host", "krops-local-host-mgmt")
	if err := os.Chown(mgmtKC, user.uid, user.uid); err != nil {
		t.Fatal(err)
	}
	guard, _ := run("preflight", "ENV=local-host")
	if guard.Code != 2 || !strings.Contains(guard.Stdout+guard.Stderr, "krops-local-host-mgmt") {
		t.Errorf("task toolbox -- preflight with a management cluster in .kube/: exit %d, want 2 naming its context\n%s\n%s", guard.Code, guard.Stdout, guard.Stderr)
	}
	if err := os.Remove(mgmtKC); err != nil {
		t.Fatal(err)
	}

	// Now the network exists: the next run starts on it. Its time against
	// the same query run natively is the toolbox's overhead.
	status, inBox := run("kind:status", "ENV=local-host")
	if status.Code != 0 {
		t.Fatalf("task toolbox -- kind:status: exit %d\n%s\n%s", status.Code, status.Stdout, status.Stderr)
	}
	native, nativeTook := r.run(t, []string{"KUBECONFIG=" + kc}, "krops-kind", "status", "local-host")
	if native.Code != 0 {
		t.Fatalf("native status: exit %d\n%s", native.Code, native.Stderr)
	}
	t.Logf("kind:status through the toolbox %v, natively %v: %.1fx", inBox.Round(10*time.Millisecond), nativeTook.Round(10*time.Millisecond), inBox.Seconds()/nativeTook.Seconds())

	down, took := run("teardown", "ENV=local-host")
	if down.Code != 0 {
		t.Fatalf("task toolbox -- teardown: exit %d\n%s\n%s", down.Code, down.Stdout, down.Stderr)
	}
	t.Logf("task toolbox -- teardown took %v\n%s", took.Round(time.Second), down.Stderr)
	// Kustomization cert-manager is mid health check here (its HelmRelease
	// never gets Ready: this test stocks no cert-manager chart), so
	// kustomize-controller does not take its deletion: krops releases it
	// after its grace instead of waiting out the 2 min cap.
	if strings.Contains(down.Stderr, "still there after") {
		t.Errorf("the teardown waited out the Flux release wait on an object krops should have released:\n%s", down.Stderr)
	}
	if l := leftovers(t, laneCluster); len(l) > 0 {
		t.Errorf("after teardown the engine still has %v", l)
	}
	if c := engine(t, "ps", "-a", "--filter", "ancestor="+image, "--format", "{{.Names}}"); c != "" {
		t.Errorf("toolbox containers left: %s", c)
	}
	if err := filepath.WalkDir(checkout, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && int(info.Sys().(*syscall.Stat_t).Uid) != user.uid {
			t.Errorf("%s in the checkout is owned by uid %d after the toolbox ran", p, info.Sys().(*syscall.Stat_t).Uid)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// caller runs a program as the lane's caller. Under root (as the lane runs
// here) that is a user who is not root, with the engine socket's group, as
// a developer runs: the toolbox must then run as that user and leave no
// file of root's behind.
type caller struct {
	prefix []string
	uid    int
}

// command returns the program and arguments that run bin as the caller.
func (c caller) command(bin string, args ...string) (string, []string) {
	if len(c.prefix) == 0 {
		return bin, args
	}
	return c.prefix[0], append(append(append([]string{}, c.prefix[1:]...), bin), args...)
}

// asUser returns the caller, giving it the directories it writes (owned
// by it) and those it only enters (their parents made traversable).
func asUser(t *testing.T, writes, enters []string) caller {
	t.Helper()
	if os.Getuid() != 0 {
		return caller{uid: os.Getuid()}
	}
	const uid = 4242
	var sock syscall.Stat_t
	if err := syscall.Stat("/var/run/docker.sock", &sock); err != nil {
		t.Fatalf("the engine socket: %v", err)
	}
	for _, d := range append(append([]string{}, writes...), enters...) {
		for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, st.Mode().Perm()|0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out, err := exec.Command("chown", append([]string{"-R", fmt.Sprintf("%d:%d", uid, uid)}, writes...)...).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
	return caller{uid: uid, prefix: []string{"setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(uid), "--groups", strconv.Itoa(int(sock.Gid)), "--"}}
}

// portForwardForReal runs krops-access port-forward through a real kubelet:
// kind plays the workload cluster (its own kubeconfig in the Secret Cluster
// API would write), a registry:2 pod (the probe image the node pulled)
// plays Podinfo behind a Service named like it, on Podinfo's port.
func portForwardForReal(t *testing.T, r *realEnv) {
	t.Helper()
	kindAsWorkload(t, r)
	manifest := `apiVersion: v1
kind: Namespace
metadata: {name: podinfo}
---
apiVersion: v1
kind: Pod
metadata: {name: podinfo-standin, namespace: podinfo, labels: {app: podinfo}}
spec:
  containers:
  - name: registry
    image: localhost:5001/krops-lane/probe:1
    imagePullPolicy: IfNotPresent
    ports: [{name: http, containerPort: 5000}]
    readinessProbe: {httpGet: {path: /v2/, port: http}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: podinfo, namespace: podinfo}
spec: {selector: {app: podinfo}, ports: [{name: http, port: 9898, targetPort: http}]}
`
	apply := exec.Command("kubectl", "--kubeconfig", filepath.Join(r.home, ".kube", "config"), "--context", "kind-krops-local-host", "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("applying the stand-in workload: %v\n%s", err, out)
	}
	if out, err := r.kubectl(t, "-n", "podinfo", "wait", "--for=condition=Ready", "pod/podinfo-standin", "--timeout=120s"); err != nil {
		t.Fatalf("the stand-in pod: %v\n%s", err, out)
	}
	forwardAndGet(t, r, "/v2/", regexp.MustCompile(`to pod podinfo/podinfo-standin port 5000 \(Service podinfo\) on cluster local-workload`))
}

// kindAsWorkload makes the lane's kind cluster play the workload cluster
// for krops-access: its kubeconfig in the Secret Cluster API would write
// for local-workload.
func kindAsWorkload(t *testing.T, r *realEnv) {
	t.Helper()
	kubeconfig, err := os.ReadFile(filepath.Join(r.home, ".kube", "config"))
	if err != nil {
		t.Fatal(err)
	}
	secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: local-workload-kubeconfig, namespace: default}\ndata: {value: %s}\n",
		base64.StdEncoding.EncodeToString(kubeconfig))
	apply := exec.Command("kubectl", "--kubeconfig", filepath.Join(r.home, ".kube", "config"), "--context", "kind-krops-local-host", "apply", "-f", "-")
	apply.Stdin = strings.NewReader(secret)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("writing the local-workload kubeconfig Secret: %v\n%s", err, out)
	}
}

// forwardAndGet runs `krops-access port-forward local-host`, GETs path
// through the address it prints, stops it with Ctrl-C and checks its
// report against target. It returns the response's status and body.
func forwardAndGet(t *testing.T, r *realEnv, path string, target *regexp.Regexp) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(r.bin, "krops-access"), "port-forward", "local-host", "--local-port", "0")
	cmd.Dir, cmd.Env = r.home, r.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	var url string
	select {
	case url = <-lines:
	case <-time.After(time.Minute):
	}
	if url == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("port-forward printed no address:\n%s", stderr.String())
	}
	status, body := 0, ""
	resp, err := http.Get(url + path)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s%s through the forward: %v %v\n%s", url, path, err, resp, stderr.String())
	}
	if resp != nil {
		status = resp.StatusCode
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		body = string(b)
		resp.Body.Close()
	}
	// Ctrl-C ends it: exit 130, like any interrupted krops tool.
	_ = cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !target.MatchString(stderr.String()) {
		t.Errorf("port-forward after Ctrl-C: %v (want exit 130 and a report matching %q)\n%s", err, target, stderr.String())
	}
	t.Logf("krops-access port-forward:\n%s", stderr.String())
	return status, body
}
