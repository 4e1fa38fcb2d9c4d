//go:build realengine

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	ggtypes "github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/fluxbuild"
	"github.com/kropsdev/krops/tools/kit/helmrelease"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/seed"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// quayMirror sends the node's pulls of quay.io (cert-manager's images) to
// the local registry, as an air-gapped user's [[mirrors]] would.
// operatorGroup is the API group of the Cluster API operator's providers.
const operatorGroup = "operator.cluster.x-k8s.io"

// operatorType is the operator's name for a provider kind's type, which
// names its file in a release artifact.
var operatorType = map[string]string{"CoreProvider": "core", "BootstrapProvider": "bootstrap",
	"ControlPlaneProvider": "control-plane", "InfrastructureProvider": "infrastructure"}

const quayMirror = "[[mirrors]]\nregistry = \"quay.io\"\nendpoints = [\"http://" + laneRegistryInNet + "\"]\n"

// chartPin is the version bootstrap.toml [charts] pins for name.
func chartPin(t *testing.T, repo, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "bootstrap.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*=\s*"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("bootstrap.toml [charts] pins no %s", name)
	}
	return string(m[1])
}

// moduleAt is the directory of module@version in the module cache,
// downloaded when missing.
func moduleAt(t *testing.T, module, version string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir string }
	if err != nil || json.Unmarshal(out, &m) != nil || m.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v\n%s", module, version, err, out)
	}
	return m.Dir
}

// laneCharts are the two charts the pivot installs (bootstrap.toml
// [charts]), built from their modules as their release tooling builds
// them and pushed to the lane's registry under <host>/charts:
//
//   - cert-manager: deploy/charts/cert-manager of the library module,
//     unchanged but for version and appVersion, which cert-manager's release
//     tool sets (so the images are quay.io/jetstack/cert-manager-*:v<pin>,
//     the lane's stand-ins).
//   - cluster-api-operator: hack/charts/cluster-api-operator with
//     templates/operator-components.yaml from `kustomize build
//     config/chart` and the image values its Makefile's release sets
//     (registry.k8s.io/capi-operator/cluster-api-operator:v<pin>).
func laneCharts(t *testing.T, repo, host string) (certManager, operator helmrelease.Chart) {
	t.Helper()
	push := func(ch *chart.Chart) { seedtest.PushChart(t, host, ch) }
	repository := "oci://" + host + "/charts"

	cmPin := chartPin(t, repo, "cert-manager")
	cmVersion := "v" + strings.TrimPrefix(cmPin, "v")
	cm, err := chartloader.LoadDir(filepath.Join(moduleAt(t, "github.com/cert-manager/cert-manager", cmVersion), "deploy/charts/cert-manager"))
	if err != nil {
		t.Fatalf("cert-manager's chart: %v", err)
	}
	cm.Metadata.Version, cm.Metadata.AppVersion = cmVersion, cmVersion
	push(cm)

	opPin := chartPin(t, repo, "capi-operator")
	opModule := moduleAt(t, "sigs.k8s.io/cluster-api-operator", "v"+strings.TrimPrefix(opPin, "v"))
	op, err := chartloader.LoadDir(filepath.Join(opModule, "hack/charts/cluster-api-operator"))
	if err != nil {
		t.Fatalf("the Cluster API operator's chart: %v", err)
	}
	res, err := fluxbuild.Build(filesys.MakeFsOnDisk(), filepath.Join(opModule, "config/chart"))
	if err != nil {
		t.Fatalf("kustomize build config/chart of the Cluster API operator: %v", err)
	}
	components, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	op.Templates = append(op.Templates, &common.File{Name: "templates/operator-components.yaml", Data: components})
	for _, f := range op.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		v := regexp.MustCompile(`(?m)^(\s+repository: ).*cluster-api-operator$`).ReplaceAll(f.Data, []byte("${1}registry.k8s.io/capi-operator/cluster-api-operator"))
		v = regexp.MustCompile(`(?m)^(\s+tag: )dev$`).ReplaceAll(v, []byte("${1}v"+strings.TrimPrefix(opPin, "v")))
		if bytes.Equal(v, f.Data) {
			t.Fatal("the operator chart's values.yaml no longer has image.manager.repository and tag: dev as this test expects")
		}
		f.Data = v
	}
	op.Metadata.Version, op.Metadata.AppVersion = opPin, opPin
	push(op)

	return helmrelease.Chart{Repository: repository, Name: "cert-manager", Version: cmPin},
		helmrelease.Chart{Repository: repository, Name: "cluster-api-operator", Version: opPin}
}

// providerComponents are one provider's components as its release builds
// them (kustomize config/default, the manager image set to the release
// image).
func providerComponents(t *testing.T, p capiProvider) []byte {
	t.Helper()
	var docs []string
	for _, o := range kustomizeBuild(t, filepath.Join(p.module, p.config)) {
		if o["kind"] == "Deployment" {
			for _, c := range o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any) {
				c := c.(map[string]any)
				if c["name"] == "manager" {
					c["image"], c["imagePullPolicy"] = p.image, "IfNotPresent"
				}
			}
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return []byte(strings.Join(docs, "---\n"))
}

// providerRepository is where the lane mirrors the providers' releases, as
// KROPS_PROVIDER_REPOSITORY names it from this machine.
const providerRepository = "localhost:5001/capi"

// pushProviderRelease mirrors the cluster-api release into the lane's
// registry as docs/configuration.md ("Provider repository") tells a user
// to: one OCI artifact tagged with the version, its layers the release's
// files named by their title annotation (as `oras push` names them),
// CAPD's infrastructure-components-development.yaml as
// infrastructure-components.yaml. The operator fetches it from there.
func pushProviderRelease(t *testing.T, l *capiLane, types map[string]string) string {
	t.Helper()
	img := mutate.MediaType(empty.Image, ggtypes.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.oci.empty.v1+json")
	files := map[string][]byte{}
	for _, p := range l.providers {
		typ, ok := types[p.namespace]
		if !ok {
			t.Fatalf("the tree has no provider object in %s", p.namespace)
		}
		files[typ+"-components.yaml"] = providerComponents(t, p)
		metadata, err := os.ReadFile(p.metadata)
		if err != nil {
			t.Fatalf("the provider's metadata.yaml: %v", err)
		}
		files["metadata.yaml"] = metadata
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(files[name], "text/plain"),
			Annotations: map[string]string{"org.opencontainers.image.title": name}})
		if err != nil {
			t.Fatal(err)
		}
	}
	ref, err := name.ParseReference(providerRepository+"/cluster-api/releases:"+l.version, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing the cluster-api release to %s: %v", ref, err)
	}
	t.Logf("mirrored the cluster-api release %s as %s: %s", l.version, ref, strings.Join(names, ", "))
	return ref.String()
}

// providerTypes maps each provider object's namespace to the operator's
// name for its type (core, bootstrap, ...), which names its components file.
func providerTypes(objs []map[string]any) map[string]string {
	types := map[string]string{}
	for _, o := range objs {
		if kind := o["kind"].(string); strings.HasSuffix(kind, "Provider") {
			types[o["metadata"].(map[string]any)["namespace"].(string)] = operatorType[kind]
		}
	}
	return types
}

// operatorProviders installs cert-manager and the Cluster API operator
// with krops's Helm code and the pivot's values, then the local-host tree's
// provider objects (mgmt/local-host/capi-providers, as Flux applies them)
// with their components delivered offline, and waits until the operator
// reports each installed at the tree's version and its managers are
// Available.
func operatorProviders(t *testing.T, r *realEnv, l *capiLane, kubectl func(...string) (string, error)) map[string]time.Duration {
	t.Helper()
	took := map[string]time.Duration{}
	target := kubecfg.Ref{Path: filepath.Join(r.home, ".kube", "config"), Context: "kind-" + laneCluster}
	certManager, operator := laneCharts(t, r.repo, "localhost:5001")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The values are the pivot's (tools/krops-pivot/internal/install).
	for _, c := range []struct {
		chart       helmrelease.Chart
		release, ns string
		values      map[string]any
	}{
		{certManager, "cert-manager", "cert-manager", map[string]any{"crds": map[string]any{"enabled": true}}},
		{operator, "capi-operator", "capi-operator-system", map[string]any{"cert-manager": map[string]any{"enabled": false}}},
	} {
		start := time.Now()
		changed, err := helmrelease.Ensure(ctx, c.chart, helmrelease.Release{Cluster: target, Name: c.release, Namespace: c.ns, Values: c.values, Wait: 5 * time.Minute})
		if err != nil || !changed {
			t.Fatalf("installing %s: changed %v, %v", c.chart, changed, err)
		}
		took[c.release] = time.Since(start)
		t.Logf("release %s/%s (%s) ready after %v", c.ns, c.release, c.chart, took[c.release].Round(time.Second))
		// A second Ensure at the same pin changes nothing (cert-manager's
		// chart is v1.21.2 where the pin says 1.21.2).
		if changed, err := helmrelease.Ensure(ctx, c.chart, helmrelease.Release{Cluster: target, Name: c.release, Namespace: c.ns, Values: c.values}); err != nil || changed {
			t.Fatalf("ensuring %s again: changed %v, %v (want unchanged)", c.chart, changed, err)
		}
	}
	// The certificate the operator's webhook serves was issued by the
	// stand-in cert-manager in the cluster, and cainjector put its CA in
	// the operator's webhook configuration.
	if out, err := kubectl("get", "certificate", "-n", "capi-operator-system", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}`); err != nil || !strings.Contains(out, "=True") || strings.Contains(out, "=False") {
		t.Fatalf("the operator's Certificates are not Ready: %v %s", err, out)
	}

	start := time.Now()
	// krops-sync's provider keys as krops-flux-seed writes them for
	// KROPS_PROVIDER_REPOSITORY=oci://localhost:5001/capi (the local
	// registry, by its in-cluster name, over plain HTTP).
	sync := seed.SyncVars(seed.Options{Providers: seed.Providers{Repository: "oci://" + laneRegistryInNet + "/capi", PlainHTTP: true}})
	vars := map[string]string{"KROPS_ENVIRONMENT": "local-host",
		"KROPS_PROVIDER_FETCH": sync["KROPS_PROVIDER_FETCH"], "KROPS_PROVIDER_REPOSITORY": sync["KROPS_PROVIDER_REPOSITORY"]}
	built := splitObjects(t, fluxExpand(t, kustomizeYAML(t, filepath.Join(r.repo, "mgmt/local-host/capi-providers")), vars))
	pushProviderRelease(t, l, providerTypes(built))
	var namespaces, objects []map[string]any
	var providers [][2]string // resource, namespace/name
	for _, o := range built {
		md := o["metadata"].(map[string]any)
		kind := o["kind"].(string)
		switch {
		case kind == "Namespace":
			namespaces = append(namespaces, o)
			continue
		case strings.HasSuffix(kind, "Provider"):
			ns := md["namespace"].(string)
			spec := o["spec"].(map[string]any)
			if spec["version"] != l.version {
				t.Fatalf("the tree pins %s %s at %v, the lane builds %s", kind, md["name"], spec["version"], l.version)
			}
			// The tree's own fetchConfig, substituted: the mirror, not GitHub.
			if fc, _ := spec["fetchConfig"].(map[string]any); len(fc) != 1 || fc["oci"] != "http://"+laneRegistryInNet+"/capi/cluster-api/releases" {
				t.Fatalf("the tree's %s %s/%s fetches from %v after substitution, want the lane's mirror", kind, ns, md["name"], fc)
			}
			providers = append(providers, [2]string{strings.ToLower(kind) + "." + operatorGroup, ns + "/" + md["name"].(string)})
		}
		objects = append(objects, o)
	}
	if len(providers) != len(l.providers) {
		t.Fatalf("the tree's providers %v, want one for each of the lane's %d", providers, len(l.providers))
	}
	var docs []string
	for _, o := range append(namespaces, objects...) {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	file := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("apply", "--server-side", "--field-manager=krops-e2e", "-f", file); err != nil {
		t.Fatalf("applying the tree's providers: %v\n%s", err, out)
	}
	for _, p := range providers {
		ns, name, _ := strings.Cut(p[1], "/")
		waitFor(t, p[0]+" "+p[1], 10*time.Minute, func() (bool, string) {
			out, _ := kubectl("get", p[0], "-n", ns, name, "-o", `jsonpath={.status.installedVersion} {range .status.conditions[*]}{.type}={.status}:{.reason} {end}`)
			return strings.HasPrefix(out, l.version+" ") && strings.Contains(out, " Ready=True"), out
		})
	}
	for _, p := range l.providers {
		if out, err := kubectl("wait", "-n", p.namespace, "--for=condition=Available", "deployment", "--all", "--timeout=5m"); err != nil {
			t.Fatalf("the %s managers: %v\n%s", p.namespace, err, out)
		}
	}
	took["providers"] = time.Since(start)
	return took
}

// operatorImages are cert-manager's (the lane's stand-ins) and the Cluster
// API operator's, at the bootstrap.toml [charts] pins, as images.sh builds
// them.
func operatorImages(t *testing.T, repo string) []string {
	t.Helper()
	cm := "v" + strings.TrimPrefix(chartPin(t, repo, "cert-manager"), "v")
	var out []string
	for _, p := range []string{"controller", "webhook", "cainjector", "startupapicheck"} {
		out = append(out, "quay.io/jetstack/cert-manager-"+p+":"+cm)
	}
	out = append(out, "registry.k8s.io/capi-operator/cluster-api-operator:v"+strings.TrimPrefix(chartPin(t, repo, "capi-operator"), "v"))
	for _, img := range out {
		if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
			t.Fatalf("the image %s is missing: run tools/realengine/images.sh (`tools/task.sh e2e:real` does)", img)
		}
	}
	return out
}

// TestRealEngineProvidersThroughTheOperator installs Cluster API on a real
// kind node the way the pivot does and the local-host tree asks: krops's
// Helm code puts cert-manager and the Cluster API operator in from charts
// in the local registry (over OCI), the tree's provider objects go in, and
// the operator installs the core, kubeadm and CAPD providers from their
// components delivered offline, their webhooks served with certificates
// the in-cluster cert-manager issued. The components come through the
// product's KROPS_PROVIDER_REPOSITORY: the tree's provider objects,
// substituted with krops-sync's keys as Flux and the pivot substitute them,
// fetch the cluster-api release from the lane registry's mirror of it
// (built from the modules and pushed as the docs tell a user to).
//
// STAND-INS, named: cert-manager's four programs
// (tools/testenv/cmd/krops-standin-certmanager under cert-manager's real
// chart; the proxy serves none of their modules); the release's files are
// built from the modules, not downloaded from GitHub.
func TestRealEngineProvidersThroughTheOperator(t *testing.T) {
	r := newRealEnv(t)
	l := newCAPILane(t)
	extra := operatorImages(t, r.repo)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is missing: install it (the lane reads the cluster with it)")
	}
	if left := leftovers(t, laneCluster); len(left) > 0 {
		t.Fatalf("the engine already runs %v: the lane starts from an engine without them (tear down with `tools/task.sh teardown ENV=local-host`)", left)
	}
	kubectl := func(args ...string) (string, error) { return r.kubectl(t, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "coreprovider,bootstrapprovider,controlplaneprovider,infrastructureprovider", "-A", "-o", "yaml"},
				{"get", "certificates,issuers", "-A"}, {"logs", "-n", "capi-operator-system", "deploy/capi-operator-cluster-api-operator", "--tail=60"},
				{"logs", "-n", "cert-manager", "deploy/cert-manager", "--tail=40"}, {"get", "events", "-A", "--sort-by=.lastTimestamp"}} {
				out, _ := kubectl(q...)
				t.Logf("kubectl %s:\n%s", strings.Join(q, " "), out)
			}
		}
		_, _ = r.run(t, nil, "krops-sweep", "local-host")
	})
	phases := map[string]time.Duration{}
	up, took := r.run(t, []string{r.withMirrors(t, k8sMirror+quayMirror)}, "krops-kind", "up", "local-host")
	if up.Code != 0 {
		t.Fatalf("krops-kind up: exit %d after %v\n%s\n%s", up.Code, took, up.Stdout, up.Stderr)
	}
	phases["kind"] = took
	// The node pulls every image through its registry.k8s.io and quay.io
	// mirrors from the local registry.
	pushToLaneRegistry(t, append(l.images(), extra...))
	for k, v := range operatorProviders(t, r, l, kubectl) {
		phases[k] = v
	}
	pods, _ := kubectl("get", "pods", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.containers[0].image} {.status.phase}{"\n"}{end}`)
	t.Logf("pods with the providers installed:\n%s", pods)
	if stats, err := exec.Command("docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}").CombinedOutput(); err == nil {
		t.Logf("engine containers' memory:\n%s", stats)
	}
	down, took := r.run(t, nil, "krops-sweep", "local-host")
	if down.Code != 0 {
		t.Fatalf("teardown: exit %d\n%s\n%s", down.Code, down.Stdout, down.Stderr)
	}
	phases["teardown"] = took
	if left := leftovers(t, laneCluster); len(left) > 0 {
		t.Errorf("after teardown the engine still has %v", left)
	}
	var report []string
	for _, k := range []string{"kind", "cert-manager", "capi-operator", "providers", "teardown"} {
		report = append(report, fmt.Sprintf("%s %v", k, phases[k].Round(time.Second)))
	}
	t.Logf("phases: %s", strings.Join(report, ", "))
}
