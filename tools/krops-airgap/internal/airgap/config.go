package airgap

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kropsdev/krops/tools/kit/configartifact"
	"github.com/kropsdev/krops/tools/kit/fluxbuild"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// ConfigOptions says what goes into the config artifact and where it goes.
type ConfigOptions struct {
	// Root is the repository root.
	Root string
	// Paths are packed (repository-relative).
	Paths []string
	// SyncPath is the path the FluxInstance syncs; it and every path the
	// Flux Kustomizations under it name must build from the artifact alone.
	SyncPath string
	// Ref is where to push (registry/repository:tag); empty builds and
	// checks only.
	Ref              string
	Source, Revision string
	Insecure         bool
	Transport        http.RoundTripper
	Out              io.Writer
	// Printer receives the result lines; nil means plain lines on Out.
	Printer *ui.Progress
}

// Config builds the config artifact, proves it self-contained, and pushes
// it. Nothing is pushed when the check fails.
func Config(ctx context.Context, o ConfigOptions) error {
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: o.Root, Paths: o.Paths, Source: o.Source, Revision: o.Revision})
	if err != nil {
		return err
	}
	fs, err := memoryTree(a)
	if err != nil {
		return err
	}
	built, err := buildClosure(fs, o.SyncPath)
	if err != nil {
		return fmt.Errorf("config artifact is not self-contained (packed: %s): %w; add the missing directory to the packed paths", strings.Join(o.Paths, ", "), err)
	}
	o.printer().Successf("config artifact %s: %d files; %s and the %d paths it names build from the artifact alone", a.Digest, a.Files, o.SyncPath, len(built)-1)
	if o.Ref == "" {
		return nil
	}
	pinned, err := configartifact.Push(ctx, a, o.Ref, configartifact.PushOptions{Insecure: o.Insecure, Transport: o.Transport})
	if err != nil {
		return err
	}
	o.printer().Successf("pushed %s (%s)", o.Ref, pinned)
	return nil
}

// memoryTree unpacks the artifact's layer into an in-memory file system, so
// the build below can only see what Flux will see.
func memoryTree(a *configartifact.Artifact) (filesys.FileSystem, error) {
	layers, err := a.Image.Layers()
	if err != nil || len(layers) != 1 {
		return nil, fmt.Errorf("config artifact: want one layer (%v)", err)
	}
	// Read the compressed blob and gunzip it here: a static layer does not
	// know its own compression, and this is the byte stream Flux receives.
	rc, err := layers[0].Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		return nil, fmt.Errorf("config artifact layer: %w", err)
	}
	fs := filesys.MakeFsInMemory()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("config artifact: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if err := fs.WriteFile("/"+h.Name, b); err != nil {
			return nil, err
		}
	}
}

// buildClosure builds dir and, recursively, the path of every Flux
// Kustomization it renders that reads the same source, the way Flux's
// kustomize-controller would (files outside a kustomization's directory are
// allowed within the artifact). It returns the paths built.
func buildClosure(fs filesys.FileSystem, dir string) ([]string, error) {
	k := fluxbuild.Kustomizer()
	done := map[string]bool{}
	queue := []string{path.Clean("/" + dir)}
	var order []string
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if done[d] {
			continue
		}
		done[d] = true
		order = append(order, strings.TrimPrefix(d, "/"))
		res, err := k.Run(fs, d)
		if err != nil {
			return order, fmt.Errorf("%s: %w", strings.TrimPrefix(d, "/"), err)
		}
		for _, r := range res.Resources() {
			if r.GetKind() != "Kustomization" || !strings.HasPrefix(r.GetApiVersion(), "kustomize.toolkit.fluxcd.io/") {
				continue
			}
			m, err := r.Map()
			if err != nil {
				return order, err
			}
			spec, _ := m["spec"].(map[string]any)
			src, _ := spec["sourceRef"].(map[string]any)
			if _, remote := spec["kubeConfig"]; remote || src["name"] != "flux-system" {
				continue
			}
			p, _ := spec["path"].(string)
			queue = append(queue, path.Clean("/"+p))
		}
	}
	return order, nil
}
func (o ConfigOptions) printer() *ui.Progress { return printerOf(o.Printer, o.Out) }
