package main

import (
	"testing"

	"github.com/kropsdev/krops/tools/kit/cli/clitest"
)

// docs/cli.md's section for this binary is what its command line renders.
func TestCLIDocIsCurrent(t *testing.T) { clitest.Doc(t, newApp(), "../../docs/cli.md") }
