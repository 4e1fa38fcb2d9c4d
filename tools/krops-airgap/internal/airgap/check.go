// Package airgap prepares the air-gap package: it checks airgap/zarf.yaml
// against the image inventory and bootstrap.toml, pins image digests by
// asking their registries, and builds the config artifact the package
// carries.
package airgap

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/imageinventory"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/kit/zarfpkg"
)

// Layout names the files of the air-gap directory.
type Layout struct {
	// Dir is the air-gap directory (the repository's airgap/).
	Dir string
}

// Package is airgap/zarf.yaml.
func (l Layout) Package() string { return filepath.Join(l.Dir, "zarf.yaml") }

// Inventory is airgap/images.txt.
func (l Layout) Inventory() string { return filepath.Join(l.Dir, "images.txt") }

// BuildDir is where the package build writes the rendered provider
// manifests, relative to Dir.
const BuildDir = "build"

// ConfigRepository is the repository the config artifact is pushed to on the
// build machine and listed under in the package.
const ConfigRepository = "localhost:5000/kropsdev/krops-config"

// CheckOptions says what to check.
type CheckOptions struct {
	Layout Layout
	Config *config.Config
	// Release makes pending findings failures: the package is about to be
	// built and everything must be pinned and rendered.
	Release bool
	Out     io.Writer
	// Printer receives the result lines; nil means plain lines on Out.
	Printer *ui.Progress
}

// Check prints one line per finding and returns an error when any finding
// fails the check.
func Check(o CheckOptions) error {
	pkg, err := zarfpkg.Load(o.Layout.Package())
	if err != nil {
		return fmt.Errorf("air-gap package: %w", err)
	}
	inv, err := readInventory(o.Layout.Inventory())
	if err != nil {
		return err
	}
	findings := zarfpkg.Check(pkg, zarfpkg.CheckOptions{
		Dir: o.Layout.Dir, Inventory: inv, Built: []string{BuildDir}, BuiltImages: []string{ConfigRepository},
		ChartPins: map[string]string{"cert-manager": o.Config.Charts.CertManager, "flux-operator": o.Config.Charts.FluxOperator},
	})
	failed, pending := 0, 0
	for _, f := range findings {
		switch {
		case f.Severity == zarfpkg.Error:
			failed++
			fmt.Fprintf(o.Out, "✘ %s\n", f)
		case o.Release:
			failed++
			fmt.Fprintf(o.Out, "✘ %s\n", f)
		default:
			pending++
			fmt.Fprintf(o.Out, "… %s\n", f)
		}
	}
	name := pkg.Metadata.Name + " " + pkg.Metadata.Version
	switch {
	case failed > 0:
		noun := "problems"
		if failed == 1 {
			noun = "problem"
		}
		return fmt.Errorf("%s: %d %s in %s", name, failed, noun, o.Layout.Package())
	case pending > 0:
		o.printer().Successf("%s is consistent; %d items wait for the build machine (task airgap:pin, task airgap:providers)", name, pending)
	default:
		o.printer().Successf("%s is ready to build: %d images, all pinned", name, len(pkg.Images()))
	}
	return nil
}

func readInventory(path string) (*imageinventory.Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("image inventory: %w", err)
	}
	inv, problems := imageinventory.Parse(b)
	if len(problems) > 0 {
		return nil, fmt.Errorf("image inventory %s: %w (and %d more)", path, problems[0], len(problems)-1)
	}
	return inv, nil
}

// printer is where result lines go: Printer, or plain lines on Out.
func printerOf(p *ui.Progress, out io.Writer) *ui.Progress {
	if p != nil {
		return p
	}
	return ui.New(ui.Options{Out: out})
}

func (o CheckOptions) printer() *ui.Progress { return printerOf(o.Printer, o.Out) }
