package gitsource

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestAllOrNone(t *testing.T) {
	env := map[string]string{"KROPS_OCI_GIT_SHA": "abc", "KROPS_OCI_GIT_REF": "main"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if _, err := Read(context.Background(), t.TempDir(), lookup); err == nil || !strings.Contains(err.Error(), "set all three or none") {
		t.Errorf("two of three: %v", err)
	}
	env["KROPS_OCI_SOURCE_URL"] = "https://example.com/r"
	if s, err := Read(context.Background(), t.TempDir(), lookup); err != nil || s.SHA != "abc" || s.Ref != "main" {
		t.Errorf("all three: %+v %v", s, err)
	}
}

// A remote that carries a token keeps it out of the artifact.
func TestTheRemoteLosesItsCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"config", "user.email", "t@example.com"}, {"config", "user.name", "t"},
		{"commit", "-q", "--allow-empty", "-m", "x"}, {"remote", "add", "origin", "https://x-access-token:ghp_secret@github.com/kropsdev/krops.git"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	s, err := Read(context.Background(), dir, func(string) (string, bool) { return "", false })
	if err != nil || s.URL != "https://github.com/kropsdev/krops.git" || s.Ref != "main" || len(s.SHA) != 40 {
		t.Errorf("%+v %v", s, err)
	}
	if withoutCredentials("git@github.com:kropsdev/krops.git") != "git@github.com:kropsdev/krops.git" {
		t.Error("an scp-like remote changed")
	}
}

// The revision as git gives it in a real repository: the branch of a
// linked worktree, "detached", and the dirty marker for uncommitted and
// untracked changes.
func TestTheRevisionFromARealCheckout(t *testing.T) {
	repo, wt := t.TempDir(), filepath.Join(t.TempDir(), "wt")
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(repo, "init", "-q", "-b", "main")
	git(repo, "config", "user.email", "t@example.com")
	git(repo, "config", "user.name", "t")
	if err := os.WriteFile(filepath.Join(repo, "a.yaml"), []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(repo, "add", "a.yaml")
	git(repo, "commit", "-q", "-m", "one")
	head := git(repo, "rev-parse", "HEAD")
	none := func(string) (string, bool) { return "", false }
	read := func(dir string) Source {
		t.Helper()
		s, err := Read(context.Background(), dir, none)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := read(repo); s.Ref != "main" || s.SHA != head || s.URL != "file://"+repo {
		t.Errorf("clean checkout: %+v", s)
	}

	git(repo, "worktree", "add", "-q", "-b", "feature", wt)
	if err := os.WriteFile(filepath.Join(wt, "a.yaml"), []byte("a: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(wt, "commit", "-q", "-am", "two")
	if s := read(wt); s.Ref != "feature" || s.SHA != git(wt, "rev-parse", "HEAD") || s.SHA == head {
		t.Errorf("linked worktree: %+v", s)
	}
	if s := read(repo); s.Ref != "main" || s.SHA != head {
		t.Errorf("the main checkout after the worktree's commit: %+v", s)
	}

	if err := os.WriteFile(filepath.Join(wt, "a.yaml"), []byte("a: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := read(wt); s.Ref != "feature-dirty" {
		t.Errorf("a modified file: %+v", s)
	}
	git(wt, "checkout", "-q", "a.yaml")
	if err := os.WriteFile(filepath.Join(wt, "new.yaml"), []byte("b: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := read(wt); s.Ref != "feature-dirty" {
		t.Errorf("an untracked file: %+v", s)
	}
	if err := os.Remove(filepath.Join(wt, "new.yaml")); err != nil {
		t.Fatal(err)
	}
	git(wt, "checkout", "-q", "--detach")
	if s := read(wt); s.Ref != "detached" {
		t.Errorf("detached HEAD: %+v", s)
	}
	if _, err := Read(context.Background(), t.TempDir(), none); err == nil || !strings.Contains(err.Error(), "KROPS_OCI_GIT_SHA") {
		t.Errorf("outside a repository: %v", err)
	}
}
