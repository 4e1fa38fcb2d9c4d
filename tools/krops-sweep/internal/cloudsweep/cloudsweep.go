// Package cloudsweep is `krops-sweep cloud`: it deletes what the
// environment's provider discovers for the environment, through the
// provider's Sweep, after checking the provider may do so. It stops before
// deleting anything when the discovery is incomplete.
package cloudsweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/host"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
)

// Options describe one sweep.
type Options struct {
	Config         *config.Config
	Environment    *config.Environment
	Lookup         config.Lookup
	DryRun         bool
	MaxIdlePasses  int
	Stdout, Stderr io.Writer
	Verbose        bool
}

// Summary counts a sweep's outcome.
type Summary struct {
	Planned, Deleted, Skipped int
	// Left maps "kind id (region)" to why it is still there.
	Left map[string]string
}

// ErrLeft means resources in scope are still there after the sweep.
var ErrLeft = errors.New("resources in scope are still there")

// Run sweeps. Exit codes follow from the error: usage (2) when the provider
// cannot or may not sweep, unknown state (3) when the cloud could not be
// read, failure (1) when something is left.
func Run(ctx context.Context, o Options) (Summary, error) {
	out := o.Stdout
	c, err := host.Load(ctx, host.Options{Config: o.Config, Environment: o.Environment, Lookup: o.Lookup, Stderr: o.Stderr, Verbose: o.Verbose})
	if err != nil {
		return Summary{}, err
	}
	defer c.Close()
	d := c.Description()
	if !d.Has(sdk.CapSweep) {
		return Summary{}, cli.Usagef("environment %s uses provider %s, which cannot sweep cloud resources (it lacks the %s capability); see its teardown policy", o.Environment.Name, c.Name, sdk.CapSweep)
	}
	if d.Has(sdk.CapTeardownPolicy) {
		pol, err := c.TeardownPolicy(ctx)
		if err != nil {
			return Summary{}, err
		}
		if !pol.CloudOnlySweepAllowed {
			return Summary{}, cli.Usagef("provider %s does not allow a cloud-only sweep of environment %s", c.Name, o.Environment.Name)
		}
	}
	if d.Has(sdk.CapPreflight) {
		checks, err := c.Preflight(ctx)
		if err != nil {
			return Summary{}, fmt.Errorf("preflight: %w", err)
		}
		for _, ch := range checks {
			mark := "✔"
			if !ch.OK {
				mark = "!"
			}
			fmt.Fprintf(out, "%s %s: %s\n", mark, ch.Name, ch.Message)
		}
	}
	var scope []sdk.Resource
	var failures []string
	account := ""
	err = c.Discover(ctx, func(e sdk.DiscoverEvent) error {
		switch {
		case e.Scope != nil:
			account = e.Scope.Account
		case e.Resource != nil:
			scope = append(scope, *e.Resource)
		case e.Error != nil:
			failures = append(failures, fmt.Sprintf("%s in %s: %s", e.Error.Kind, orAll(e.Error.Region), e.Error.Message))
		}
		return nil
	})
	if err != nil {
		return Summary{}, unknown(err)
	}
	if len(failures) > 0 {
		sort.Strings(failures)
		return Summary{}, cli.UnknownStateError(fmt.Errorf("discovery failed, so the scope is unknown and nothing was deleted:\n  %s", strings.Join(failures, "\n  ")))
	}
	fmt.Fprintf(out, "• %s: %d resources in account %s\n", o.Environment.Name, len(scope), account)
	if len(scope) == 0 {
		fmt.Fprintln(out, "✔ nothing to sweep")
		return Summary{Left: map[string]string{}}, nil
	}
	if o.DryRun {
		fmt.Fprintln(out, "Plan (deletion order; --dry-run: nothing is changed):")
	}
	s := Summary{Left: map[string]string{}}
	step := 0
	err = c.Sweep(ctx, sdk.SweepRequest{DryRun: o.DryRun, Scope: scope, MaxIdlePasses: o.MaxIdlePasses}, func(e sdk.SweepEvent) error {
		name := fmt.Sprintf("%s %s (%s)", e.Resource.Kind, e.Resource.ID, orAll(e.Resource.Region))
		switch e.State {
		case sdk.SweepPlanned:
			s.Planned++
			if o.DryRun {
				step++
				fmt.Fprintf(out, "  %3d. %s\n", step, name)
			}
		case sdk.SweepDeleting:
			if e.Message != "" {
				fmt.Fprintf(out, "• deleting %s: %s\n", name, e.Message)
			} else {
				fmt.Fprintf(out, "• deleting %s\n", name)
			}
		case sdk.SweepRetrying:
			fmt.Fprintf(out, "↻ %s: %s\n", name, e.Message)
		case sdk.SweepDeleted:
			s.Deleted++
			delete(s.Left, name)
			msg := ""
			if e.Message != "" {
				msg = " (" + e.Message + ")"
			}
			fmt.Fprintf(out, "✔ deleted %s%s\n", name, msg)
		case sdk.SweepSkipped:
			s.Skipped++
			fmt.Fprintf(out, "- skipped %s: %s\n", name, e.Message)
		case sdk.SweepFailed:
			s.Left[name] = e.Message
			fmt.Fprintf(out, "✗ %s: %s\n", name, e.Message)
		}
		return nil
	})
	if err != nil {
		return s, unknown(err)
	}
	if o.DryRun {
		fmt.Fprintf(out, "✔ dry run: %d resources would be deleted; nothing was changed\n", s.Planned)
		return s, nil
	}
	fmt.Fprintf(out, "Summary: %d deleted, %d skipped, %d left\n", s.Deleted, s.Skipped, len(s.Left))
	if len(s.Left) > 0 {
		var names []string
		for n := range s.Left {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(out, "  left: %s: %s\n", n, s.Left[n])
		}
		return s, fmt.Errorf("%d %w; rerun `krops-sweep cloud %s` once the causes above are fixed", len(s.Left), ErrLeft, o.Environment.Name)
	}
	return s, nil
}

func unknown(err error) error {
	if errors.Is(err, sdk.ErrUnknownState) {
		return cli.UnknownStateError(err)
	}
	return err
}

func orAll(region string) string {
	if region == "" {
		return "all regions"
	}
	return region
}
