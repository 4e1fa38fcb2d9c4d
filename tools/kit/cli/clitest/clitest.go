// Package clitest holds what every binary's tests check about its command
// line. Only tests import it.
package clitest

import (
	"os"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
)

// Doc fails t when docs/cli.md's section for app (page, from the test) is
// not what the app renders, and rewrites the section instead under
// KROPS_UPDATE_DOCS=1 (what `task docs` sets).
func Doc(t testing.TB, app *ucli.App, page string) {
	t.Helper()
	if err := cli.CheckDoc(app, page, os.Getenv("KROPS_UPDATE_DOCS") == "1"); err != nil {
		t.Fatal(err)
	}
}
