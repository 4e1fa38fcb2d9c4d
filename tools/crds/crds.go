// Package crds locates the CustomResourceDefinitions of the projects krops
// deploys, at the versions its manifests pin, inside those projects' Go
// modules (fetched through the Go module proxy). Tests install them into
// real API servers, and validation checks manifests against them.
package crds

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Set names where a project's CRDs live inside its Go module at a pinned
// version. The CRDs are the project's own files, fetched through the Go
// module proxy; nothing upstream is copied into this repository.
type Set struct {
	Name    string
	Module  string
	Version string
	// Dirs inside the module holding CRD YAML.
	Dirs []string
	// Toolchain is set when the module's go.mod needs a newer Go than the
	// machine's (GOTOOLCHAIN); the module proxy serves the toolchain.
	Toolchain string
	// ControllerGen, when set, is the controller-tools version that
	// generates the CRDs from the module's API types (Dirs are then package
	// patterns). For projects whose API module is served but whose CRD
	// YAML is not: the project generates its CRDs the same way.
	ControllerGen string
	// Providers are the cluster-api operator providers ("Kind/name") and
	// Chart the Helm chart whose deployed version must be one these CRDs
	// cover: objects checked against them are then checked against the
	// release that runs.
	Providers []string
	Chart     string
	// Stands in lists other versions this set is accepted for, with the
	// reason in a comment where it is set: the module proxy here does not
	// serve every release, and a neighbouring patch has the same API.
	StandsIn []string
}

// Covers reports whether objects of version v may be checked against this
// set.
func (s Set) Covers(v string) bool {
	norm := func(x string) string { return strings.TrimPrefix(x, "v") }
	if norm(v) == norm(s.Version) {
		return true
	}
	for _, o := range s.StandsIn {
		if norm(o) == norm(v) {
			return true
		}
	}
	return false
}

// Pinned CRD sets. The versions are the ones the declarative trees pin;
// `task validate` cross-checks them against mgmt/ once the trees exist.
var (
	CAPICore = Set{Name: "cluster-api", Module: "sigs.k8s.io/cluster-api", Version: "v1.14.2",
		Dirs:      []string{"core/config/crd/bases", "bootstrap/kubeadm/config/crd/bases", "controlplane/kubeadm/config/crd/bases", "cmd/clusterctl/config/crd/bases"},
		Providers: []string{"CoreProvider/cluster-api", "BootstrapProvider/kubeadm", "ControlPlaneProvider/kubeadm"}}
	CAPD = Set{Name: "cluster-api docker (CAPD)", Module: "sigs.k8s.io/cluster-api/test", Version: "v1.14.2",
		Dirs: []string{"infrastructure/docker/config/crd/bases"}, Providers: []string{"InfrastructureProvider/docker"}}
	CAPIOperator = Set{Name: "cluster-api operator", Module: "sigs.k8s.io/cluster-api-operator", Version: "v0.29.0",
		Dirs: []string{"config/crd/bases"}, Chart: "cluster-api-operator"}
	// CAPA is v2.13.0 because the module proxy here refuses v2.13.1.
	CAPA = Set{Name: "cluster-api aws (CAPA)", Module: "sigs.k8s.io/cluster-api-provider-aws/v2", Version: "v2.13.0",
		Dirs: []string{"config/crd/bases"}, Providers: []string{"InfrastructureProvider/aws"}}
	CAPG = Set{Name: "cluster-api gcp (CAPG)", Module: "sigs.k8s.io/cluster-api-provider-gcp", Version: "v1.13.1",
		Dirs: []string{"config/crd/bases"}, Providers: []string{"InfrastructureProvider/gcp"}}
	CertManager = Set{Name: "cert-manager", Module: "github.com/cert-manager/cert-manager", Version: "v1.21.2",
		Dirs: []string{"deploy/crds"}, Chart: "cert-manager"}
	// Flux's helm-controller module is not served by the proxy here, but
	// its API module is: the HelmRelease CRD is generated from those types
	// with controller-gen, as the project does. v1.6.5 is the served patch
	// of the v1.6 line Flux v2.9 ships.
	FluxHelm = Set{Name: "flux helm-controller", Module: "github.com/fluxcd/helm-controller/api", Version: "v1.6.5",
		Dirs: []string{"./v2/..."}, ControllerGen: "v0.23.0"}
	FluxSource = Set{Name: "flux source-controller", Module: "github.com/fluxcd/source-controller", Version: "v1.9.6",
		Dirs: []string{"config/crd/bases"}}
	FluxKustomize = Set{Name: "flux kustomize-controller", Module: "github.com/fluxcd/kustomize-controller", Version: "v1.9.6",
		Dirs: []string{"config/crd/bases"}}
	// The trees run the flux-operator chart 0.61.0; v0.59.0 is the newest
	// module the proxy serves. Newer CRDs only add fields, so a check
	// against the older ones can fail on a new field but not pass a wrong one.
	FluxOperator = Set{Name: "flux operator", Module: "github.com/controlplaneio-fluxcd/flux-operator", Version: "v0.59.0",
		Dirs: []string{"config/crd/bases"}, Toolchain: "go1.27.3", StandsIn: []string{"v0.61.0"}, Chart: "flux-operator"}
)

// All is every pinned set.
func All() []Set {
	return []Set{CAPICore, CAPD, CAPIOperator, CAPA, CAPG, CertManager, FluxSource, FluxKustomize, FluxHelm, FluxOperator}
}

// moduleDirs caches module locations per test binary: `go mod download` is a
// subprocess, and the module cache behind it is already the real cache.
var moduleDirs sync.Map

// ModuleDir returns the module's directory in the Go module cache,
// downloading it through the module proxy when needed.
func ModuleDir(module, version, toolchain string) (string, error) {
	key := module + "@" + version
	if d, ok := moduleDirs.Load(key); ok {
		return d.(string), nil
	}
	cmd := exec.Command("go", "mod", "download", "-json", key)
	// Outside any module or workspace: the download must not touch go.mod
	// files, and the nested tool modules are not in go.work.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if toolchain != "" {
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+toolchain)
	}
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	_ = json.Unmarshal(out, &info)
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", key, info.Error)
	}
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("go mod download %s: %v %s", key, err, stderr)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory in %q", key, out)
	}
	moduleDirs.Store(key, info.Dir)
	return info.Dir, nil
}

// Files lists the set's CRD files.
func (s Set) Files() ([]string, error) {
	dir, err := ModuleDir(s.Module, s.Version, s.Toolchain)
	if err != nil {
		return nil, err
	}
	if s.ControllerGen != "" {
		return s.generated(dir)
	}
	var files []string
	for _, d := range s.Dirs {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			return nil, fmt.Errorf("%s@%s has no CRD directory %s: %w", s.Module, s.Version, d, err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".yaml") && !e.IsDir() {
				files = append(files, filepath.Join(dir, d, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s@%s: no CRD files in %v", s.Module, s.Version, s.Dirs)
	}
	sort.Strings(files)
	return files, nil
}

// generated runs controller-gen over the module's API packages once per
// module version and controller-tools version, caching the CRDs in the user
// cache directory (about 15 s the first time).
func (s Set) generated(moduleDir string) ([]string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	out := filepath.Join(cache, "krops", "crds", strings.ReplaceAll(s.Module, "/", "_")+"@"+s.Version+"-controller-gen-"+s.ControllerGen)
	if files, _ := filepath.Glob(filepath.Join(out, "*.yaml")); len(files) > 0 {
		sort.Strings(files)
		return files, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".gen-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	args := []string{"run", "sigs.k8s.io/controller-tools/cmd/controller-gen@" + s.ControllerGen, "crd"}
	for _, d := range s.Dirs {
		args = append(args, "paths="+d)
	}
	args = append(args, "output:crd:dir="+tmp)
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if s.Toolchain != "" {
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+s.Toolchain)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("generating the CRDs of %s@%s with controller-gen %s: %v\n%s", s.Module, s.Version, s.ControllerGen, err, b)
	}
	if files, _ := filepath.Glob(filepath.Join(tmp, "*.yaml")); len(files) == 0 {
		return nil, fmt.Errorf("controller-gen %s wrote no CRD for %s@%s %v", s.ControllerGen, s.Module, s.Version, s.Dirs)
	}
	// Another test binary may have finished first; either result is the same.
	if err := os.Rename(tmp, out); err != nil && !os.IsExist(err) {
		if files, _ := filepath.Glob(filepath.Join(out, "*.yaml")); len(files) == 0 {
			return nil, err
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	sort.Strings(files)
	return files, nil
}
