package main

import (
	"testing"

	"github.com/kropsdev/krops/tools/testenv"
)

// docs/cli.md's section for this binary is what its command line renders.
func TestCLIDocIsCurrent(t *testing.T) { testenv.CLIDoc(t, newApp(), "../../docs/cli.md") }
