package toolbox

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PendingMarker, on the line above an image ARG, says its digest has not
// been read from a registry yet.
const PendingMarker = "# pin: pending"

// BaseImage is one `ARG <NAME>_IMAGE=<ref>` of the Dockerfile.
type BaseImage struct {
	Arg, Ref string
	// Line is the ARG's line (1-based).
	Line    int
	Pending bool
}

var (
	imageArg = regexp.MustCompile(`^ARG ([A-Z0-9_]+_IMAGE)=(\S+)$`)
	digested = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	fromLine = regexp.MustCompile(`^FROM (?:--platform=\S+ )?(\S+)`)
)

// BaseImages reads the Dockerfile's base images and checks the rule every
// one follows: FROM names only ${..._IMAGE} arguments or earlier stages, and
// each image is pinned by digest or marked pending.
func BaseImages(dockerfile string) ([]BaseImage, error) {
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	var out []BaseImage
	args := map[string]bool{}
	stages := map[string]bool{}
	var problems []string
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if m := imageArg.FindStringSubmatch(l); m != nil {
			pending := i > 0 && strings.TrimSpace(lines[i-1]) == PendingMarker
			if !pending && !digested.MatchString(m[2]) {
				problems = append(problems, fmt.Sprintf("line %d: %s=%s is neither pinned by digest nor marked %q on the line above", i+1, m[1], m[2], PendingMarker))
			}
			if pending && digested.MatchString(m[2]) {
				problems = append(problems, fmt.Sprintf("line %d: %s has a digest but is still marked pending", i+1, m[1]))
			}
			out = append(out, BaseImage{Arg: m[1], Ref: m[2], Line: i + 1, Pending: pending})
			args[m[1]] = true
			continue
		}
		if m := fromLine.FindStringSubmatch(l); m != nil {
			ref := m[1]
			arg := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
			if !(strings.HasPrefix(ref, "${") && args[arg]) && !stages[ref] {
				problems = append(problems, fmt.Sprintf("line %d: FROM %s: name a base image through an ARG <NAME>_IMAGE (pinned or pending) or an earlier stage", i+1, ref))
			}
			if f := strings.Fields(l); len(f) >= 2 && strings.EqualFold(f[len(f)-2], "AS") {
				stages[f[len(f)-1]] = true
			}
		}
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("%s: %s", dockerfile, strings.Join(problems, "; "))
	}
	return out, nil
}

// Resolver reads the digest a tag points at.
type Resolver func(ctx context.Context, ref string) (string, error)

// RegistryDigest asks the image's registry (a manifest HEAD; for a
// multi-platform image the index digest, so every platform stays
// available). Credentials come from the Docker credential configuration.
func RegistryDigest(insecure bool) Resolver {
	return func(ctx context.Context, ref string) (string, error) {
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		r, err := name.ParseReference(ref, opts...)
		if err != nil {
			return "", err
		}
		d, err := remote.Head(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return "", fmt.Errorf("reading the digest of %s: %w", ref, err)
		}
		return d.Digest.String(), nil
	}
}

// Resolve writes the digest of every pending base image into the
// Dockerfile and drops its marker. It returns the images it pinned.
func Resolve(ctx context.Context, dockerfile string, resolve Resolver) ([]BaseImage, error) {
	images, err := BaseImages(dockerfile)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	var pinned []BaseImage
	drop := map[int]bool{}
	for _, img := range images {
		if !img.Pending {
			continue
		}
		d, err := resolve(ctx, img.Ref)
		if err != nil {
			return nil, err
		}
		img.Ref = img.Ref + "@" + d
		lines[img.Line-1] = "ARG " + img.Arg + "=" + img.Ref
		drop[img.Line-2] = true
		img.Pending = false
		pinned = append(pinned, img)
	}
	var out []string
	for i, l := range lines {
		if !drop[i] {
			out = append(out, l)
		}
	}
	return pinned, os.WriteFile(dockerfile, []byte(strings.Join(out, "\n")), 0o644)
}
