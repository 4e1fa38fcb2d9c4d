package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kropsdev/krops/tools/testenv"
)

var bootstrapTOML = testenv.BootstrapTOML(testenv.Env{Name: "demo", Provider: "docker",
	Tables: "[environments.demo.teardown]\ncapi-workloads = [\"demo-workload\"]"})

// fixture is a repository with an air-gap directory whose images live in a
// real OCI registry on loopback.
type fixture struct {
	dir, bin string
	reg      *testenv.OCIRegistry
	digests  map[string]string
}

func push(t *testing.T, image string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), bin: testenv.BuildBinary(t, ".", "krops-airgap"), reg: testenv.Registry(t), digests: map[string]string{}}
	h := f.reg.Host
	for _, img := range []string{h + "/jetstack/controller:v1.21.2", h + "/fluxcd/source:v1.9.4", h + "/capi/manager:v1.14.2"} {
		f.digests[img] = push(t, img)
	}
	files := map[string]string{
		"bootstrap.toml": bootstrapTOML,
		"airgap/images.txt": "# inventory\n" +
			h + "/jetstack/controller:v1.21.2 pending # cert-manager\n" +
			h + "/fluxcd/source:v1.9.4@" + f.digests[h+"/fluxcd/source:v1.9.4"] + "\n" +
			h + "/capi/manager:v1.14.2 pending\n",
		"airgap/zarf.yaml": `kind: ZarfPackageConfig
metadata:
  name: demo
  version: 0.1.0
components:
- name: cert-manager
  charts:
  - name: cert-manager
    version: v1.21.2
  images:
  - ` + h + `/jetstack/controller:v1.21.2
- name: capi
  manifests:
  - name: core
    files: [build/core.yaml]
  images:
  - ` + h + `/capi/manager:v1.14.2 # the core controller
  - ` + h + `/fluxcd/source:v1.9.4@` + f.digests[h+"/fluxcd/source:v1.9.4"] + `
- name: krops-config
  images:
  - localhost:5000/kropsdev/krops-config:local-host
`,
		"airgap/config/kustomization.yaml":  "resources:\n- ../../mgmt/demo/flux-ks.yaml\n",
		"mgmt/demo/flux-ks.yaml":            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./mgmt/demo/apps\n  sourceRef:\n    kind: OCIRepository\n    name: flux-system\n",
		"mgmt/demo/apps/kustomization.yaml": "resources:\n- cm.yaml\n",
		"mgmt/demo/apps/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		"airgap/build/.keep":                "",
		"airgap/values/cert-manager.yaml":   "crds: {enabled: true}\n",
	}
	for p, body := range files {
		full := filepath.Join(f.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) run(t *testing.T, args ...string) testenv.Result {
	t.Helper()
	return testenv.RunBinary(t, f.dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.dir, "DOCKER_CONFIG=" + filepath.Join(f.dir, ".docker")}, f.bin, args...)
}

func (f *fixture) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantOutput(t *testing.T, r testenv.Result, code int, parts ...string) {
	t.Helper()
	all := r.Stdout + r.Stderr
	if r.Code != code {
		t.Fatalf("exit %d, want %d\n%s", r.Code, code, all)
	}
	for _, p := range parts {
		if !strings.Contains(all, p) {
			t.Errorf("output lacks %q:\n%s", p, all)
		}
	}
}

func TestCheckPendingThenPinThenRelease(t *testing.T) {
	f := newFixture(t)
	h := f.reg.Host
	ctrl, mgr := h+"/jetstack/controller:v1.21.2", h+"/capi/manager:v1.14.2"

	wantOutput(t, f.run(t, "check"), 0, "… component cert-manager: image "+ctrl+" has no digest yet (airgap/images.txt line 2)",
		"build/core.yaml does not exist yet", "is consistent; 3 items wait")
	wantOutput(t, f.run(t, "check", "--release"), 1, "✘ component cert-manager: image "+ctrl+" has no digest yet", "3 problems")

	before := f.read(t, "airgap/images.txt")
	wantOutput(t, f.run(t, "pin", "--dry-run"), 0, "✔ "+ctrl+" pinned to "+f.digests[ctrl], "would pin (dry run, nothing written) 2 of 2")
	if f.read(t, "airgap/images.txt") != before {
		t.Fatal("--dry-run wrote images.txt")
	}

	wantOutput(t, f.run(t, "pin"), 0, "✔ "+mgr+" pinned to "+f.digests[mgr], "pinned 2 of 2 entries; 0 still pending")
	inv := f.read(t, "airgap/images.txt")
	for _, want := range []string{ctrl + "@" + f.digests[ctrl] + " # cert-manager\n", mgr + "@" + f.digests[mgr] + "\n", "# inventory\n"} {
		if !strings.Contains(inv, want) {
			t.Errorf("images.txt lacks %q:\n%s", want, inv)
		}
	}
	pkg := f.read(t, "airgap/zarf.yaml")
	for _, want := range []string{"  - " + ctrl + "@" + f.digests[ctrl] + "\n", "  - " + mgr + "@" + f.digests[mgr] + " # the core controller\n", "localhost:5000/kropsdev/krops-config:local-host\n"} {
		if !strings.Contains(pkg, want) {
			t.Errorf("zarf.yaml lacks %q:\n%s", want, pkg)
		}
	}

	// Only the rendered manifest is missing now; once it exists (and runs
	// only listed images), the package is ready.
	wantOutput(t, f.run(t, "check", "--release"), 1, "build/core.yaml does not exist yet", "1 problem")
	manifest := "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: " + mgr + "\n"
	if err := os.WriteFile(filepath.Join(f.dir, "airgap/build/core.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, f.run(t, "check", "--release"), 0, "✔ demo 0.1.0 is ready to build: 4 images, all pinned")
	if err := os.WriteFile(filepath.Join(f.dir, "airgap/build/core.yaml"), []byte(manifest+"      - name: extra\n        image: "+h+"/other:v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, f.run(t, "check", "--release"), 1, "build/core.yaml runs "+h+"/other:v1, which no component of the package lists")

	wantOutput(t, f.run(t, "pin"), 0, "pinned 0 of 0 entries")
}

func TestPinRefreshAndFailures(t *testing.T) {
	f := newFixture(t)
	h := f.reg.Host
	src := h + "/fluxcd/source:v1.9.4"
	old := f.digests[src]
	moved := push(t, src) // the tag now points at another image

	// Without --refresh a pinned digest is never touched.
	wantOutput(t, f.run(t, "pin"), 0, "pinned 2 of 2")
	if !strings.Contains(f.read(t, "airgap/images.txt"), src+"@"+old) {
		t.Fatal("pin without --refresh changed a pinned digest")
	}
	wantOutput(t, f.run(t, "pin", "--refresh"), 0, "! "+src+" moved from "+old+" to "+moved, "= "+h+"/capi/manager:v1.14.2 unchanged")
	if !strings.Contains(f.read(t, "airgap/images.txt"), src+"@"+moved) || !strings.Contains(f.read(t, "airgap/zarf.yaml"), src+"@"+moved) {
		t.Fatal("--refresh did not re-pin the moved tag in both files")
	}

	// An image the registry does not have fails by name; the others are
	// still written.
	inv := f.read(t, "airgap/images.txt") + h + "/missing/image:v0 pending\n" + h + "/later/image:v1 pending\n"
	if err := os.WriteFile(filepath.Join(f.dir, "airgap/images.txt"), []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	later := push(t, h+"/later/image:v1")
	wantOutput(t, f.run(t, "pin"), 1, "✘ "+h+"/missing/image:v0", "1 images could not be resolved", "(images.txt line 5)", "1 still pending")
	if got := f.read(t, "airgap/images.txt"); !strings.Contains(got, h+"/later/image:v1@"+later) || !strings.Contains(got, h+"/missing/image:v0 pending") {
		t.Fatalf("partial pin not written as expected:\n%s", got)
	}
}

func TestCheckRefusesBrokenInput(t *testing.T) {
	f := newFixture(t)
	pkg := strings.Replace(f.read(t, "airgap/zarf.yaml"), "version: v1.21.2", "version: v1.20.0", 1)
	if err := os.WriteFile(filepath.Join(f.dir, "airgap/zarf.yaml"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, f.run(t, "check"), 1, "chart cert-manager is at v1.20.0 but bootstrap.toml [charts] pins 1.21.2")

	if err := os.WriteFile(filepath.Join(f.dir, "airgap/images.txt"), []byte("ghcr.io/x/y:v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOutput(t, f.run(t, "check"), 1, `image inventory`, `"ghcr.io/x/y:v1" has no digest`)
	wantOutput(t, f.run(t, "pin"), 1, `"ghcr.io/x/y:v1" has no digest`)
}

func TestConfigArtifactPushedOnlyWhenSelfContained(t *testing.T) {
	f := newFixture(t)
	ref := f.reg.Host + "/kropsdev/krops-config:local-host"

	// mgmt/demo/apps is named by a Flux Kustomization but not packed.
	r := f.run(t, "config", "--push", "--path", "airgap/config", "--path", "mgmt/demo/flux-ks.yaml", ref)
	wantOutput(t, r, 1, "config artifact is not self-contained", "mgmt/demo/apps")
	if f.reg.Has(t, ref) {
		t.Fatal("an artifact that failed the check was pushed")
	}

	wantOutput(t, f.run(t, "config", "--path", "airgap/config", "--path", "mgmt/demo"), 0, "airgap/config and the 1 paths it names build from the artifact alone")
	if f.reg.Has(t, ref) {
		t.Fatal("config without --push pushed")
	}
	wantOutput(t, f.run(t, "config", "--push", "--path", "airgap/config", "--path", "mgmt/demo", "--revision", "main@sha1:abc", ref), 0, "✔ pushed "+ref)
	if m := f.reg.Manifest(t, ref); m.Annotations["org.opencontainers.image.revision"] != "main@sha1:abc" {
		t.Fatalf("annotations %v", m.Annotations)
	}
	wantOutput(t, f.run(t, "config", "somewhere"), 2, "without --push")
}
