package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/crds"
)

// CRDSet is a pinned set of upstream CRDs (see package crds).
type CRDSet = crds.Set

// The pinned sets, for ClusterOptions.CRDs.
var (
	CAPICore      = crds.CAPICore
	CAPD          = crds.CAPD
	CAPIOperator  = crds.CAPIOperator
	CAPA          = crds.CAPA
	CAPG          = crds.CAPG
	CertManager   = crds.CertManager
	FluxSource    = crds.FluxSource
	FluxKustomize = crds.FluxKustomize
	FluxHelm      = crds.FluxHelm
	FluxOperator  = crds.FluxOperator
)

// AllCRDs is every pinned set.
func AllCRDs() []CRDSet { return crds.All() }

// CRDPaths returns the CRD files of set, failing t when they cannot be found.
func CRDPaths(t testing.TB, set CRDSet) []string {
	t.Helper()
	paths, err := set.Files()
	if err != nil {
		t.Fatalf("CRDs of %s: %v", set.Name, err)
	}
	return paths
}

// contractLabels maps the name of each CRD of set to the Cluster API
// contract labels (cluster.x-k8s.io/<contract>: <api versions>) the project's
// own kustomization puts on it next to the CRD directory, as its released
// manifests carry them. They are not always the versions served: CAPA v2.13
// serves v1beta2 of its API but implements contract v1beta1
// (cluster.x-k8s.io/v1beta1: v1beta1_v1beta2), and Cluster API reads a
// provider's status by that contract. Sets generated with controller-gen, and
// directories whose kustomization declares no contract, give none.
func contractLabels(set CRDSet) (map[string]map[string]string, error) {
	if set.ControllerGen != "" {
		return nil, nil
	}
	root, err := crds.ModuleDir(set.Module, set.Version, set.Toolchain)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, d := range set.Dirs {
		labels, err := kustomizationContracts(filepath.Join(root, filepath.Dir(d), "kustomization.yaml"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", set.Name, err)
		}
		if len(labels) == 0 {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, d, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			var crd struct {
				Metadata struct{ Name string }
			}
			if err := yaml.Unmarshal(b, &crd); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Metadata.Name != "" {
				out[crd.Metadata.Name] = labels
			}
		}
	}
	return out, nil
}

// kustomizationContracts reads the cluster.x-k8s.io/ labels of a
// kustomization file, in either of kustomize's spellings (commonLabels, or
// labels with pairs). A missing file declares none.
func kustomizationContracts(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var k struct {
		CommonLabels map[string]string `json:"commonLabels"`
		Labels       []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	all := []map[string]string{k.CommonLabels}
	for _, l := range k.Labels {
		all = append(all, l.Pairs)
	}
	labels := map[string]string{}
	for _, m := range all {
		for key, v := range m {
			if strings.HasPrefix(key, "cluster.x-k8s.io/") {
				labels[key] = v
			}
		}
	}
	return labels, nil
}
