package testenv

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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

// Manifest fetches the image manifest ref (registry/repository:tag) points
// at, failing t when there is none.
func (r *OCIRegistry) Manifest(t testing.TB, ref string) *v1.Manifest {
	t.Helper()
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(parsed)
	if err != nil {
		t.Fatalf("fetching %s: %v", ref, err)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Has reports whether ref (registry/repository:tag) exists.
func (r *OCIRegistry) Has(t testing.TB, ref string) bool {
	t.Helper()
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Head(parsed)
	return err == nil
}
