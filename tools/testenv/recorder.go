package testenv

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIRecorder is a loopback proxy in front of a test's kube-apiserver that
// logs every request ("METHOD /path"), so a test can read from the server's
// side what a binary did and in which order. Intercept, when set, may answer
// a request itself (a refusal, a hang) instead of forwarding it.
type APIRecorder struct {
	URL string
	mu  sync.Mutex
	log []string
	// intercept returns true when it answered the request.
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

// NewAPIRecorder starts a recorder for cfg's server; requests are forwarded
// with cfg's (admin) credentials.
func NewAPIRecorder(t testing.TB, cfg *rest.Config) *APIRecorder {
	t.Helper()
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = tr
	rec := &APIRecorder{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec.mu.Lock()
		rec.log = append(rec.log, req.Method+" "+req.URL.Path)
		icpt := rec.intercept
		rec.mu.Unlock()
		if icpt != nil && icpt(w, req) {
			return
		}
		rp.ServeHTTP(w, req)
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	rec.URL = srv.URL
	return rec
}

// Intercept sets (or, with nil, clears) the request interceptor.
func (r *APIRecorder) Intercept(f func(w http.ResponseWriter, req *http.Request) bool) {
	r.mu.Lock()
	r.intercept = f
	r.mu.Unlock()
}

// Requests returns every request so far.
func (r *APIRecorder) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// Writes returns every request that was not a read (GET).
func (r *APIRecorder) Writes() []string {
	var out []string
	for _, l := range r.Requests() {
		if !strings.HasPrefix(l, "GET ") {
			out = append(out, l)
		}
	}
	return out
}

// Reset forgets the requests so far.
func (r *APIRecorder) Reset() { r.mu.Lock(); r.log = nil; r.mu.Unlock() }

// Kubeconfig writes a kubeconfig that reaches the recorder under context;
// the caller's current context is another one, which a tool must not use.
func (r *APIRecorder) Kubeconfig(t testing.TB, context string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[context] = &clientcmdapi.Cluster{Server: r.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos[context] = &clientcmdapi.AuthInfo{}
	kc.Contexts[context] = &clientcmdapi.Context{Cluster: context, AuthInfo: context}
	kc.Contexts["someone-elses"] = &clientcmdapi.Context{Cluster: context, AuthInfo: context, Namespace: "elsewhere"}
	kc.CurrentContext = "someone-elses"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
