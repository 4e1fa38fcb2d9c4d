package main_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// A seeded cluster that stops answering while the seed waits for Flux (its
// node container paused or frozen, its engine gone) is unknown state:
// exit 3 once --query-timeout has passed without an answer, with everything
// applied kept, instead of waiting out LOCAL_RECONCILE_TIMEOUT (exit 1 and
// a list of "blocking" objects that only looked stuck). No Flux runs here,
// so nothing would become Ready without the pause either.
func TestASilentClusterDuringTheWaitIsUnknownState(t *testing.T) {
	cluster := testenv.APIServer(t, testenv.ClusterOptions{CRDs: []testenv.CRDSet{testenv.FluxOperator, testenv.FluxSource, testenv.FluxKustomize}})
	reg := testenv.Registry(t)
	charts := seedtest.StandInOperatorChart(t, reg, "0.61.0")
	p := testenv.NewPausable(t, cluster.Config)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(p.Config(), "kind-seed", kubeconfig); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildBinary(t, ".", "krops-flux-seed")
	cmd := exec.Command(bin, "local-host", "--no-follow", "--chart-repository", charts, "--registry-in-cluster", reg.Host, "--query-timeout", "3s")
	cmd.Dir = root
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig, "BOOTSTRAP_KUBECONTEXT=kind-seed",
		"LOCAL_RECONCILE_TIMEOUT=10m", "KROPS_RUN_ID=local-seed-test"}, artifactEnv(reg.Host)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	paused := false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !paused && strings.Contains(sc.Text(), "waiting for Flux to take over") {
			p.Pause(true)
			paused = true
		}
	}
	_ = cmd.Wait()
	p.Pause(false)
	if !paused {
		t.Fatalf("the seed never waited for Flux: exit %d\n%s", cmd.ProcessState.ExitCode(), &out)
	}
	code := cmd.ProcessState.ExitCode()
	t.Logf("exit %d\n%s", code, &out)
	for _, want := range []string{"context kind-seed: the API server stopped answering (no answer for 3s)", "everything applied so far stays", "rerun `krops-flux-seed local-host` once it answers"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the seed's error lacks %q", want)
		}
	}
	if code != 3 || strings.Contains(out.String(), "Blocking:") {
		t.Errorf("the seed with its cluster silent: exit %d, want 3 (unknown state) and no timeout report\n%s", code, &out)
	}
	// Nothing was undone.
	fi := &unstructured.Unstructured{}
	fi.SetAPIVersion("fluxcd.controlplane.io/v1")
	fi.SetKind("FluxInstance")
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: "flux-system", Name: "flux"}, fi); err != nil {
		t.Errorf("the FluxInstance the seed applied: %v", err)
	}
}
