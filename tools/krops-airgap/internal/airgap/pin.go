package airgap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kropsdev/krops/tools/kit/imageinventory"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/kit/zarfpkg"
)

// Resolver reads the digest a tag points at.
type Resolver interface {
	Resolve(ctx context.Context, image string) (string, error)
}

// RegistryResolver asks the image's registry (a HEAD request for the
// manifest; for a multi-platform image that is the index digest, so every
// platform stays available). Credentials come from the Docker credential
// configuration.
type RegistryResolver struct {
	// Insecure allows plain HTTP to registries other than loopback.
	Insecure bool
	// Transport replaces the default HTTP transport.
	Transport http.RoundTripper
}

// Resolve implements Resolver.
func (r RegistryResolver) Resolve(ctx context.Context, image string) (string, error) {
	var opts []name.Option
	if r.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.NewTag(image, opts...)
	if err != nil {
		return "", err
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if r.Transport != nil {
		ropts = append(ropts, remote.WithTransport(r.Transport))
	}
	desc, err := remote.Head(ref, ropts...)
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// PinOptions says which entries to pin and how.
type PinOptions struct {
	Layout   Layout
	Resolver Resolver
	// Refresh re-resolves pinned entries too and re-pins those whose tag
	// moved. Without it a pinned digest is never changed.
	Refresh bool
	// DryRun prints what would change and writes nothing.
	DryRun bool
	// Concurrency bounds the registry requests in flight (default 8).
	Concurrency int
	Out         io.Writer
	// Printer receives the result lines; nil means plain lines on Out.
	Printer *ui.Progress
}

type resolution struct {
	entry  imageinventory.Entry
	digest string
	err    error
}

// Pin resolves the pending entries of airgap/images.txt (and, with Refresh,
// the pinned ones), writes the digests into images.txt and into every image
// reference of airgap/zarf.yaml. Entries that resolved are written even when
// others failed; the error names each failure.
func Pin(ctx context.Context, o PinOptions) error {
	invPath, pkgPath := o.Layout.Inventory(), o.Layout.Package()
	inv, err := readInventory(invPath)
	if err != nil {
		return err
	}
	var targets []imageinventory.Entry
	for _, e := range inv.Entries() {
		if e.Pending || (o.Refresh && e.Digest != "") {
			targets = append(targets, e)
		}
	}
	results := resolveAll(ctx, o.Resolver, targets, o.Concurrency)
	var failed []string
	changed := 0
	for _, r := range results {
		e := r.entry
		switch {
		case r.err != nil:
			failed = append(failed, fmt.Sprintf("%s (images.txt line %d): %v", e.Image, e.Line, r.err))
			fmt.Fprintf(o.Out, "✘ %s: %v\n", e.Image, r.err)
			continue
		case e.Pending:
			o.printer().Successf("%s pinned to %s", e.Image, r.digest)
		case e.Digest == r.digest:
			fmt.Fprintf(o.Out, "= %s unchanged\n", e.Image)
			continue
		default:
			fmt.Fprintf(o.Out, "! %s moved from %s to %s: re-pinned; review why the tag moved before building\n", e.Image, e.Digest, r.digest)
		}
		if err := inv.Pin(e.Image, r.digest); err != nil {
			return err
		}
		changed++
	}
	if changed > 0 && !o.DryRun {
		if err := writeFile(invPath, inv.Bytes()); err != nil {
			return err
		}
		src, err := os.ReadFile(pkgPath)
		if err != nil {
			return fmt.Errorf("air-gap package: %w", err)
		}
		pins := map[string]string{}
		for _, e := range inv.Entries() {
			if e.Digest != "" {
				pins[e.Image] = e.Pinned()
			}
		}
		if err := writeFile(pkgPath, zarfpkg.Pin(src, pins)); err != nil {
			return err
		}
	}
	verb := "pinned"
	if o.DryRun {
		verb = "would pin (dry run, nothing written)"
	}
	fmt.Fprintf(o.Out, "%s %d of %d entries; %d still pending\n", verb, changed, len(targets), len(inv.Pending()))
	if len(failed) > 0 {
		return fmt.Errorf("%d images could not be resolved:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

func resolveAll(ctx context.Context, r Resolver, targets []imageinventory.Entry, limit int) []resolution {
	if limit < 1 {
		limit = 8
	}
	out := make([]resolution, len(targets))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, e := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			d, err := r.Resolve(ctx, e.Image)
			out[i] = resolution{entry: e, digest: d, err: err}
		}()
	}
	wg.Wait()
	sort.SliceStable(out, func(a, b int) bool { return out[a].entry.Line < out[b].entry.Line })
	return out
}

// writeFile replaces path atomically, keeping its mode, so an interrupted
// pin leaves the old file rather than half of a new one.
func writeFile(path string, b []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), mode)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
func (o PinOptions) printer() *ui.Progress { return printerOf(o.Printer, o.Out) }
