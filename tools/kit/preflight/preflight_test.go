package preflight

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

func TestParseRepoURL(t *testing.T) {
	for _, in := range []string{"https://github.com/kropsdev/krops", "https://github.com/kropsdev/krops/", "https://github.com/kropsdev/krops.git"} {
		if r, err := ParseRepoURL(in); err != nil || r.String() != "kropsdev/krops" {
			t.Errorf("%s: %v %v", in, r, err)
		}
	}
	for _, in := range []string{"git@github.com:kropsdev/krops.git", "https://gitlab.com/a/b", "https://github.com/a", "http://github.com/a/b"} {
		if _, err := ParseRepoURL(in); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

// The GitHub API is a loopback STAND-IN server answering as GitHub does.
func TestBranchAgainstAStandInGitHub(t *testing.T) {
	const token = "ghp_secret_value_never_shown"
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/repos/kropsdev/krops/branches/main":
			w.Write([]byte(`{"name": "main", "commit": {"sha": "0123456789abcdef0123456789abcdef01234567"}}`))
		case "/repos/kropsdev/krops/branches/slow":
			<-hang
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	defer close(hang) // first: srv.Close waits for the hung handler
	gh := GitHub{API: srv.URL, Timeout: time.Second}
	repo := Repo{"kropsdev", "krops"}
	ctx := context.Background()
	if sha, err := gh.Branch(ctx, repo, "main", token); err != nil || sha != "0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("200: %q %v", sha, err)
	}
	cases := []struct{ branch, token, want string }{
		{"gone", token, "has no branch gone in kropsdev/krops for this token (404)"},
		{"main", "wrong", "GitHub refused GITHUB_TOKEN (401)"},
		{"slow", token, "Client.Timeout exceeded"},
	}
	for _, tc := range cases {
		_, err := gh.Branch(ctx, repo, tc.branch, tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.branch, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "wrong")) {
			t.Errorf("a token value reached the error: %v", err)
		}
	}
}

func TestAgeKeyChecks(t *testing.T) {
	dir := t.TempDir()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	good := filepath.Join(dir, "age.agekey")
	os.WriteFile(good, []byte("# created: now\n# public key: "+id.Recipient().String()+"\n"+id.String()+"\n"), 0o600)
	k, err := CheckAgeKey(good, "")
	if err != nil || k.Public != id.Recipient().String() {
		t.Fatalf("good key: %v %v", k.Public, err)
	}
	if _, err := CheckAgeKey(good, id.Recipient().String()); err != nil {
		t.Errorf("matching AGE_PUBLIC_KEY: %v", err)
	}
	_, err = CheckAgeKey(good, other.Recipient().String())
	if err == nil || !strings.Contains(err.Error(), id.Recipient().String()) || !strings.Contains(err.Error(), other.Recipient().String()) {
		t.Errorf("a mismatch must name both public keys: %v", err)
	}
	open := filepath.Join(dir, "open.agekey")
	os.WriteFile(open, []byte(id.String()+"\n"), 0o644)
	if _, err := CheckAgeKey(open, ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key: %v", err)
	}
	junk := filepath.Join(dir, "junk.agekey")
	os.WriteFile(junk, []byte("AGE-SECRET-KEY-1NOTAKEY\n"), 0o600)
	if _, err := CheckAgeKey(junk, ""); err == nil || strings.Contains(err.Error(), "NOTAKEY") {
		t.Errorf("an unparseable key must be refused without quoting it: %v", err)
	}
	if _, err := CheckAgeKey(filepath.Join(dir, "missing"), ""); err == nil || !strings.Contains(err.Error(), "age-keygen") {
		t.Errorf("a missing key: %v", err)
	}
	if strings.Contains(func() string { _, e := CheckAgeKey(good, other.Recipient().String()); return e.Error() }(), id.String()) {
		t.Error("the secret key reached an error")
	}
}
