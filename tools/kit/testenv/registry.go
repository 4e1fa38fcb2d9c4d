package testenv

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// OCIRegistry is an OCI distribution registry on loopback, served in-process
// (go-containerregistry's registry: real HTTP, real manifests and blobs,
// in-memory storage). Helm chart pushes and pulls and Flux artifacts work
// against it over plain HTTP.
type OCIRegistry struct {
	// URL is http://127.0.0.1:<port>.
	URL string
	// Host is 127.0.0.1:<port>, for image references.
	Host string
}

// Registry starts a registry for t and stops it in t.Cleanup.
func Registry(t testing.TB) *OCIRegistry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	t.Cleanup(srv.Close)
	return &OCIRegistry{URL: srv.URL, Host: strings.TrimPrefix(srv.URL, "http://")}
}
