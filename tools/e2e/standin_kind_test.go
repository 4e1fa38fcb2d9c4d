package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/seedtest"
)

// standInKind is a STAND-IN for kind and its node containers (no engine
// runs here). It serves the HTTP interface of package kindstandin, which
// the krops binaries built with the krops_standin_kind tag use behind
// krops-kind's cluster interface. A "kind cluster" is a real kube-apiserver
// and etcd with, as processes beside it, the controllers its pods would
// run: the Flux Operator and Flux controllers (which krops-flux-seed
// installs as Deployments) and the Cluster API managers (which Flux
// installs through the Cluster API operator), a STAND-IN kubelet that
// registers the node and marks Deployments available, a STAND-IN for the
// Cluster API operator's provider inventory, and a STAND-IN for the
// garbage collector of kube-controller-manager.
//
// Creating and deleting need testing.T, which only the test goroutine may
// fail, so the handlers pass those requests to the goroutine running the
// binary (see lifecycle.run).
type standInKind struct {
	URL  string
	reqs chan kindRequest

	mu       sync.Mutex
	clusters map[string]*kindCluster
	created  []string // names, in creation order, for the test's checks
	deleted  []string
	// failCreates is how many creates fail as the engine failing half way
	// through would make them: kind removes the nodes it started and
	// reports the engine's error, so no cluster is left.
	failCreates int
}

type kindCluster struct {
	api    *testenv.Cluster
	flux   *testenv.Controllers
	ctrls  []*testenv.Controllers
	cancel context.CancelFunc
	// kubeconfig is what `kind get kubeconfig` prints: context kind-<name>.
	kubeconfig []byte
	// files are what krops-kind wrote into the node, by absolute path.
	files map[string]string
}

type kindRequest struct {
	op, name string
	config   []byte
	done     chan error
}

func newStandInKind(t testing.TB) *standInKind {
	t.Helper()
	// Every program a create starts, checked before any binary asks for a
	// cluster: a missing one skips (or defers) the test here rather than
	// in the middle of a create.
	testenv.NeedTestbin(t)
	k := &standInKind{reqs: make(chan kindRequest), clusters: map[string]*kindCluster{}}
	srv := httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(srv.Close)
	k.URL = srv.URL
	return k
}

func (k *standInKind) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && len(parts) == 1 && parts[0] == "clusters":
		k.mu.Lock()
		names := []string{}
		for n := range k.clusters {
			names = append(names, n)
		}
		k.mu.Unlock()
		sort.Strings(names)
		_ = json.NewEncoder(w).Encode(names)
	case r.Method == http.MethodGet && len(parts) == 3 && parts[2] == "kubeconfig":
		k.mu.Lock()
		c := k.clusters[parts[1]]
		k.mu.Unlock()
		if c == nil {
			http.Error(w, "no kind cluster "+parts[1], http.StatusNotFound)
			return
		}
		_, _ = w.Write(c.kubeconfig)
	case len(parts) == 3 && parts[2] == "files":
		k.files(w, r, parts[1])
	case (r.Method == http.MethodPut || r.Method == http.MethodDelete) && len(parts) == 2:
		body, _ := io.ReadAll(r.Body)
		req := kindRequest{op: r.Method, name: parts[1], config: body, done: make(chan error, 1)}
		select {
		case k.reqs <- req:
		case <-r.Context().Done():
			return
		}
		// The client's going away (the test killed the binary) ends the
		// wait too: httptest's Close waits for every handler.
		select {
		case err := <-req.done:
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		case <-r.Context().Done():
		}
	default:
		http.Error(w, "stand-in kind: no "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

// files serves a node's files: GET one (empty when absent, like a node
// without it), PUT removals and writes (kindstandin.NodeFiles).
func (k *standInKind) files(w http.ResponseWriter, r *http.Request, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.clusters[name]
	if c == nil {
		http.Error(w, "no kind cluster "+name, http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet:
		_, _ = io.WriteString(w, c.files[r.URL.Query().Get("path")])
	case http.MethodPut:
		// kindstandin.NodeFiles, the client's side of this request.
		var req struct {
			Remove []string          `json:"remove"`
			Files  map[string]string `json:"files"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, dir := range req.Remove {
			for p := range c.files {
				if p == dir || strings.HasPrefix(p, dir+"/") {
					delete(c.files, p)
				}
			}
		}
		if c.files == nil {
			c.files = map[string]string{}
		}
		for p, content := range req.Files {
			c.files[p] = content
		}
	default:
		http.Error(w, "stand-in kind: no "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

// nodeFile returns a file krops-kind wrote into a cluster's node.
func (k *standInKind) nodeFile(name, path string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.clusters[name]
	if c == nil {
		return "", false
	}
	content, ok := c.files[path]
	return content, ok
}

// handle carries out a create or delete on the test goroutine.
func (k *standInKind) handle(t testing.TB, req kindRequest) {
	t.Helper()
	// A create that stops the test goroutine (a missing testbin program
	// skips, a failed start is fatal) still answers the binary, which would
	// otherwise wait for the reply until the package's timeout. done has
	// room for one answer; the normal paths send theirs first.
	defer func() {
		select {
		case req.done <- fmt.Errorf("stand-in kind: the test stopped while handling %s %s", req.op, req.name):
		default:
		}
	}()
	switch req.op {
	case http.MethodPut:
		k.mu.Lock()
		_, exists := k.clusters[req.name]
		k.mu.Unlock()
		if exists {
			req.done <- fmt.Errorf("node(s) already exist for a cluster with the name %q", req.name)
			return
		}
		k.mu.Lock()
		fail := k.failCreates > 0
		if fail {
			k.failCreates--
		}
		k.mu.Unlock()
		if fail {
			req.done <- fmt.Errorf("failed to create cluster: command \"docker run --name %s-control-plane ...\" failed with error: exit status 125 (stand-in engine fault)", req.name)
			return
		}
		c := k.create(t, req.name)
		k.mu.Lock()
		k.clusters[req.name] = c
		k.created = append(k.created, req.name)
		k.mu.Unlock()
	case http.MethodDelete:
		k.mu.Lock()
		c := k.clusters[req.name]
		delete(k.clusters, req.name)
		if c != nil {
			k.deleted = append(k.deleted, req.name)
		}
		k.mu.Unlock()
		if c != nil {
			c.stop(t)
		}
	}
	req.done <- nil
}

func (k *standInKind) create(t testing.TB, name string) *kindCluster {
	t.Helper()
	api := testenv.APIServer(t, testenv.ClusterOptions{Name: "kind-" + name, CRDs: allCRDs, Webhooks: true})
	ctx, cancel := context.WithCancel(context.Background())
	c := &kindCluster{api: api, cancel: cancel}
	testenv.LabelForMove(t, ctx, api)
	c.flux = testenv.Flux(t, api)
	c.ctrls = append(c.ctrls, testenv.RunFluxOperator(t, api), c.flux, testenv.RunClusterAPIStack(t, api))
	if err := testenv.StandInNodes(ctx, api.Client, name+"-control-plane", 1); err != nil {
		t.Fatal(err)
	}
	go seedtest.StandInKubelet(ctx, api.Client)
	go standInGarbageCollector(ctx, api)
	writeKindInventory(t, ctx, api)
	path := filepath.Join(t.TempDir(), "kind-"+name+".kubeconfig")
	if err := testenv.WriteKubeconfig(api.Config, "kind-"+name, path); err != nil {
		t.Fatal(err)
	}
	kc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = kc
	return c
}

func (c *kindCluster) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	// Cluster API first: its managers hold the machine-wide CAPD lock the
	// target's stack waits for.
	for i := len(c.ctrls) - 1; i >= 0; i-- {
		c.ctrls[i].Stop()
	}
	if err := c.api.Stop(); err != nil {
		t.Errorf("stopping the stand-in kind cluster: %v", err)
	}
}

// cluster is the running stand-in kind cluster name, or nil.
func (k *standInKind) cluster(name string) *kindCluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.clusters[name]
}
