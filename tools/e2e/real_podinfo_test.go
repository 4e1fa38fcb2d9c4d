//go:build realengine

package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// podinfoLane is Podinfo as the lane has it: the chart from the module
// tools/realengine/podinfo/go.mod pins and the image images.sh built from
// it.
type podinfoLane struct {
	version, image string
	chart          string // oci:// repository the host pushed it to
}

// stockPodinfo pushes Podinfo's chart (charts/podinfo of its module, as
// its release publishes it) and image to the lane's registry, where the
// node pulls the image through its ghcr.io mirror and source-controller
// fetches the chart by the registry's name on the kind network.
func stockPodinfo(t *testing.T, repo string) podinfoLane {
	t.Helper()
	ch, err := chartloader.LoadDir(podinfoChartDir(t, repo))
	if err != nil {
		t.Fatalf("Podinfo's chart: %v", err)
	}
	p := podinfoLane{version: ch.Metadata.Version, image: "ghcr.io/stefanprodan/podinfo:" + ch.Metadata.AppVersion}
	if err := exec.Command("docker", "image", "inspect", p.image).Run(); err != nil {
		testenv.Missing(t, "the image "+p.image, "run tools/realengine/images.sh (`tools/task.sh e2e:real` does)")
	}
	pushed := "localhost:5001/stefanprodan/podinfo:" + ch.Metadata.AppVersion
	engine(t, "tag", p.image, pushed)
	engine(t, "push", pushed)
	_ = exec.Command("docker", "rmi", pushed).Run()
	p.chart = seedtest.PushChart(t, "localhost:5001", ch)
	return p
}

// podinfoChartDir is Podinfo's chart directory in the module
// tools/realengine/podinfo/go.mod pins.
func podinfoChartDir(t *testing.T, repo string) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(repo, "tools", "realengine", "podinfo", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require github.com/stefanprodan/podinfo (\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("tools/realengine/podinfo/go.mod requires no github.com/stefanprodan/podinfo")
	}
	return filepath.Join(moduleAt(t, "github.com/stefanprodan/podinfo", string(m[1])), "charts", "podinfo")
}

// podinfoThroughFlux has the seeded Flux reconcile workload/local-host,
// the tree the workload cluster's Flux syncs, from the artifact the seed
// published: the real kustomize-controller applies the tree's podinfo
// namespace, OCIRepository and HelmRelease; the real source-controller
// pulls the chart from the local registry; helm-controller (the lane's
// krops-standin-helmcontroller) installs it with the Helm SDK; the node
// runs Podinfo from the image it pulls through its mirror; krops-access
// port-forward reaches it from the host and Podinfo answers. Deleting the
// Kustomization prunes the HelmRelease, which uninstalls the release.
//
// The Kustomization's patches are what an air-gapped user (or zarf's
// agent) does to the tree's OCIRepository: the URL points at the local
// registry over plain HTTP, and the tag at the Podinfo the lane has
// (tools/realengine/podinfo/go.mod: the module proxy serves 6.9.2, the
// tree pins 6.15.0).
func podinfoThroughFlux(t *testing.T, r *realEnv, kubectl func(...string) (string, error)) map[string]time.Duration {
	t.Helper()
	took := map[string]time.Duration{}
	p := stockPodinfo(t, r.repo)
	runID := ""
	for _, e := range r.env {
		if v, ok := strings.CutPrefix(e, "KROPS_RUN_ID="); ok {
			runID = v
		}
	}
	inNet := strings.Replace(p.chart, "localhost:5001", laneRegistryInNet, 1) + "/podinfo"
	ks := `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: workload, namespace: flux-system}
spec:
  interval: 10m
  sourceRef: {kind: OCIRepository, name: flux-system}
  path: ./workload/local-host
  prune: true
  timeout: 5m
  postBuild:
    substitute: {KROPS_RUN_ID: "` + runID + `"}
  patches:
  - target: {kind: OCIRepository, name: podinfo}
    patch: |
      - op: replace
        path: /spec/url
        value: ` + inNet + `
      - op: add
        path: /spec/insecure
        value: true
      - op: replace
        path: /spec/ref/tag
        value: "` + p.version + `"
`
	apply := exec.Command("kubectl", "--kubeconfig", filepath.Join(r.home, ".kube", "config"), "--context", "kind-"+laneCluster, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(ks)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("applying the workload Kustomization: %v\n%s", err, out)
	}
	start := time.Now()
	jsonpathReady := `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`
	took["chart pulled"] = waitFor(t, "OCIRepository podinfo/podinfo Ready", 3*time.Minute, func() (bool, string) {
		got, err := kubectl("get", "ocirepository", "podinfo", "-n", "podinfo", "-o", jsonpathReady)
		return err == nil && strings.HasPrefix(got, "True "), got
	})
	took["HelmRelease Ready"] = waitFor(t, "HelmRelease podinfo/podinfo Ready", 5*time.Minute, func() (bool, string) {
		got, err := kubectl("get", "helmrelease", "podinfo", "-n", "podinfo", "-o", jsonpathReady)
		return err == nil && strings.HasPrefix(got, "True "), got
	}) + took["chart pulled"]
	t.Logf("Podinfo installed by Flux %v after the Kustomization was applied", time.Since(start).Round(time.Second))

	// What runs is the chart's Deployment with the tree's values: the run
	// id substituted by kustomize-controller, the image pulled through the
	// node's mirror.
	pods, err := kubectl("get", "pods", "-n", "podinfo", "-o", "json")
	if err != nil {
		t.Fatal(pods)
	}
	var list struct {
		Items []struct {
			Metadata struct{ Annotations map[string]string }
			Spec     struct{ Containers []struct{ Image string } }
			Status   struct{ Phase string }
		}
	}
	if err := json.Unmarshal([]byte(pods), &list); err != nil || len(list.Items) == 0 {
		t.Fatalf("pods in podinfo: %v\n%s", err, pods)
	}
	for _, pod := range list.Items {
		if pod.Status.Phase != "Running" || pod.Spec.Containers[0].Image != p.image || pod.Metadata.Annotations["krops.io/run-id"] != runID {
			t.Errorf("Podinfo pod: phase %s, image %s, run-id %q; want Running, %s, %q", pod.Status.Phase, pod.Spec.Containers[0].Image, pod.Metadata.Annotations["krops.io/run-id"], p.image, runID)
		}
	}

	kindAsWorkload(t, r)
	status, body := forwardAndGet(t, r, "/version", regexp.MustCompile(`to pod podinfo/podinfo-[a-z0-9-]+ port 9898 \(Service podinfo\) on cluster local-workload`))
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Version != strings.TrimPrefix(p.version, "v") {
		t.Errorf("Podinfo's /version: %q (%v), want version %s", body, err, p.version)
	}
	t.Logf("podinfo: HTTP %d %s", status, strings.TrimSpace(body))

	// Pruned with its Kustomization: the HelmRelease goes, and with it
	// (helm-controller's finalizer) the release and its Deployment.
	start = time.Now()
	if out, err := kubectl("delete", "kustomization", "workload", "-n", "flux-system", "--wait=true", "--timeout=5m"); err != nil {
		t.Fatalf("deleting the workload Kustomization: %v\n%s", err, out)
	}
	waitFor(t, "Podinfo gone", 3*time.Minute, func() (bool, string) {
		got, err := kubectl("get", "helmrelease,deployment,service", "-n", "podinfo", "-o", "name")
		return err == nil && got == "", got
	})
	took["pruned"] = time.Since(start)
	if secrets, err := kubectl("get", "secrets", "-n", "podinfo", "-l", "owner=helm", "-o", "name"); err == nil && secrets != "" {
		t.Errorf("Helm's release records outlived the HelmRelease: %s", secrets)
	}
	return took
}
