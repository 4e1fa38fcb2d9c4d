package main_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// chainConfig is a bootstrap.toml whose local-host follows a chain made for
// the test machine: two management Kustomizations, then a workload
// cluster's own flux-system.
var chainConfig = testenv.BootstrapTOML(func() testenv.Env {
	e := testenv.LocalHost()
	e.ProviderManifests = []string{"mgmt/local-host/providers.yaml"}
	e.Tables = "[environments.local-host.seed]\nwait = [\"apps\", \"clusters\"]\nworkloads = [\"local-workload\"]"
	return e
}())

func ksYAML(name, path, dependsOn string) string {
	deps := ""
	if dependsOn != "" {
		deps = "\n  dependsOn: [{name: " + dependsOn + "}]"
	}
	return fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %s, namespace: flux-system}
spec:%s
  interval: 1m
  retryInterval: 2s
  prune: true
  path: %s
  sourceRef: {kind: OCIRepository, name: flux-system}
`, name, deps, path)
}

// chainRepo writes a repository whose management tree has the two
// Kustomizations the config waits for; "clusters" carries the workload's
// kubeconfig Secret, a STAND-IN for the one Cluster API writes when it has
// provisioned a cluster (no CAPI provider can provision here). Its server is
// the name CAPD records, reachable only inside the kind network; the
// provider's rewrite has to replace it.
func chainRepo(t *testing.T, workloadKubeconfig []byte) string {
	t.Helper()
	root := t.TempDir()
	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: local-workload-kubeconfig, namespace: default, labels: {cluster.x-k8s.io/cluster-name: local-workload}}
type: cluster.x-k8s.io/secret
data: {value: %s}
`, base64.StdEncoding.EncodeToString(workloadKubeconfig))
	files := map[string]string{
		"bootstrap.toml":                       chainConfig,
		"mgmt/local-host/kustomization.yaml":   "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [apps.yaml, clusters.yaml]\n",
		"mgmt/local-host/apps.yaml":            ksYAML("apps", "./mgmt/local-host/apps", ""),
		"mgmt/local-host/clusters.yaml":        ksYAML("clusters", "./mgmt/local-host/clusters", "apps"),
		"mgmt/local-host/apps/cm.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: apps, namespace: default}\ndata: {a: b}\n",
		"mgmt/local-host/clusters/secret.yaml": secret,
		"workload/local-host/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-the-workload-tree, namespace: default}\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The whole chain through the binary: the real Flux Operator and Flux on the
// "kind" server reconcile the management tree; the workload's kubeconfig
// Secret appears through Flux; the real docker provider plugin rewrites the
// recorded endpoint; the workload server's own real Flux controllers make
// its flux-system Ready. Then Ctrl-C during a wait stops it cleanly.
func TestSeedFollowsTheChainToTheWorkloadCluster(t *testing.T) {
	mgmt := testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-seed", CRDs: []testenv.CRDSet{testenv.FluxOperator, testenv.FluxSource, testenv.FluxKustomize, testenv.FluxHelm}})
	workload := testenv.APIServer(t, testenv.ClusterOptions{Name: "local-workload", CRDs: []testenv.CRDSet{testenv.FluxSource, testenv.FluxKustomize}})
	testenv.RunFluxOperator(t, mgmt)
	testenv.Flux(t, mgmt)
	testenv.Flux(t, workload)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go seedtest.StandInKubelet(ctx, mgmt.Client)
	reg := testenv.Registry(t)
	charts := seedtest.StandInOperatorChart(t, reg, "0.61.0")

	// The kubeconfig as CAPD records it: the workload's credentials, an
	// endpoint only the kind network resolves.
	u, err := url.Parse(workload.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	recorded := *workload.Config
	recorded.Host = "https://local-workload-lb.invalid:6443"
	kcPath := filepath.Join(t.TempDir(), "workload.kubeconfig")
	if err := testenv.WriteKubeconfig(&recorded, "local-workload-admin@local-workload", kcPath); err != nil {
		t.Fatal(err)
	}
	workloadKubeconfig, err := os.ReadFile(kcPath)
	if err != nil {
		t.Fatal(err)
	}
	root := chainRepo(t, workloadKubeconfig)

	// STAND-IN for the addon that installs Flux on a new workload cluster
	// (a ClusterResourceSet in the real tree): the workload's Flux sources
	// workload/local-host from the same artifact.
	workload.CreateYAML(t, ctx, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: flux-system, namespace: flux-system}
spec: {interval: 3s, url: oci://%s/krops, insecure: true, ref: {tag: latest}}
`, reg.Host))
	workload.CreateYAML(t, ctx, ksYAML("flux-system", "./workload/local-host", ""))

	pluginDir := filepath.Dir(testenv.BuildBinary(t, "../../plugins/docker", "krops-provider-docker"))
	eng := testenv.NewStandInEngine(t, map[string]string{"local-workload-lb": "127.0.0.1:" + u.Port()})
	engineDir := eng.Dir
	bin := testenv.BuildBinary(t, ".", "krops-flux-seed")
	env := append([]string{"PATH=" + sdktest.PathWithoutEngines(t, "", engineDir), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + t.TempDir(), "KUBECONFIG=" + mgmt.Kubeconfig, "BOOTSTRAP_KUBECONTEXT=kind-seed",
		"BOOTSTRAP_CONFIG=" + filepath.Join(root, "bootstrap.toml"), "KROPS_PLUGIN_DIR=" + pluginDir, "LOCAL_RECONCILE_TIMEOUT=3m"}, artifactEnv(reg.Host)...)
	args := []string{"local-host", "--chart-repository", charts, "--registry-in-cluster", reg.Host}
	r := testenv.RunBinary(t, root, env, bin, args...)
	if r.Code != 0 {
		t.Fatalf("seed: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{"✔ waiting for Flux to take over", "4 of 4 ready", "reaching local-workload at https://127.0.0.1:" + u.Port(), "✔ waiting for workload cluster local-workload's Flux", "1 of 1 ready"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.Stderr)
		}
	}
	var cm corev1.ConfigMap
	if err := workload.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "from-the-workload-tree"}, &cm); err != nil {
		t.Errorf("the workload's Flux did not apply workload/local-host: %v", err)
	}
	if log := eng.Calls(); !strings.Contains(log, "port local-workload-lb 6443/tcp") {
		t.Errorf("the provider did not look up the workload's published port; engine calls:\n%s", log)
	}

	// Ctrl-C while waiting: the wait stops at once, names what it was
	// waiting for, and exits 1; nothing applied is undone.
	cmd := exec.Command(bin, append(args, "--wait-for", "never-there")...)
	cmd.Dir, cmd.Env = root, env
	// Written by exec's copying goroutine while this one reads it.
	var stderr proc.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), "waiting for Kustomization flux-system/never-there") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// A wait that ignored the signal would run into the 3m timeout and
	// say so instead.
	out := stderr.String()
	// Under load other Kustomizations may still be pending too: the
	// message lists every one, never-there among them.
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(out, "interrupted while waiting: still waiting for ") ||
		!strings.Contains(out, "Kustomization flux-system/never-there: not found yet") ||
		!strings.Contains(out, "rerun `krops-flux-seed local-host` to go on") || strings.Contains(out, "interrupted again") {
		t.Errorf("Ctrl-C: exit %d\n%s", code, out)
	}
}
