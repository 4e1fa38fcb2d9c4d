// Package preflight checks what seeding Flux needs before anything changes:
// the GitHub repository, branch and token (sync = github), and the age key
// that decrypts the repository's SOPS secrets. Every problem is reported
// together, and no secret value appears in any message.
package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/kropsdev/krops/tools/kit/budget"
)

// DefaultGitHubAPI is GitHub's REST API; GITHUB_API_URL overrides it (GitHub
// Enterprise, and the tests' loopback server).
const DefaultGitHubAPI = "https://api.github.com"

// Repo is a GitHub repository.
type Repo struct{ Owner, Name string }

func (r Repo) String() string { return r.Owner + "/" + r.Name }

var repoURL = regexp.MustCompile(`^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(\.git)?/?$`)

// ParseRepoURL accepts https://github.com/<owner>/<repo>, with a trailing
// slash or .git.
func ParseRepoURL(s string) (Repo, error) {
	m := repoURL.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Repo{}, fmt.Errorf("GIT_REPO_URL=%q is not https://github.com/<owner>/<repo>", s)
	}
	return Repo{Owner: m[1], Name: m[2]}, nil
}

// GitHub checks a branch over GitHub's API.
type GitHub struct {
	API string
	// ConnectTimeout and Timeout bound a request (defaults 10 s and 30 s).
	ConnectTimeout, Timeout time.Duration
}

func (g GitHub) client() *http.Client {
	connect, total := g.ConnectTimeout, g.Timeout
	if connect == 0 {
		connect = budget.GitHubConnect
	}
	if total == 0 {
		total = budget.GitHubCall
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: connect}).DialContext
	return &http.Client{Transport: tr, Timeout: total}
}

// Branch returns the commit SHA the branch points at, seen with token.
func (g GitHub) Branch(ctx context.Context, repo Repo, branch, token string) (string, error) {
	api := strings.TrimRight(g.API, "/")
	if api == "" {
		api = DefaultGitHubAPI
	}
	u := fmt.Sprintf("%s/repos/%s/%s/branches/%s", api, url.PathEscape(repo.Owner), url.PathEscape(repo.Name), url.PathEscape(branch))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := g.client().Do(req)
	if err != nil {
		// The URL holds no secret; the error never carries the header.
		return "", fmt.Errorf("asking GitHub for branch %s of %s: %w", branch, repo, stripURL(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		var b struct {
			Commit struct {
				SHA string `json:"sha"`
			} `json:"commit"`
		}
		if err := json.Unmarshal(body, &b); err != nil || b.Commit.SHA == "" {
			return "", fmt.Errorf("GitHub's answer for branch %s of %s is unreadable", branch, repo)
		}
		return b.Commit.SHA, nil
	case http.StatusUnauthorized:
		return "", fmt.Errorf("GitHub refused GITHUB_TOKEN (401): it is invalid or expired; create a new token with read access to %s", repo)
	case http.StatusNotFound:
		return "", fmt.Errorf("GitHub has no branch %s in %s for this token (404): check bootstrap.git-branch, GIT_REPO_URL, and that GITHUB_TOKEN can read the repository", branch, repo)
	case http.StatusForbidden:
		return "", fmt.Errorf("GitHub forbade reading %s (403): the token lacks access, or the API rate limit is spent", repo)
	}
	return "", fmt.Errorf("GitHub answered %s for branch %s of %s", resp.Status, branch, repo)
}

func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// AgeKey is a checked age identity.
type AgeKey struct {
	// Identity is the file's content, for the sops-age Secret.
	Identity []byte
	// Public is its recipient (age1...).
	Public string
}

// CheckAgeKey reads path: it must exist, not be readable by group or
// others, hold exactly one X25519 age identity, and match wantPublic when
// that is set.
func CheckAgeKey(path, wantPublic string) (AgeKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return AgeKey{}, fmt.Errorf("age key file %s: %w (set AGE_KEY_FILE, or create one with age-keygen -o %s)", path, errors.Unwrap(err), path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return AgeKey{}, fmt.Errorf("age key file %s is readable by group or others (mode %04o): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return AgeKey{}, fmt.Errorf("age key file %s: %w", path, err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(raw))
	if err != nil {
		// The parser's message may quote the file; keep only our words.
		return AgeKey{}, fmt.Errorf("age key file %s does not hold an age identity (AGE-SECRET-KEY-1...)", path)
	}
	if len(ids) != 1 {
		return AgeKey{}, fmt.Errorf("age key file %s holds %d identities: keep exactly one", path, len(ids))
	}
	x, ok := ids[0].(*age.X25519Identity)
	if !ok {
		return AgeKey{}, fmt.Errorf("age key file %s holds a %T identity: SOPS and Flux need an X25519 key (age-keygen)", path, ids[0])
	}
	pub := x.Recipient().String()
	if wantPublic != "" && wantPublic != pub {
		return AgeKey{}, fmt.Errorf("age key file %s is for public key %s, but AGE_PUBLIC_KEY is %s: point AGE_KEY_FILE at the key .sops.yaml encrypts for", path, pub, wantPublic)
	}
	return AgeKey{Identity: raw, Public: pub}, nil
}
