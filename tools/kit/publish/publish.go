// Package publish packs the trees an environment syncs into a Flux config
// artifact and pushes it to the local registry (sync = oci). The same
// content always gives the same digest.
package publish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/kropsdev/krops/tools/kit/configartifact"
	"github.com/kropsdev/krops/tools/kit/gitsource"
)

// Options describe one publication.
type Options struct {
	Root        string
	Environment string
	// SyncPath is the environment's sync-path (mgmt/<env>).
	SyncPath string
	// Ref is registry/repository:tag.
	Ref       string
	Insecure  bool
	Source    gitsource.Source
	Transport http.RoundTripper
}

// Paths are the directories packed: the management tree the environment
// syncs, its workload tree, and the shared trees both reference. Nothing
// else of the repository goes in.
func Paths(root, syncPath, environment string) ([]string, error) {
	var out []string
	for _, p := range []string{syncPath, "workload/" + environment, "mgmt/shared", "workload/shared"} {
		fi, err := os.Stat(filepath.Join(root, p))
		switch {
		case err == nil && fi.IsDir():
			out = append(out, p)
		case p == syncPath:
			return nil, fmt.Errorf("sync-path %s is not a directory under %s", p, root)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	return out, nil
}

// Publish builds and pushes the artifact and returns the pinned reference.
func Publish(ctx context.Context, o Options) (string, *configartifact.Artifact, error) {
	paths, err := Paths(o.Root, o.SyncPath, o.Environment)
	if err != nil {
		return "", nil, err
	}
	a, err := configartifact.Build(ctx, configartifact.BuildOptions{Root: o.Root, Paths: paths, Source: o.Source.URL, Revision: o.Source.Ref + "@sha1:" + o.Source.SHA})
	if err != nil {
		return "", nil, err
	}
	pinned, err := configartifact.Push(ctx, a, o.Ref, configartifact.PushOptions{Insecure: o.Insecure, Transport: o.Transport})
	if err != nil {
		return "", nil, err
	}
	return pinned, a, nil
}
