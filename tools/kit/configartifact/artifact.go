// Package configartifact packs repository paths into the OCI artifact Flux's
// OCIRepository reconciles (a "config artifact"), and pushes it.
//
// The artifact is one gzip'd tarball layer with Flux's media types and the
// OCI source/revision/created annotations Flux shows in its status. It is
// reproducible: the same files and options give the same digest, so pushing
// an unchanged tree does not make Flux reconcile again, and an air-gap
// package can pin the artifact like any image.
package configartifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/kropsdev/krops/tools/kit/budget"
)

// Media types Flux's source-controller recognises for config artifacts.
const (
	ConfigMediaType  types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// Annotation keys (OCI image spec) Flux reads into the artifact's metadata.
const (
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
)

// BuildOptions says what goes into an artifact.
type BuildOptions struct {
	// Root is the repository root; Paths and the paths inside the
	// artifact are relative to it.
	Root string
	// Paths are the files and directories to include. Dot-files and
	// dot-directories (.git, .env) are never included.
	Paths []string
	// Source is the repository URL, Revision the revision it was built
	// from (Flux's form: "<branch>@sha1:<commit>").
	Source, Revision string
	// Created stamps the artifact and every file in it; the zero value
	// means the Unix epoch, which keeps the digest independent of when
	// the artifact was built.
	Created time.Time
}

// Artifact is a built config artifact.
type Artifact struct {
	Image v1.Image
	// Digest is the manifest digest (sha256:...).
	Digest string
	// Files is the number of files packed.
	Files int
}

// Build packs the paths. A path outside Root, a missing path or a symbolic
// link is an error naming the path: a link could pull in files from outside
// the repository, and Flux would not follow it anyway.
func Build(ctx context.Context, o BuildOptions) (*Artifact, error) {
	if len(o.Paths) == 0 {
		return nil, errors.New("config artifact: no paths to pack")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, fmt.Errorf("config artifact root %s: %w", o.Root, err)
	}
	created := o.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	files, err := collect(ctx, root, o.Paths)
	if err != nil {
		return nil, err
	}
	layer, err := pack(root, files, created)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: static.NewLayer(layer, ContentMediaType)})
	if err != nil {
		return nil, fmt.Errorf("config artifact: %w", err)
	}
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	ann := map[string]string{AnnotationCreated: created.Format(time.RFC3339)}
	if o.Source != "" {
		ann[AnnotationSource] = o.Source
	}
	if o.Revision != "" {
		ann[AnnotationRevision] = o.Revision
	}
	img = mutate.Annotations(img, ann).(v1.Image)
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("config artifact digest: %w", err)
	}
	return &Artifact{Image: img, Digest: d.String(), Files: len(files)}, nil
}

// collect returns the repository-relative slash paths of every regular file
// under the given paths, sorted and without duplicates.
func collect(ctx context.Context, root string, paths []string) ([]string, error) {
	seen := map[string]bool{}
	for _, p := range paths {
		abs := filepath.Join(root, filepath.FromSlash(p))
		rel, err := filepath.Rel(root, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("config artifact path %s: outside the repository root %s", p, root)
		}
		err = filepath.WalkDir(abs, func(f string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if strings.HasPrefix(d.Name(), ".") && f != abs {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return fmt.Errorf("%s is a symbolic link: replace it with the file it points to", f)
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", f)
			}
			r, _ := filepath.Rel(root, f)
			seen[filepath.ToSlash(r)] = true
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("config artifact path %s: %w", p, err)
		}
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, nil
}

// pack writes a tar.gz whose bytes depend only on the files' paths, contents
// and executable bits.
func pack(root string, files []string, stamp time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: stamp, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := addFile(tw, root, f, stamp); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, root, rel string, stamp time.Time) error {
	fh, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("config artifact file %s: %w", rel, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("config artifact file %s: %w", rel, err)
	}
	mode := int64(0o644)
	if fi.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: fi.Size(), ModTime: stamp, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("config artifact file %s: %w", rel, err)
	}
	if _, err := io.Copy(tw, fh); err != nil {
		return fmt.Errorf("config artifact file %s: %w", rel, err)
	}
	return nil
}

// DefaultPushTimeout bounds one push. The artifact is a few hundred
// kilobytes: a push that takes longer is a registry that accepted the
// connection and stopped answering, and the seed and the pivot must not wait
// on it for ever.
const DefaultPushTimeout = budget.RegistryPush

// responseTimeout is how long one request may wait for the registry's
// response headers. go-containerregistry's default transport has none, so
// its plain-HTTP fallback waited without end on a silent registry.
const responseTimeout = budget.RegistryResponse

// PushOptions says how to reach the registry.
type PushOptions struct {
	// Insecure allows plain HTTP (a local registry on the kind network).
	// Loopback registries are reached over HTTP without it.
	Insecure bool
	// Transport replaces the default HTTP transport (tests, proxies).
	Transport http.RoundTripper
	// Timeout bounds the whole push; zero is DefaultPushTimeout.
	Timeout time.Duration
}

// Push writes the artifact to ref (registry/repository:tag) and returns
// ref's repository pinned by digest. Credentials come from the Docker
// credential configuration, never from arguments.
func Push(ctx context.Context, a *Artifact, ref string, o PushOptions) (string, error) {
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	tag, err := name.NewTag(ref, nameOpts...)
	if err != nil {
		return "", fmt.Errorf("config artifact reference %q: %w (write registry/repository:tag)", ref, err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultPushTimeout
	}
	transport := o.Transport
	if transport == nil {
		t := remote.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = min(responseTimeout, timeout)
		transport = t
	}
	pushCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := []remote.Option{remote.WithContext(pushCtx), remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(transport)}
	if err := remote.Write(tag, a.Image, opts...); err != nil {
		if ctx.Err() == nil && (pushCtx.Err() != nil || isTimeout(err)) {
			return "", fmt.Errorf("push config artifact to %s: the registry %s did not answer within %s: check that it runs and listens there (REGISTRY_PORT, `krops-kind status`), then rerun: %w",
				ref, tag.RegistryStr(), timeout, err)
		}
		return "", fmt.Errorf("push config artifact to %s: %w", ref, err)
	}
	return tag.Context().Name() + "@" + a.Digest, nil
}

// isTimeout is a request that ran out of time: a response-header or dial
// timeout arrives as a net.Error, not as the context's deadline.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
