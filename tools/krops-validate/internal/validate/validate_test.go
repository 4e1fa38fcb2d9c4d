package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/testenv"
)

// fixture is a small repository that passes every check; each test breaks
// one rule.
func fixture() map[string]string {
	return map[string]string{
		"bootstrap.toml": `
[bootstrap]
default-environment = "one"
[charts]
flux-operator = "0.61.0"
cert-manager = "1.21.2"
capi-operator = "0.29.0"
[environments.one]
provider = "aws"
sync = "github"
sync-path = "mgmt/one"
mgmt-cluster = "eu-north-1-management"
mgmt-ready-timeout = "40m"
infra-provider-namespace = "capa-system"
infra-provider-name = "aws"
provider-manifests = ["mgmt/one/providers/providers.yaml"]
[environments.one.teardown]
mgmt-eks-cluster-name = "default_eu-north-1-management-control-plane"
[[environments.one.teardown.aws-workloads]]
region = "eu-west-1"
cluster-name = "eu-west-1-workload"
eks-cluster-name = "default_eu-west-1-workload-control-plane"
rds-instance = "krops-eu-west-1-workload-db"
`,
		"mgmt/one/kustomization.yaml": "resources:\n- flux-ks.yaml\n- cert-manager\n- apps.yaml\n- delivery.yaml\n",
		"mgmt/one/delivery.yaml": `apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata:
  name: delivery
  namespace: flux-system
spec:
  inputs:
  - component: cert-manager
  resources:
  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata:
      name: << inputs.component >>-copy
      namespace: flux-system
    spec:
      dependsOn:
      - name: infrastructure
      interval: 5m
      retryInterval: 2m
      timeout: 5m
      prune: true
      path: ./mgmt/one/<< inputs.component >>
      sourceRef:
        kind: GitRepository
        name: flux-system
`,
		"mgmt/one/flux-ks.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: infrastructure
  namespace: flux-system
spec:
  interval: 5m
  retryInterval: 2m
  timeout: 5m
  prune: true
  path: ./mgmt/one/cert-manager
  sourceRef:
    kind: GitRepository
    name: flux-system
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  dependsOn:
  - name: infrastructure
  interval: 5m
  retryInterval: 2m
  timeout: 5m
  prune: true
  path: ./mgmt/one
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substitute:
      KROPS_ENVIRONMENT: one
    substituteFrom:
    - kind: ConfigMap
      name: krops-run
      optional: true
`,
		"mgmt/one/cert-manager/kustomization.yaml": "resources:\n- namespace.yaml\n- release.yaml\n",
		"mgmt/one/cert-manager/namespace.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cert-manager\n",
		"mgmt/one/cert-manager/release.yaml": `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: jetstack
  namespace: cert-manager
spec:
  interval: 1h
  url: https://charts.jetstack.io
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: cert-manager
  namespace: cert-manager
spec:
  interval: 1h
  chart:
    spec:
      chart: cert-manager
      version: "1.21.2"
      sourceRef:
        kind: HelmRepository
        name: jetstack
`,
		"mgmt/one/apps.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  namespace: default
  labels:
    krops.io/run-id: "${KROPS_RUN_ID:=unknown}"
spec:
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
      annotations:
        # A placeholder that picks the key (as the provider objects' fetchConfig).
        "${KROPS_SOURCE_KEY:=krops.io/source}": "${KROPS_SOURCE:=https://github.com/kropsdev}/krops"
    spec:
      containers:
      - name: podinfo
        image: ghcr.io/stefanprodan/podinfo:6.15.0
`,
		"mgmt/one/providers/providers.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capa-system\n",
		"airgap/images.txt":                 "# image inventory\nghcr.io/stefanprodan/podinfo:6.15.0@sha256:" + strings.Repeat("ab", 32) + "\n",
	}
}

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func load(t *testing.T, files map[string]string) *Input {
	t.Helper()
	return loadAt(t, write(t, files))
}

// loadAt renders the trees of the repository at root.
func loadAt(t *testing.T, root string) *Input {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: filepath.Join(root, "bootstrap.toml")})
	if err != nil {
		t.Fatal(err)
	}
	in, err := Load(root, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestGoodFixturePassesEveryStaticCheck(t *testing.T) {
	f := fixture()
	// An image shipped inside a pinned image counts as inventoried.
	node := "docker.io/kindest/node:v1@sha256:" + strings.Repeat("cd", 32)
	f["airgap/images.txt"] += node + "\ndocker.io/kindest/kindnetd:v1 preloaded-in " + node + "\n"
	f["mgmt/one/kustomization.yaml"] += "configMapGenerator:\n- name: cni\n  files:\n  - cni.yaml\n"
	f["mgmt/one/cni.yaml"] = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: cni\n  namespace: kube-system\nspec:\n  template:\n    spec:\n      containers:\n      - name: cni\n        image: docker.io/kindest/kindnetd:v1\n"
	// A Secret made only of apply-time placeholders holds no secret.
	f["mgmt/one/ids.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ids\nstringData:\n  TENANT: ${AZURE_TENANT_ID}\n"
	in := load(t, f)
	if len(in.Objects) < 7 {
		t.Fatalf("rendered %d objects", len(in.Objects))
	}
	rendered := false
	for _, o := range in.Objects {
		rendered = rendered || (o.Name() == "flux-system/cert-manager-copy" && strings.Contains(o.Root, "ResourceSet flux-system/delivery input 0"))
	}
	if !rendered {
		t.Error("the ResourceSet's Kustomization was not rendered from its input")
	}
	for _, r := range Static(in) {
		if !r.OK() {
			t.Errorf("%s: %+v", r.Check, r.Problems)
		}
	}
}

func TestEachRuleCatchesItsBreakage(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(f map[string]string)
		check  string
		want   string
	}{
		{"a kustomization that does not build", func(f map[string]string) {
			f["mgmt/one/kustomization.yaml"] += "- missing.yaml\n"
		}, "every kustomization builds", "mgmt/one"},
		{"a path bootstrap.toml names is missing", func(f map[string]string) {
			delete(f, "mgmt/one/providers/providers.yaml")
		}, "every path bootstrap.toml names exists", "provider-manifests[0]"},
		{"a chart drifted from [charts]", func(f map[string]string) {
			f["mgmt/one/cert-manager/release.yaml"] = strings.Replace(f["mgmt/one/cert-manager/release.yaml"], `"1.21.2"`, `"1.20.0"`, 1)
		}, "chart versions equal bootstrap.toml [charts]", "chart cert-manager is at 1.20.0 but bootstrap.toml [charts] pins 1.21.2"},
		{"an EKS name off the naming rule", func(f map[string]string) {
			f["bootstrap.toml"] = strings.Replace(f["bootstrap.toml"], "default_eu-west-1-workload-control-plane", "eu-west-1-workload", 1)
		}, "teardown names follow the cluster naming", `should be "default_eu-west-1-workload-control-plane"`},
		{"an RDS name off the naming rule", func(f map[string]string) {
			f["bootstrap.toml"] = strings.Replace(f["bootstrap.toml"], "krops-eu-west-1-workload-db", "workload-db", 1)
		}, "teardown names follow the cluster naming", `should be "krops-eu-west-1-workload-db"`},
		{"a placeholder without default", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], "${KROPS_RUN_ID:=unknown}", "${KROPS_RUN_ID}", 1)
		}, "every ${KROPS_*} placeholder is quoted and has a default", "has no default"},
		{"an unquoted placeholder", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], `"${KROPS_RUN_ID:=unknown}"`, `${KROPS_RUN_ID:=unknown}`, 1)
		}, "every ${KROPS_*} placeholder is quoted and has a default", "inside a quoted string"},
		{"an unquoted key placeholder", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], `"${KROPS_SOURCE_KEY:=krops.io/source}":`, `${KROPS_SOURCE_KEY:=krops.io/source}:`, 1)
		}, "every ${KROPS_*} placeholder is quoted and has a default", "${KROPS_SOURCE_KEY:=krops.io/source} must be inside a quoted string"},
		{"a structured placeholder inside a string", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], `"${KROPS_RUN_ID:=unknown}"`, "\"${KROPS_RUN_ID:=unknown}\"\n    mirrors: \"x${KROPS_MIRRORS:=[]}\"", 1)
		}, "every ${KROPS_*} placeholder is quoted and has a default", "${KROPS_MIRRORS:=[]} stands for a list, map or boolean: it must be the whole value, unquoted"},
		{"a boolean placeholder inside a string", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], `"${KROPS_RUN_ID:=unknown}"`, "\"${KROPS_RUN_ID:=unknown}\"\n    insecure: \"${KROPS_INSECURE:=false}\"", 1)
		}, "every ${KROPS_*} placeholder is quoted and has a default", "${KROPS_INSECURE:=false} stands for a list, map or boolean: it must be the whole value, unquoted"},
		{"placeholders that only an optional source would substitute", func(f map[string]string) {
			f["mgmt/one/flux-ks.yaml"] = strings.Replace(f["mgmt/one/flux-ks.yaml"], "    substitute:\n      KROPS_ENVIRONMENT: one\n", "", 1)
		}, "every Kustomization that builds ${...} placeholders always substitutes", "Kustomization flux-system/apps (in mgmt/one): builds ${KROPS_RUN_ID:=unknown} in Deployment default/podinfo (in mgmt/one) but defines no variable that is always there"},
		{"a dependsOn that resolves to nothing", func(f map[string]string) {
			f["mgmt/one/flux-ks.yaml"] = strings.Replace(f["mgmt/one/flux-ks.yaml"], "- name: infrastructure", "- name: infra", 1)
		}, "every dependsOn names an object that exists", "dependsOn infra"},
		{"a plain-text Secret", func(f map[string]string) {
			f["mgmt/one/secret.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2\n"
		}, "no plain-text Secret (only *.sops.yaml)", "Secret creds holds data in plain text"},
		{"a Secret mixing placeholders and a literal", func(f map[string]string) {
			f["mgmt/one/ids.yaml"] = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ids\nstringData:\n  TENANT: ${AZURE_TENANT_ID}\n  KEY: literal\n"
		}, "no plain-text Secret (only *.sops.yaml)", "Secret ids holds data in plain text"},
		{"a Flux Kustomization path that does not exist", func(f map[string]string) {
			f["mgmt/one/flux-ks.yaml"] = strings.Replace(f["mgmt/one/flux-ks.yaml"], "path: ./mgmt/one/cert-manager", "path: ./mgmt/one/certmanager", 1)
		}, "every Flux Kustomization path exists in the repository", "spec.path ./mgmt/one/certmanager does not exist"},
		{"a Flux Kustomization path with nothing to build", func(f map[string]string) {
			f["mgmt/one/empty/README.md"] = "nothing here\n"
			f["mgmt/one/flux-ks.yaml"] = strings.Replace(f["mgmt/one/flux-ks.yaml"], "path: ./mgmt/one/cert-manager", "path: ./mgmt/one/empty", 1)
		}, "every Flux Kustomization path exists in the repository", "holds no kustomization and no YAML"},
		{"a Flux Kustomization that does not prune", func(f map[string]string) {
			f["mgmt/one/flux-ks.yaml"] = strings.Replace(f["mgmt/one/flux-ks.yaml"], "  prune: true\n  path: ./mgmt/one\n", "  prune: false\n  path: ./mgmt/one\n", 1)
		}, "every Flux Kustomization prunes and sets interval, retryInterval and timeout", "Kustomization flux-system/apps (in mgmt/one): prune is not true"},
		{"a rendered Flux Kustomization without retryInterval", func(f map[string]string) {
			f["mgmt/one/delivery.yaml"] = strings.Replace(f["mgmt/one/delivery.yaml"], "      retryInterval: 2m\n", "", 1)
		}, "every Flux Kustomization prunes and sets interval, retryInterval and timeout", "cert-manager-copy (in mgmt/one, ResourceSet flux-system/delivery input 0): sets no retryInterval"},
		{"a ResourceSet rendering a path that does not exist", func(f map[string]string) {
			f["mgmt/one/delivery.yaml"] = strings.Replace(f["mgmt/one/delivery.yaml"], "- component: cert-manager", "- component: cert-manager\n  - component: certmanager", 1)
		}, "every Flux Kustomization path exists in the repository", "Kustomization flux-system/certmanager-copy (in mgmt/one, ResourceSet flux-system/delivery input 1): spec.path ./mgmt/one/certmanager does not exist"},
		{"a ResourceSet template naming a missing input", func(f map[string]string) {
			f["mgmt/one/delivery.yaml"] = strings.Replace(f["mgmt/one/delivery.yaml"], "<< inputs.component >>-copy", "<< inputs.componnet >>-copy", 1)
		}, "every kustomization builds", `map has no entry for key "componnet"`},
		{"a provider at two versions across environments", func(f map[string]string) {
			f["mgmt/one/kustomization.yaml"] += "- core.yaml\n"
			f["mgmt/one/core.yaml"] = "apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: CoreProvider\nmetadata:\n  name: cluster-api\n  namespace: capi-system\nspec:\n  version: v1.14.2\n---\n" +
				"apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: CoreProvider\nmetadata:\n  name: cluster-api\n  namespace: other-system\nspec:\n  version: v1.14.1\n"
		}, "provider and chart versions agree across environments and with the CRDs checked against", "CoreProvider/cluster-api: deployed at different versions: v1.14.1 in CoreProvider other-system/cluster-api"},
		{"a provider newer than the CRDs checked against", func(f map[string]string) {
			f["mgmt/one/kustomization.yaml"] += "- core.yaml\n"
			f["mgmt/one/core.yaml"] = "apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: InfrastructureProvider\nmetadata:\n  name: aws\n  namespace: capa-system\nspec:\n  version: v2.14.0\n"
		}, "provider and chart versions agree across environments and with the CRDs checked against", "InfrastructureProvider/aws v2.14.0 is deployed, but its objects are checked against the CRDs of sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0"},
		{"a chart pin the CRDs do not cover", func(f map[string]string) {
			f["bootstrap.toml"] = strings.Replace(f["bootstrap.toml"], `cert-manager = "1.21.2"`, `cert-manager = "1.22.0"`, 1)
			f["mgmt/one/cert-manager/release.yaml"] = strings.Replace(f["mgmt/one/cert-manager/release.yaml"], `version: "1.21.2"`, `version: "1.22.0"`, 1)
		}, "provider and chart versions agree across environments and with the CRDs checked against", "[charts] cert-manager: pins 1.22.0, but objects are checked against the CRDs of github.com/cert-manager/cert-manager@v1.21.2"},
		{"an image missing from the inventory", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], "podinfo:6.15.0", "podinfo:6.16.0", 1)
		}, "every image is in airgap/images.txt with tag and digest", "ghcr.io/stefanprodan/podinfo:6.16.0 is not in airgap/images.txt"},
		{"an image inside a ClusterResourceSet payload", func(f map[string]string) {
			f["mgmt/one/kustomization.yaml"] += "configMapGenerator:\n- name: cni\n  files:\n  - cni.yaml\n"
			f["mgmt/one/cni.yaml"] = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: cni\n  namespace: kube-system\nspec:\n  template:\n    spec:\n      containers:\n      - name: cni\n        image: docker.io/kindest/kindnetd:v1\n"
		}, "every image is in airgap/images.txt with tag and digest", "docker.io/kindest/kindnetd:v1 is not in airgap/images.txt"},
		{"an image preloaded in an image that is not pinned", func(f map[string]string) {
			f["airgap/images.txt"] += "docker.io/kindest/kindnetd:v1 preloaded-in docker.io/kindest/node:v9@sha256:" + strings.Repeat("cd", 32) + "\n"
		}, "every image is in airgap/images.txt with tag and digest", "is not itself in the inventory with that digest"},
		{"an inventory line without digest", func(f map[string]string) {
			f["airgap/images.txt"] += "registry:2\n"
		}, "every image is in airgap/images.txt with tag and digest", `"registry:2" has no digest`},
		{"a deployed image that is only pending", func(f map[string]string) {
			f["airgap/images.txt"] = strings.Replace(f["airgap/images.txt"], "podinfo:6.15.0@sha256:"+strings.Repeat("ab", 32), "podinfo:6.15.0 pending", 1)
		}, "every image is in airgap/images.txt with tag and digest", "is pending in airgap/images.txt (line 2)"},
		{"a deployed image whose digest differs from the inventory", func(f map[string]string) {
			f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], "podinfo:6.15.0", "podinfo:6.15.0@sha256:"+strings.Repeat("ef", 32), 1)
		}, "every image is in airgap/images.txt with tag and digest", "does not carry the digest airgap/images.txt pins"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture()
			tc.break_(f)
			in := load(t, f)
			found := false
			for _, r := range Static(in) {
				if r.Check != tc.check {
					if !r.OK() {
						t.Errorf("unrelated check %q failed too: %+v", r.Check, r.Problems)
					}
					continue
				}
				found = true
				text := ""
				for _, p := range r.Problems {
					text += p.Where + ": " + p.Message + "\n"
				}
				if r.OK() || !strings.Contains(text, tc.want) {
					t.Errorf("%s: problems %q, want %q", tc.check, text, tc.want)
				}
			}
			if !found {
				t.Errorf("no check named %q", tc.check)
			}
		})
	}
}

// The schema check against a real API server with the pinned CRDs.
func TestSchemaAgainstARealAPIServer(t *testing.T) {
	testenv.Integration(t)
	assets := testenv.Testbin("KUBEBUILDER_ASSETS")
	if assets == "" {
		testenv.MissingTestbin(t, "kube-apiserver and etcd (KUBEBUILDER_ASSETS)", testenv.HowToGetAPIServer)
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets) // Schema starts its own API server from there
	in := load(t, fixture())
	r, err := Schema(context.Background(), in.Objects)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Errorf("the good fixture failed: %+v", r.Problems)
	}
	// HelmRelease is checked against the CRD generated from helm-controller's
	// API module, so every kind of the fixture has a schema.
	if len(r.Notes) != 0 {
		t.Errorf("notes %q", r.Notes)
	}

	f := fixture()
	f["mgmt/one/flux-ks.yaml"] = strings.Replace(f["mgmt/one/flux-ks.yaml"], "  interval: 5m\n  retryInterval", "  interval: 5\n  retryInterval", 1)
	f["mgmt/one/apps.yaml"] = strings.Replace(f["mgmt/one/apps.yaml"], "  namespace: default\n", "", 1)
	f["mgmt/one/cert-manager/release.yaml"] = strings.Replace(f["mgmt/one/cert-manager/release.yaml"], "        kind: HelmRepository\n        name: jetstack", "        kind: HelmRepo\n        name: jetstack", 1)
	in = load(t, f)
	r, err = Schema(context.Background(), in.Objects)
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, p := range r.Problems {
		text += p.Where + ": " + p.Message + "\n"
	}
	if !strings.Contains(text, "Kustomization flux-system/infrastructure") || !strings.Contains(text, "spec.interval") ||
		!strings.Contains(text, "Deployment podinfo") || !strings.Contains(text, "needs metadata.namespace") ||
		!strings.Contains(text, "HelmRelease cert-manager/cert-manager") || !strings.Contains(text, "spec.chart.spec.sourceRef.kind") {
		t.Errorf("schema problems:\n%s", text)
	}
}

// A template that uses one of the operator's helper functions cannot be
// rendered here: it is named, neither failed nor silently passed.
func TestResourceSetHelperFunctionsAreNamed(t *testing.T) {
	f := fixture()
	f["mgmt/one/delivery.yaml"] = strings.Replace(f["mgmt/one/delivery.yaml"], "<< inputs.component >>-copy", "<< inputs.component | slugify >>-copy", 1)
	in := load(t, f)
	r := checkBuild(in)
	if !r.OK() || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], `ResourceSet flux-system/delivery resource 0 not rendered`) || !strings.Contains(r.Notes[0], `"slugify" not defined`) {
		t.Fatalf("problems %+v, notes %q", r.Problems, r.Notes)
	}
}
