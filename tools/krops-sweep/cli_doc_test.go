package main

import (
	"testing"

	"github.com/kropsdev/krops/tools/kit/cli/clitest"
	"github.com/kropsdev/krops/tools/testenv"
)

// docs/cli.md's section for this binary is what its command line renders.
func TestCLIDocIsCurrent(t *testing.T) { clitest.Doc(t, newApp(), "../../docs/cli.md") }

// The teardown's stop point exists only in the harness's builds.
func TestReleaseBuildsCarryNoTestHooks(t *testing.T) {
	testenv.NoTestHooksInRelease(t, ".", "krops-sweep", "KROPS_TEST_TEARDOWN_STOP_AFTER")
}
