// Package zarfpkg reads the parts of a Zarf package definition (zarf.yaml)
// that krops checks against its own sources of truth: the image inventory,
// the chart pins in bootstrap.toml and the files the package carries.
//
// Zarf itself is not a dependency: its Go module is not available to this
// project, and the checks need only the package's declarative surface.
package zarfpkg

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/imageinventory"
)

// Package is a zarf.yaml.
type Package struct {
	Kind       string      `json:"kind"`
	Metadata   Metadata    `json:"metadata"`
	Components []Component `json:"components"`
}

// Metadata names the package.
type Metadata struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Architecture string `json:"architecture,omitempty"`
}

// Component is one deployable unit of the package.
type Component struct {
	Name      string     `json:"name"`
	Charts    []Chart    `json:"charts,omitempty"`
	Images    []string   `json:"images,omitempty"`
	Manifests []Manifest `json:"manifests,omitempty"`
	Files     []File     `json:"files,omitempty"`
}

// Chart is a Helm chart the package carries.
type Chart struct {
	Name        string   `json:"name"`
	URL         string   `json:"url,omitempty"`
	Version     string   `json:"version,omitempty"`
	Namespace   string   `json:"namespace,omitempty"`
	ValuesFiles []string `json:"valuesFiles,omitempty"`
}

// Manifest is a set of Kubernetes manifests the package applies.
type Manifest struct {
	Name  string   `json:"name"`
	Files []string `json:"files,omitempty"`
}

// File is a file the package carries to the deploying machine.
type File struct {
	Source string `json:"source"`
	Target string `json:"target,omitempty"`
}

// Load reads a zarf.yaml.
func Load(path string) (*Package, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Package
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// Severity says whether a finding blocks a release build only or always.
type Severity int

const (
	// Error always fails the check.
	Error Severity = iota
	// Pending fails only a release check: the package cannot be built
	// yet, but the definition is consistent (an image waiting for its
	// digest, a manifest produced by the build step).
	Pending
)

// Finding is one thing wrong with, or missing from, a package.
type Finding struct {
	Severity  Severity
	Component string
	Message   string
}

func (f Finding) String() string {
	if f.Component == "" {
		return f.Message
	}
	return "component " + f.Component + ": " + f.Message
}

// CheckOptions holds what a package is checked against.
type CheckOptions struct {
	// Dir is the package's directory; relative file paths resolve here.
	Dir string
	// Inventory is the parsed airgap/images.txt.
	Inventory *imageinventory.Inventory
	// ChartPins maps chart names to the versions bootstrap.toml pins.
	ChartPins map[string]string
	// Built lists directories (relative to Dir) whose files a build step
	// produces; their absence is Pending rather than Error.
	Built []string
	// BuiltImages are repositories (without tag) the package build pushes
	// to a loopback registry itself, such as the config artifact. They are
	// not in the inventory: their digest changes with every commit.
	BuiltImages []string
}

// Check compares the package with the inventory, the chart pins and the file
// system.
func Check(p *Package, o CheckOptions) []Finding {
	var out []Finding
	add := func(sev Severity, comp, format string, args ...any) {
		out = append(out, Finding{sev, comp, fmt.Sprintf(format, args...)})
	}
	if p.Kind != "ZarfPackageConfig" {
		add(Error, "", "kind is %q, want ZarfPackageConfig", p.Kind)
	}
	if p.Metadata.Name == "" || p.Metadata.Version == "" {
		add(Error, "", "metadata.name and metadata.version are required")
	}
	seen := map[string]bool{}
	listed := map[string]bool{}
	for _, c := range p.Components {
		if seen[c.Name] {
			add(Error, c.Name, "defined twice")
		}
		seen[c.Name] = true
		for _, img := range c.Images {
			base, digest, _ := strings.Cut(img, "@")
			listed[base] = true
			if builtImage(o, base) {
				if host := strings.SplitN(base, "/", 2)[0]; !strings.HasPrefix(host, "localhost:") && !strings.HasPrefix(host, "127.0.0.1:") {
					add(Error, c.Name, "image %s is built with the package and must come from a loopback registry (localhost:<port>)", base)
				}
				continue
			}
			e, ok := o.Inventory.Lookup(base)
			switch {
			case !ok:
				add(Error, c.Name, "image %s is not in airgap/images.txt", base)
			case e.PreloadedIn != "":
				add(Error, c.Name, "image %s ships inside %s: list that image instead", base, e.PreloadedIn)
			case e.Pending && digest == "":
				add(Pending, c.Name, "image %s has no digest yet (airgap/images.txt line %d): run krops-airgap pin on a machine that reaches the registry", base, e.Line)
			case e.Pending:
				add(Error, c.Name, "image %s carries a digest but airgap/images.txt line %d is pending: run krops-airgap pin so both agree", base, e.Line)
			case digest == "":
				add(Error, c.Name, "image %s must be pinned as %s (Zarf would otherwise pull whatever the tag points at)", base, e.Pinned())
			case digest != e.Digest:
				add(Error, c.Name, "image %s is pinned to %s here but to %s in airgap/images.txt line %d", base, digest, e.Digest, e.Line)
			}
		}
		for _, ch := range c.Charts {
			if pin, ok := o.ChartPins[ch.Name]; ok && strings.TrimPrefix(ch.Version, "v") != strings.TrimPrefix(pin, "v") {
				add(Error, c.Name, "chart %s is at %s but bootstrap.toml [charts] pins %s", ch.Name, ch.Version, pin)
			}
			for _, v := range ch.ValuesFiles {
				out = append(out, checkFile(o, c.Name, "values file", v)...)
			}
		}
		for _, m := range c.Manifests {
			for _, f := range m.Files {
				out = append(out, checkFile(o, c.Name, "manifest "+m.Name, f)...)
			}
		}
		for _, f := range c.Files {
			out = append(out, checkFile(o, c.Name, "file", f.Source)...)
		}
	}
	out = append(out, checkManifestImages(p, o, listed)...)
	return out
}

func builtImage(o CheckOptions, image string) bool {
	repo, _, _ := imageinventory.SplitTag(image)
	for _, b := range o.BuiltImages {
		if repo == b {
			return true
		}
	}
	return false
}

func isURL(s string) bool { return strings.Contains(s, "://") }

func checkFile(o CheckOptions, comp, what, rel string) []Finding {
	if isURL(rel) {
		return nil
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
		return []Finding{{Error, comp, fmt.Sprintf("%s %s: use a path inside %s", what, rel, o.Dir)}}
	}
	if _, err := os.Stat(filepath.Join(o.Dir, rel)); err == nil {
		return nil
	}
	for _, b := range o.Built {
		if strings.HasPrefix(filepath.Clean(rel), filepath.Clean(b)+string(filepath.Separator)) {
			return []Finding{{Pending, comp, fmt.Sprintf("%s %s does not exist yet: the package build step writes it", what, rel)}}
		}
	}
	return []Finding{{Error, comp, fmt.Sprintf("%s %s does not exist", what, rel)}}
}

var imageLine = regexp.MustCompile(`(?m)^\s*-?\s*image:\s*["']?([^"'\s]+)["']?\s*$`)

// checkManifestImages: every image a carried manifest runs must be in the
// package, or the air-gapped cluster cannot start it. Only manifests that
// exist are read (the others are reported as missing already).
func checkManifestImages(p *Package, o CheckOptions, listed map[string]bool) []Finding {
	var out []Finding
	for _, c := range p.Components {
		for _, m := range c.Manifests {
			for _, f := range m.Files {
				if isURL(f) {
					out = append(out, Finding{Error, c.Name, fmt.Sprintf("manifest %s: %s is fetched at build time and cannot be checked; render it into the package directory instead", m.Name, f)})
					continue
				}
				b, err := os.ReadFile(filepath.Join(o.Dir, f))
				if err != nil {
					continue
				}
				var imgs []string
				for _, mm := range imageLine.FindAllSubmatch(b, -1) {
					imgs = append(imgs, string(bytes.TrimSpace(mm[1])))
				}
				sort.Strings(imgs)
				for _, img := range imgs {
					base, _, _ := strings.Cut(img, "@")
					if !listed[base] {
						out = append(out, Finding{Error, c.Name, fmt.Sprintf("manifest %s runs %s, which no component of the package lists", f, base)})
					}
				}
			}
		}
	}
	return out
}

// Images returns every image the package lists, in component order.
func (p *Package) Images() []string {
	var out []string
	for _, c := range p.Components {
		out = append(out, c.Images...)
	}
	return out
}

// Pin rewrites the package text so every image listed as repo:tag (with or
// without an older digest) that pins maps carries pins[repo:tag]. Only image
// list items change; comments and layout stay as they are.
func Pin(src []byte, pins map[string]string) []byte {
	lines := strings.Split(string(src), "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "- ") {
			continue
		}
		item := strings.TrimSpace(strings.TrimPrefix(trimmed, "- "))
		comment := ""
		if c := strings.Index(item, " #"); c >= 0 {
			item, comment = strings.TrimSpace(item[:c]), item[c:]
		}
		quote := ""
		if len(item) > 1 && (item[0] == '"' || item[0] == '\'') && item[len(item)-1] == item[0] {
			quote, item = item[:1], item[1:len(item)-1]
		}
		base, _, _ := strings.Cut(item, "@")
		pinned, ok := pins[base]
		if !ok {
			continue
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		lines[i] = indent + "- " + quote + pinned + quote + comment
	}
	return []byte(strings.Join(lines, "\n"))
}
