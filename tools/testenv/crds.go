package testenv

import (
	"testing"

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
