// Package seedtest holds test helpers for the tools that install Flux and
// charts: a stand-in flux-operator chart built from the operator module's
// own manifests, a classic Helm chart repository on loopback, and a STAND-IN
// for the kubelet that marks Deployments available.
package seedtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

// StandInOperatorChart is a STAND-IN for the published flux-operator chart
// (no chart ships in a Go module, and no chart registry is reachable): a
// chart made of the operator module's own install manifests at the one
// version the module proxy serves (testenv.FluxOperator, v0.59.0), pushed to
// the loopback registry as <host>/charts/flux-operator:<version>. version
// is the chart version bootstrap.toml pins (0.61.0), because the seed pulls
// exactly that; the chart's appVersion and its stand-in annotation say
// which manifests it really carries. The envtest lanes run the operator as
// a process, so this chart carries only its ServiceAccount and Deployment.
func StandInOperatorChart(t testing.TB, reg *testenv.OCIRegistry, version string) string {
	t.Helper()
	return PushOperatorChart(t, reg.Host, OperatorChart{Version: version})
}

// OperatorChart is what PushOperatorChart builds.
type OperatorChart struct {
	// Version is the chart version bootstrap.toml pins.
	Version string
	// Image, when set, makes the chart one real nodes run: the operator's
	// CRDs (crds/), its ServiceAccount bound to cluster-admin, its
	// Service, and the Deployment running Image.
	Image string
}

// PushOperatorChart builds the stand-in flux-operator chart (see
// StandInOperatorChart) and pushes it over plain HTTP to the registry at
// host as <host>/charts/flux-operator:<version>; it returns the chart
// repository, oci://<host>/charts.
func PushOperatorChart(t testing.TB, host string, c OperatorChart) string {
	t.Helper()
	crd := testenv.CRDPaths(t, testenv.FluxOperator)[0]
	module := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(crd)))) // .../config/crd/bases/x.yaml
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(module, f))
		if err != nil {
			t.Fatalf("the operator module's install manifests: %v", err)
		}
		return b
	}
	files := []string{"config/manager/account.yaml", "config/manager/deployment.yaml"}
	if c.Image != "" {
		files = append(files, "config/manager/service.yaml", "config/default/rbac.yaml")
	}
	var templates, crds []*common.File
	for _, f := range files {
		b := read(f)
		switch {
		case c.Image != "" && strings.HasSuffix(f, "deployment.yaml"):
			// kustomize sets the image in the operator's own build.
			b = []byte(strings.Replace(string(b), "image: flux-operator:latest", "image: "+c.Image, 1))
		case strings.HasSuffix(f, "rbac.yaml"):
			b = []byte(strings.ReplaceAll(string(b), "namespace: flux-system", "namespace: {{ .Release.Namespace }}"))
		}
		templates = append(templates, &common.File{Name: "templates/" + filepath.Base(f), Data: b})
	}
	if c.Image != "" {
		for _, p := range testenv.CRDPaths(t, testenv.FluxOperator) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			crds = append(crds, &common.File{Name: "crds/" + filepath.Base(p), Data: b})
		}
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "flux-operator", Version: c.Version, AppVersion: testenv.FluxOperator.Version,
		Annotations: map[string]string{"krops.dev/stand-in": "flux-operator " + testenv.FluxOperator.Version + " install manifests under chart version " + c.Version}},
		Templates: templates, Files: crds}
	return PushChart(t, host, ch)
}

// PushChart packages ch and pushes it over plain HTTP to the OCI registry
// at host as <host>/charts/<name>:<version>, and returns the repository
// (oci://<host>/charts) krops's Helm code installs it from.
func PushChart(t testing.TB, host string, ch *chart.Chart) string {
	t.Helper()
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatalf("packaging chart %s: %v", ch.Name(), err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(dir, "none.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(data, host+"/charts/"+ch.Name()+":"+ch.Metadata.Version); err != nil {
		t.Fatalf("pushing chart %s: %v", ch.Name(), err)
	}
	return "oci://" + host + "/charts"
}

// StandInKubelet is a STAND-IN for kubelets (none run here): it marks every
// Deployment available, so the Flux Operator's health checks pass for the
// Flux controllers it installs (which run as processes beside the test).
func StandInKubelet(ctx context.Context, c client.Client) {
	for {
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list); err == nil {
			for i := range list.Items {
				d := &list.Items[i]
				want := int32(1)
				if d.Spec.Replicas != nil {
					want = *d.Spec.Replicas
				}
				if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == want {
					continue
				}
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: want, ReadyReplicas: want, AvailableReplicas: want, UpdatedReplicas: want,
					Conditions: []appsv1.DeploymentCondition{
						{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
						{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
					}}
				_ = c.Status().Update(ctx, d)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Chart is a chart for ChartRepository: its templates by file name.
type Chart struct {
	Name, Version string
	Templates     map[string]string
}

// ChartRepository serves charts as a classic Helm chart repository
// (index.yaml and .tgz files) on loopback and returns its URL. The charts
// are STAND-INs for public ones (cert-manager, cluster-api-operator) that
// no Go module ships and this machine cannot download.
func ChartRepository(t testing.TB, charts ...Chart) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range charts {
		var files []*common.File
		for name, body := range c.Templates {
			files = append(files, &common.File{Name: "templates/" + name, Data: []byte(body)})
		}
		ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: c.Name, Version: c.Version}, Templates: files}
		if _, err := chartutil.Save(ch, dir); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	idx, err := repo.IndexDirectory(dir, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL
}
