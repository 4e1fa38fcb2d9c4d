//go:build !krops_standin_kind

package kindsetup

import (
	"github.com/kropsdev/krops/tools/kit/bootcluster"
	"github.com/kropsdev/krops/tools/kit/kindlib"
)

// newKind is kind's own library on the detected engine.
func newKind(engine string) (bootcluster.Kind, error) { return kindlib.New(engine, nil) }
