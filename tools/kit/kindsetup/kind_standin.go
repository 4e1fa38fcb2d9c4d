//go:build krops_standin_kind

package kindsetup

import (
	"fmt"
	"os"

	"github.com/kropsdev/krops/tools/kit/bootcluster"
	"github.com/kropsdev/krops/tools/kit/kindstandin"
)

// newKind, in binaries built for the end-to-end test, is the STAND-IN
// harness instead of kind (see package kindstandin).
func newKind(string) (bootcluster.Kind, error) {
	u := os.Getenv(kindstandin.EnvURL)
	if u == "" {
		return nil, fmt.Errorf("this binary was built with the krops_standin_kind tag for the end-to-end test and needs %s; use a release build", kindstandin.EnvURL)
	}
	return kindstandin.New(u)
}
