// Command krops-orphans reports cloud resources krops created that are still
// there: a read-only scan through the environment's provider plugin.
package main

import (
	"context"
	"os"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/krops-orphans/internal/scan"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	// Every exit path kills the plugins this process started.
	return cli.Run(context.Background(), newApp(), args, pluginhost.RunOptions())
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	app := cli.New(cli.Options{
		Name:      "krops-orphans",
		Usage:     "report krops cloud resources that are still there (read-only)",
		ArgsUsage: "[ENV]",
		Description: `Scans the environment's cloud through its provider plugin and reports every resource krops created:
orphaned when older than ORPHAN_MIN_AGE_HOURS or of unknown age, recent otherwise. It never changes anything.

The Markdown report goes to stdout (or JSON with --output json), is appended to $GITHUB_STEP_SUMMARY when set,
and is written as JSON to ORPHAN_REPORT_JSON when set. Resources that only look like the environment's (a name
that begins like one of ours, with no ownership tag) are listed apart as suspects; no sweep touches them.

A query that fails is listed under Errors and the exit code is 3 (the report is incomplete: what the query covers
is unknown, not absent); the rest of the report is still produced. When the account cannot be read at all there
is no report, also exit 3. An account outside allowed-accounts is refused with exit 2 before anything is read.

ENV is the environment (KROPS_PROFILE wins when set; default: bootstrap.default-environment).`,
		Version: version,
		Knobs:   []string{"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "ORPHAN_MIN_AGE_HOURS", "ORPHAN_REPORT_JSON", "KROPS_PLUGIN_DIR"},
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: scan.OutputMarkdown, Usage: "report format on stdout: markdown or json"},
			&ucli.StringFlag{Name: "since-run", Usage: "only report resources tagged krops.io/run-id=`RUN_ID`"},
			&ucli.StringFlag{Name: "now", Usage: "evaluate ages as of this RFC 3339 `TIME` instead of the clock (reproducible reports)"},
		},
		Action: action,
	})
	return app
}

func action(c *ucli.Context) error {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	now := time.Now()
	if s := c.String("now"); s != "" {
		if now, err = time.Parse(time.RFC3339, s); err != nil {
			return cli.Usagef("--now %q is not an RFC 3339 time (for example 2026-11-30T12:00:00Z)", s)
		}
	}
	_, err = scan.Run(c.Context, scan.Options{
		Config: sel.Config, Environment: sel.Environment, Knobs: sel.Knobs, Lookup: sel.Lookup, Now: now,
		SinceRun: c.String("since-run"), Output: c.String("output"), StepSummary: os.Getenv("GITHUB_STEP_SUMMARY"),
		Stdout: c.App.Writer, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose"),
	})
	return err
}
