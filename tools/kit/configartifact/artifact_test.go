package configartifact_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fluxoci "github.com/fluxcd/pkg/oci"

	"github.com/kropsdev/krops/tools/kit/configartifact"
	"github.com/kropsdev/krops/tools/testenv"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var tree = map[string]string{
	"mgmt/local-host/kustomization.yaml": "resources: [a.yaml]\n",
	"mgmt/local-host/a.yaml":             "kind: ConfigMap\n",
	"mgmt/local-host/.env":               "SECRET=1\n",
	"mgmt/local-host/.git/config":        "[core]\n",
	"workload/local-host/b.yaml":         "kind: Namespace\n",
	"mgmt/aws/c.yaml":                    "not packed\n",
}

// The artifact is pushed to a real registry on loopback and pulled back with
// Flux's own OCI client (github.com/fluxcd/pkg/oci, the code source-controller
// uses), so the media types, annotations and tar layout are what Flux reads.
func TestPushedArtifactIsWhatFluxPulls(t *testing.T) {
	ctx := context.Background()
	root := writeTree(t, tree)
	reg := testenv.Registry(t)
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{
		Root: root, Paths: []string{"mgmt/local-host", "workload/local-host"},
		Source: "https://github.com/kropsdev/krops", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567",
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Files != 3 {
		t.Fatalf("packed %d files, want 3 (dot-files and other paths left out)", a.Files)
	}
	ref := reg.Host + "/krops:latest"
	pinned, err := configartifact.Push(ctx, a, ref, configartifact.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pinned != reg.Host+"/krops@"+a.Digest {
		t.Fatalf("Push returned %q", pinned)
	}

	out := t.TempDir()
	meta, err := fluxoci.NewClient(nil).Pull(ctx, ref, out)
	if err != nil {
		t.Fatalf("Flux's client could not pull the artifact: %v", err)
	}
	if meta.Revision != "main@sha1:0123456789abcdef0123456789abcdef01234567" || meta.Source != "https://github.com/kropsdev/krops" || !strings.HasSuffix(meta.Digest, a.Digest) {
		t.Fatalf("Flux read metadata %+v", meta)
	}
	for _, p := range []string{"mgmt/local-host/kustomization.yaml", "mgmt/local-host/a.yaml", "workload/local-host/b.yaml"} {
		got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(p)))
		if err != nil || string(got) != tree[p] {
			t.Errorf("%s after Flux's pull: %q, %v", p, got, err)
		}
	}
	for _, p := range []string{"mgmt/local-host/.env", "mgmt/local-host/.git/config", "mgmt/aws/c.yaml"} {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(p))); err == nil {
			t.Errorf("%s should not be in the artifact", p)
		}
	}

	m := reg.Manifest(t, ref)
	if m.Config.MediaType != configartifact.ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != configartifact.ContentMediaType {
		t.Fatalf("manifest media types: config %s, layers %+v", m.Config.MediaType, m.Layers)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	ctx := context.Background()
	root := writeTree(t, tree)
	opts := configartifact.BuildOptions{Root: root, Paths: []string{"workload/local-host", "mgmt/local-host"}}
	first, err := configartifact.Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Touch every file and reorder the paths: neither changes the digest.
	later := time.Now().Add(time.Hour)
	_ = filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, later, later) })
	opts.Paths = []string{"mgmt/local-host", "workload/local-host", "mgmt/local-host/a.yaml"}
	second, err := configartifact.Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != second.Digest {
		t.Fatalf("digest changed with mtimes and path order: %s then %s", first.Digest, second.Digest)
	}
	if err := os.WriteFile(filepath.Join(root, "mgmt/local-host/a.yaml"), []byte("kind: Secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := configartifact.Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if third.Digest == second.Digest {
		t.Fatal("a changed file did not change the digest")
	}
}

func TestBuildRefuses(t *testing.T) {
	ctx := context.Background()
	root := writeTree(t, tree)
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "mgmt/local-host/passwd.yaml")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		paths []string
		want  string
	}{
		"a symbolic link":       {[]string{"mgmt/local-host"}, "passwd.yaml is a symbolic link"},
		"a path outside root":   {[]string{"../elsewhere"}, "outside the repository root"},
		"a path that is absent": {[]string{"mgmt/nowhere"}, "config artifact path mgmt/nowhere"},
		"nothing":               {nil, "no paths"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: root, Paths: tc.paths})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// A registry that accepts connections and never answers ends the push within
// its timeout, and the error names the registry: the seed and the pivot push
// on every run and must not hang there.
func TestPushToASilentRegistryIsBounded(t *testing.T) {
	ctx := context.Background()
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: writeTree(t, tree), Paths: []string{"mgmt/local-host"}})
	if err != nil {
		t.Fatal(err)
	}
	host := testenv.SilentEndpoint(t)
	start := time.Now()
	_, err = configartifact.Push(ctx, a, host+"/krops:latest", configartifact.PushOptions{Timeout: 3 * time.Second})
	took := time.Since(start)
	if err == nil {
		t.Fatal("a push to a registry that never answers succeeded")
	}
	if took > 20*time.Second {
		t.Errorf("the push took %v with a 3 s timeout", took)
	}
	if !strings.Contains(err.Error(), "the registry "+host+" did not answer within 3s") || !strings.Contains(err.Error(), "REGISTRY_PORT") {
		t.Errorf("the error must name the registry and what to check: %v", err)
	}
}
