package main

import (
	"testing"

	"github.com/kropsdev/krops/tools/kit/cli/clitest"
	"github.com/kropsdev/krops/tools/testenv"
)

// docs/cli.md's section for this binary is what its command line renders.
func TestCLIDocIsCurrent(t *testing.T) { clitest.Doc(t, newApp(), "../../docs/cli.md") }

// The pivot's crash hooks (one exits 137 in the middle of the move) exist
// only in the harness's builds.
func TestReleaseBuildsCarryNoTestHooks(t *testing.T) {
	testenv.NoTestHooksInRelease(t, ".", "krops-pivot", "KROPS_TEST_PIVOT_STOP_AFTER", "KROPS_TEST_PIVOT_KILL_AFTER_CREATES")
}
