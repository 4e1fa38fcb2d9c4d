// Package kindstandin is bootcluster.Kind over HTTP, for the end-to-end
// test only: a STAND-IN for kind where no container engine runs. The test
// harness serves the clusters (each a real kube-apiserver with the
// controllers kind's nodes would run); binaries built with the
// krops_standin_kind tag talk to it at KROPS_STANDIN_KIND_URL instead of
// driving Docker. Release builds never contain the selection.
package kindstandin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/kropsdev/krops/tools/kit/bootcluster"
)

// EnvURL names the harness's address.
const EnvURL = "KROPS_STANDIN_KIND_URL"

// Kind is the HTTP client of the harness.
type Kind struct {
	base string
	hc   *http.Client
}

// New returns Kind for the harness at base (http://127.0.0.1:port).
func New(base string) (*Kind, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("%s=%q is not an http:// address of the stand-in kind harness", EnvURL, base)
	}
	// Creating a cluster starts an API server and its controllers.
	return &Kind{base: strings.TrimSuffix(base, "/"), hc: &http.Client{Timeout: 5 * time.Minute}}, nil
}

// List names the clusters the harness runs.
func (k *Kind) List(ctx context.Context) ([]string, error) {
	body, err := k.call(ctx, http.MethodGet, "/clusters", nil)
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(body, &names); err != nil {
		return nil, fmt.Errorf("stand-in kind: listing clusters: %w", err)
	}
	return names, nil
}

// Create asks the harness for a cluster made from config.
func (k *Kind) Create(ctx context.Context, name string, config []byte) error {
	_, err := k.call(ctx, http.MethodPut, "/clusters/"+url.PathEscape(name), config)
	return err
}

// Delete removes the cluster; a missing one is not an error, as with kind.
func (k *Kind) Delete(ctx context.Context, name string) error {
	_, err := k.call(ctx, http.MethodDelete, "/clusters/"+url.PathEscape(name), nil)
	return err
}

// KubeConfig returns the cluster's kubeconfig (internal is accepted and
// ignored: the harness has one network).
func (k *Kind) KubeConfig(ctx context.Context, name string, internal bool) (string, error) {
	body, err := k.call(ctx, http.MethodGet, "/clusters/"+url.PathEscape(name)+"/kubeconfig", nil)
	return string(body), err
}

// SyncNodeDir hands the harness the directory's files and what an earlier
// sync's manifest (as the harness holds it) says to remove; the harness
// keeps them per cluster for the test to check. One node: the harness's
// clusters have one.
func (k *Kind) SyncNodeDir(ctx context.Context, name string, d bootcluster.NodeDir) (int, error) {
	base := "/clusters/" + url.PathEscape(name) + "/files"
	earlier, err := k.call(ctx, http.MethodGet, base+"?path="+url.QueryEscape(path.Join(d.Path, d.Manifest)), nil)
	if err != nil {
		return 0, err
	}
	req := NodeFiles{Files: map[string]string{}}
	for _, rel := range d.Stale(string(earlier)) {
		req.Remove = append(req.Remove, path.Join(d.Path, rel))
	}
	for rel, content := range d.Files {
		req.Files[path.Join(d.Path, rel)] = content
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	if _, err := k.call(ctx, http.MethodPut, base, body); err != nil {
		return 0, err
	}
	return 1, nil
}

// NodeFiles is the body of PUT /clusters/<name>/files: absolute paths in
// the node to remove (with what is under them), then files to write.
type NodeFiles struct {
	Remove []string          `json:"remove,omitempty"`
	Files  map[string]string `json:"files"`
}

func (k *Kind) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := k.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("stand-in kind: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("stand-in kind: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("stand-in kind: %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(out)))
	}
	return out, nil
}
