// Package scan runs an orphan scan: it loads the environment's provider,
// streams its Discover results into a report and writes the report where it
// was asked for. It never calls anything but read-only provider RPCs.
package scan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/krops-orphans/internal/report"
)

// Output formats.
const (
	OutputMarkdown = "markdown"
	OutputJSON     = "json"
)

// Options describe one scan.
type Options struct {
	Config      *config.Config
	Environment *config.Environment
	Knobs       *config.Knobs
	Lookup      config.Lookup
	Now         time.Time
	SinceRun    string
	Output      string
	// StepSummary is $GITHUB_STEP_SUMMARY; the Markdown report is appended.
	StepSummary    string
	Stdout, Stderr io.Writer
	Verbose        bool
}

// ErrQueriesFailed means the report was produced but some queries failed:
// what they cover is unknown (exit 3).
var ErrQueriesFailed = errors.New("some discovery queries failed, so the report is incomplete: what they cover is unknown, not absent (the report lists them)")

// Run scans and writes the report.
func Run(ctx context.Context, o Options) (report.Report, error) {
	if o.Output != OutputMarkdown && o.Output != OutputJSON {
		return report.Report{}, cli.Usagef("--output %q is not valid: want %s or %s", o.Output, OutputMarkdown, OutputJSON)
	}
	if err := checkOutputPath(o.Knobs.OrphanReportJSON); err != nil {
		return report.Report{}, err
	}
	c, err := pluginhost.Load(ctx, pluginhost.Options{Config: o.Config, Environment: o.Environment, Lookup: o.Lookup, Stderr: o.Stderr, Verbose: o.Verbose})
	if err != nil {
		return report.Report{}, err
	}
	defer c.Close()
	if !c.Description().Has(sdk.CapDiscover) {
		return report.Report{}, cli.Usagef("environment %s uses provider %s, which cannot discover cloud resources, so there is nothing to report (the capability it lacks: %s)",
			o.Environment.Name, c.Name, sdk.CapDiscover)
	}
	b := report.NewBuilder(report.Options{
		Environment: o.Environment.Name, Now: o.Now, MinAgeHours: o.Knobs.OrphanMinAgeHours, SinceRun: o.SinceRun,
		Remediation: "krops-sweep cloud " + o.Environment.Name,
	})
	scoped := false
	streamErr := c.Discover(ctx, func(e sdk.DiscoverEvent) error {
		scoped = scoped || e.Scope != nil
		b.Add(e)
		return nil
	})
	switch {
	case streamErr == nil:
	case ctx.Err() != nil:
		return report.Report{}, ctx.Err()
	case errors.Is(streamErr, sdk.ErrRefused):
		// Nothing was read: no report, and no sweep to suggest.
		return report.Report{}, cli.UsageError(streamErr)
	case !scoped:
		// The account itself could not be read: a report would claim an
		// empty account it never saw.
		return report.Report{}, cli.UnknownStateError(fmt.Errorf("nothing could be read, so there is no report: %w", streamErr))
	default:
		b.Add(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: "discover", Message: streamErr.Error()}})
	}
	r := b.Report()
	if err := write(r, o); err != nil {
		return r, err
	}
	if len(r.Errors) > 0 {
		return r, cli.UnknownStateError(ErrQueriesFailed)
	}
	return r, nil
}

// checkOutputPath refuses, before a scan that may take minutes, a report
// path that cannot be written: a directory, or one whose parent is missing.
func checkOutputPath(p string) error {
	if p == "" {
		return nil
	}
	if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() {
		return cli.Usagef("ORPHAN_REPORT_JSON=%s is not a regular file (%s): name a file to write the report to", p, fi.Mode().Type())
	}
	if fi, err := os.Stat(filepath.Dir(p)); err != nil || !fi.IsDir() {
		return cli.Usagef("ORPHAN_REPORT_JSON=%s: its directory %s does not exist", p, filepath.Dir(p))
	}
	return nil
}

func write(r report.Report, o Options) error {
	var err error
	if o.Output == OutputJSON {
		err = r.WriteJSON(o.Stdout)
	} else {
		err = r.WriteMarkdown(o.Stdout)
	}
	if err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if p := o.Knobs.OrphanReportJSON; p != "" {
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("ORPHAN_REPORT_JSON: %w", err)
		}
		if err := r.WriteJSON(f); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", p, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	if o.StepSummary != "" {
		f, err := os.OpenFile(o.StepSummary, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
		if err := r.WriteMarkdown(f); err != nil {
			f.Close()
			return fmt.Errorf("appending to %s: %w", o.StepSummary, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("appending to %s: %w", o.StepSummary, err)
		}
	}
	return nil
}
