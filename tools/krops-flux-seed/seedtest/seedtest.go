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
// which manifests it really carries.
func StandInOperatorChart(t testing.TB, reg *testenv.OCIRegistry, version string) string {
	t.Helper()
	crd := testenv.CRDPaths(t, testenv.FluxOperator)[0]
	module := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(crd)))) // .../config/crd/bases/x.yaml
	var templates []*common.File
	for _, f := range []string{"config/manager/account.yaml", "config/manager/deployment.yaml"} {
		b, err := os.ReadFile(filepath.Join(module, f))
		if err != nil {
			t.Fatalf("the operator module's install manifests: %v", err)
		}
		templates = append(templates, &common.File{Name: "templates/" + filepath.Base(f), Data: b})
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "flux-operator", Version: version, AppVersion: testenv.FluxOperator.Version,
		Annotations: map[string]string{"krops.dev/stand-in": "flux-operator " + testenv.FluxOperator.Version + " install manifests under chart version " + version}}, Templates: templates}
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(filepath.Join(dir, "none.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(data, reg.Host+"/charts/flux-operator:"+version); err != nil {
		t.Fatal(err)
	}
	return "oci://" + reg.Host + "/charts"
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
