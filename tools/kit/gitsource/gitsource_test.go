package gitsource

import (
	"context"
	"os/exec"
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
