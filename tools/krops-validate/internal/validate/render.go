// Package validate checks the declarative trees (mgmt/, workload/) before
// Flux ever sees them: every kustomization builds, every object is accepted
// by a real API server with the pinned CRDs, and the cross-checks between
// the trees, bootstrap.toml and the air-gap inventory hold.
package validate

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/fluxbuild"
)

// Object is one rendered object and where it came from.
type Object struct {
	// Root is the kustomization directory (relative to the repository).
	Root string
	Raw  map[string]any
}

// Kind returns apiVersion/kind.
func (o Object) Kind() (apiVersion, kind string) {
	a, _ := o.Raw["apiVersion"].(string)
	k, _ := o.Raw["kind"].(string)
	return a, k
}

// Name returns namespace/name (or name).
func (o Object) Name() string {
	md, _ := o.Raw["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
}

// String identifies the object in messages.
func (o Object) String() string {
	_, k := o.Kind()
	return fmt.Sprintf("%s %s (in %s)", k, o.Name(), o.Root)
}

// kustomizationNames are the file names kustomize recognises.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Roots lists the kustomization directories under dirs (relative to root).
func Roots(root string, dirs ...string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		base := filepath.Join(root, d)
		if _, err := os.Stat(base); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && strings.HasPrefix(e.Name(), ".") && p != base {
				return filepath.SkipDir
			}
			if !e.IsDir() {
				for _, n := range kustomizationNames {
					if e.Name() == n {
						rel, _ := filepath.Rel(root, filepath.Dir(p))
						out = append(out, rel)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(out)
	return out, nil
}

// Build renders one kustomization with the kustomize Go API, the way Flux's
// kustomize-controller builds it (fluxbuild).
func Build(root, dir string) ([]Object, error) {
	res, err := fluxbuild.Build(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		return nil, err
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	var objs []Object
	for _, doc := range strings.Split(string(out), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("reading kustomize output: %w", err)
		}
		objs = append(objs, Object{Root: dir, Raw: m})
	}
	return objs, nil
}
