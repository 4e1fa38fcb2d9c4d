package publish

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kropsdev/krops/tools/kit/gitsource"
	"github.com/kropsdev/krops/tools/testenv"
)

func TestPublishPacksOnlyTheSyncedTreesReproducibly(t *testing.T) {
	reg := testenv.Registry(t)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Root: root, Environment: "local-host", SyncPath: "mgmt/local-host", Ref: reg.Host + "/krops:latest", Insecure: true,
		Source: gitsource.Source{URL: "https://github.com/kropsdev/krops", Ref: "main", SHA: "0123456789abcdef0123456789abcdef01234567"}}
	ctx := context.Background()
	pinned, a, err := Publish(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	// Pulled back from the registry: exactly the synced trees.
	ref, err := name.ParseReference(pinned, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	seen := map[string]bool{}
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		files++
		top := strings.Join(strings.SplitN(h.Name, "/", 3)[:2], "/")
		seen[top] = true
		switch top {
		case "mgmt/local-host", "workload/local-host", "mgmt/shared", "workload/shared":
		default:
			t.Errorf("%s is not a synced path", h.Name)
		}
	}
	if files != a.Files || !seen["mgmt/local-host"] || !seen["workload/local-host"] {
		t.Errorf("%d files pulled (%d packed), trees %v", files, a.Files, seen)
	}
	manifest, _ := img.Manifest()
	if manifest.Annotations["org.opencontainers.image.revision"] != "main@sha1:0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("revision annotation: %v", manifest.Annotations)
	}
	// The same content again: the same digest.
	again, _, err := Publish(ctx, o)
	if err != nil || again != pinned {
		t.Errorf("republish: %s, want %s (%v)", again, pinned, err)
	}
}
