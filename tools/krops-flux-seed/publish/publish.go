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
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kropsdev/krops/tools/kit/configartifact"
)

// Source is where the artifact says it came from.
type Source struct {
	// URL, Ref and SHA give the revision <Ref>@sha1:<SHA>.
	URL, Ref, SHA string
}

// Options describe one publication.
type Options struct {
	Root        string
	Environment string
	// SyncPath is the environment's sync-path (mgmt/<env>).
	SyncPath string
	// Ref is registry/repository:tag.
	Ref       string
	Insecure  bool
	Source    Source
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

// GitSource reads the artifact's source from KROPS_OCI_GIT_SHA/REF/SOURCE_URL
// (all three or none), else from git in root; a repository without an origin
// is file://<root>.
func GitSource(ctx context.Context, root string, lookup func(string) (string, bool)) (Source, error) {
	sha, hasSHA := lookup("KROPS_OCI_GIT_SHA")
	ref, hasRef := lookup("KROPS_OCI_GIT_REF")
	url, hasURL := lookup("KROPS_OCI_SOURCE_URL")
	set := 0
	for _, b := range []bool{hasSHA, hasRef, hasURL} {
		if b {
			set++
		}
	}
	switch set {
	case 3:
		return Source{URL: url, Ref: ref, SHA: sha}, nil
	case 0:
	default:
		return Source{}, errors.New("KROPS_OCI_GIT_SHA, KROPS_OCI_GIT_REF and KROPS_OCI_SOURCE_URL go together: set all three or none")
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...)
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	s := Source{}
	var err error
	if s.SHA, err = git("rev-parse", "HEAD"); err != nil {
		return Source{}, fmt.Errorf("reading the revision with git in %s: %w (or set KROPS_OCI_GIT_SHA, _REF and KROPS_OCI_SOURCE_URL)", root, err)
	}
	if s.Ref, err = git("rev-parse", "--abbrev-ref", "HEAD"); err != nil {
		return Source{}, fmt.Errorf("reading the branch with git in %s: %w", root, err)
	}
	if s.URL, err = git("remote", "get-url", "origin"); err != nil || s.URL == "" {
		s.URL = "file://" + root
	}
	return s, nil
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
