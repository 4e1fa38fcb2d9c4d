package zarfpkg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/imageinventory"
)

const (
	dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

const inventory = `ghcr.io/x/operator:v1@` + dA + `
ghcr.io/x/controller:v2 pending
docker.io/kindest/node:v1@` + dB + `
docker.io/kindest/kindnetd:v3 preloaded-in docker.io/kindest/node:v1@` + dB + `
`

const good = `kind: ZarfPackageConfig
metadata:
  name: demo
  version: 0.1.0
components:
- name: operator
  charts:
  - name: cert-manager
    version: v1.21.2
    valuesFiles: [values/cert-manager.yaml]
  images:
  - ghcr.io/x/operator:v1@` + dA + ` # pinned
  - ghcr.io/x/controller:v2
- name: providers
  manifests:
  - name: core
    files: [build/core.yaml]
  images:
  - docker.io/kindest/node:v1@` + dB + `
- name: config
  images:
  - localhost:5000/team/config:main
`

func setup(t *testing.T, pkg string, files map[string]string) (*Package, CheckOptions) {
	t.Helper()
	dir := t.TempDir()
	files["values/cert-manager.yaml"] = "crds: {enabled: true}\n"
	for p, body := range files {
		f := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var p Package
	if err := yaml.Unmarshal([]byte(pkg), &p); err != nil {
		t.Fatal(err)
	}
	inv, problems := imageinventory.Parse([]byte(inventory))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	return &p, CheckOptions{Dir: dir, Inventory: inv, ChartPins: map[string]string{"cert-manager": "1.21.2"}, Built: []string{"build"}, BuiltImages: []string{"localhost:5000/team/config", "ghcr.io/team/config"}}
}

func messages(fs []Finding, sev Severity) []string {
	var out []string
	for _, f := range fs {
		if f.Severity == sev {
			out = append(out, f.String())
		}
	}
	return out
}

func TestCheckConsistentPackageOnlyPending(t *testing.T) {
	p, o := setup(t, good, map[string]string{})
	fs := Check(p, o)
	if errs := messages(fs, Error); len(errs) > 0 {
		t.Fatalf("errors on a consistent package: %v", errs)
	}
	pending := strings.Join(messages(fs, Pending), "\n")
	for _, want := range []string{"ghcr.io/x/controller:v2 has no digest yet (airgap/images.txt line 2)", "build/core.yaml does not exist yet"} {
		if !strings.Contains(pending, want) {
			t.Errorf("pending findings lack %q:\n%s", want, pending)
		}
	}
}

func TestCheckFindsEachError(t *testing.T) {
	for name, tc := range map[string]struct {
		edit  func(string) string
		files map[string]string
		want  string
	}{
		"image not in inventory": {func(s string) string { return strings.Replace(s, "ghcr.io/x/controller:v2", "ghcr.io/x/other:v2", 1) }, nil, "ghcr.io/x/other:v2 is not in airgap/images.txt"},
		"pinned image listed by tag": {func(s string) string {
			return strings.Replace(s, "ghcr.io/x/operator:v1@"+dA, "ghcr.io/x/operator:v1", 1)
		}, nil, "must be pinned as ghcr.io/x/operator:v1@" + dA},
		"digest differs": {func(s string) string {
			return strings.Replace(s, "ghcr.io/x/operator:v1@"+dA, "ghcr.io/x/operator:v1@"+dB, 1)
		}, nil, "pinned to " + dB + " here but to " + dA},
		"digest while pending": {func(s string) string {
			return strings.Replace(s, "ghcr.io/x/controller:v2", "ghcr.io/x/controller:v2@"+dA, 1)
		}, nil, "line 2 is pending"},
		"preloaded image listed":   {func(s string) string { return s + "  - docker.io/kindest/kindnetd:v3\n" }, nil, "ships inside docker.io/kindest/node:v1"},
		"chart off its pin":        {func(s string) string { return strings.Replace(s, "v1.21.2", "v1.21.1", 1) }, nil, "chart cert-manager is at v1.21.1 but bootstrap.toml [charts] pins 1.21.2"},
		"missing values file":      {func(s string) string { return strings.Replace(s, "values/cert-manager.yaml", "values/none.yaml", 1) }, nil, "values file values/none.yaml does not exist"},
		"file outside the package": {func(s string) string { return strings.Replace(s, "values/cert-manager.yaml", "../secrets.yaml", 1) }, nil, "use a path inside"},
		"manifest fetched by URL": {func(s string) string {
			return strings.Replace(s, "build/core.yaml", "https://example.com/core.yaml", 1)
		}, nil, "fetched at build time"},
		"component twice": {func(s string) string { return s + "- name: operator\n" }, nil, "component operator: defined twice"},
		"built image off loopback": {func(s string) string {
			return strings.Replace(s, "localhost:5000/team/config", "ghcr.io/team/config", 1)
		}, nil, "must come from a loopback registry"},
		"wrong kind": {func(s string) string { return strings.Replace(s, "ZarfPackageConfig", "ZarfInitConfig", 1) }, nil, `kind is "ZarfInitConfig"`},
		"manifest runs an unlisted image": {func(s string) string { return s }, map[string]string{
			"build/core.yaml": "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: m\n        image: registry.k8s.io/capi/manager:v1.14.2\n",
		}, "build/core.yaml runs registry.k8s.io/capi/manager:v1.14.2, which no component of the package lists"},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range tc.files {
				files[k] = v
			}
			p, o := setup(t, tc.edit(good), files)
			errs := strings.Join(messages(Check(p, o), Error), "\n")
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("want an error containing %q, got:\n%s", tc.want, errs)
			}
		})
	}
}

func TestPinKeepsLayout(t *testing.T) {
	src := "images:\n  - ghcr.io/x/controller:v2 # why\n  - \"ghcr.io/x/quoted:v1\"\n  - ghcr.io/x/old:v1@" + dA + "\nfiles:\n  - ghcr.io/x/untouched:v9\n"
	got := string(Pin([]byte(src), map[string]string{
		"ghcr.io/x/controller:v2": "ghcr.io/x/controller:v2@" + dB,
		"ghcr.io/x/quoted:v1":     "ghcr.io/x/quoted:v1@" + dB,
		"ghcr.io/x/old:v1":        "ghcr.io/x/old:v1@" + dB,
	}))
	want := "images:\n  - ghcr.io/x/controller:v2@" + dB + " # why\n  - \"ghcr.io/x/quoted:v1@" + dB + "\"\n  - ghcr.io/x/old:v1@" + dB + "\nfiles:\n  - ghcr.io/x/untouched:v9\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
