// Package gitsource says where a config artifact came from: the
// repository URL, branch and commit, from KROPS_OCI_GIT_SHA, _REF and
// KROPS_OCI_SOURCE_URL or from git. The toolbox reads it on the host, where
// git sees the checkout as the user's (a container's git refuses another
// user's checkout, and cannot follow a linked worktree's .git pointer).
package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
)

// Source is where the artifact says it came from.
type Source struct {
	// URL, Ref and SHA give the revision <Ref>@sha1:<SHA>.
	URL, Ref, SHA string
}

// DirtySuffix ends the ref of a checkout with uncommitted changes.
const DirtySuffix = "-dirty"

// Read reads the source from KROPS_OCI_GIT_SHA/REF/SOURCE_URL
// (all three or none), else from git in root: the branch ("detached" for a
// detached HEAD, DirtySuffix added for uncommitted changes), the commit,
// and origin's URL (file://<root> without an origin). A linked worktree is
// read like any checkout.
func Read(ctx context.Context, root string, lookup func(string) (string, bool)) (Source, error) {
	sha, hasSHA := lookup("KROPS_OCI_GIT_SHA")
	ref, hasRef := lookup("KROPS_OCI_GIT_REF")
	source, hasURL := lookup("KROPS_OCI_SOURCE_URL")
	set := 0
	for _, b := range []bool{hasSHA, hasRef, hasURL} {
		if b {
			set++
		}
	}
	switch set {
	case 3:
		return Source{URL: source, Ref: ref, SHA: sha}, nil
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
	if s.Ref == "HEAD" {
		s.Ref = "detached"
	}
	// Uncommitted changes (untracked files too: they are packed) make the
	// artifact something no commit holds; the revision says so, so Flux's
	// status does not claim the commit.
	status, err := git("status", "--porcelain")
	if err != nil {
		return Source{}, fmt.Errorf("reading the working tree's state with git in %s: %w", root, err)
	}
	if status != "" {
		s.Ref += DirtySuffix
	}
	if s.URL, err = git("remote", "get-url", "origin"); err != nil || s.URL == "" {
		s.URL = "file://" + root
	}
	s.URL = withoutCredentials(s.URL)
	return s, nil
}

// withoutCredentials drops the user information of an https remote
// (https://user:token@host/...): the URL goes into the artifact's
// annotations, which anyone who can pull the artifact reads.
func withoutCredentials(remote string) string {
	u, err := url.Parse(remote)
	if err != nil || u.User == nil || (u.Scheme != "https" && u.Scheme != "http") {
		return remote
	}
	u.User = nil
	return u.String()
}
