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
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// Options describe one sweep.
type Options struct {
	Config        *config.Config
	Environment   *config.Environment
	Lookup        config.Lookup
	DryRun        bool
	MaxIdlePasses int
	// Stdout receives the plan and the summary; Printer the events (nil:
	// plain lines on Stdout).
	Stdout, Stderr io.Writer
	Printer        *ui.Progress
	Verbose        bool
	// AfterKubernetes: the full teardown runs this sweep after the
	// Kubernetes side, so the provider's "cloud-only" permission does not
	// apply.
	AfterKubernetes bool
	// Provider is the environment's plugin when the caller has started it
	// already (the teardown, for the whole run); nil loads one for this
	// call. A given plugin is not closed here.
	Provider *sdk.Client
}

// provider returns the plugin to use and what to call when done with it.
func (o Options) provider(ctx context.Context) (*sdk.Client, func(), error) {
	if o.Provider != nil {
		return o.Provider, func() {}, nil
	}
	c, err := pluginhost.Load(ctx, pluginhost.Options{Config: o.Config, Environment: o.Environment, Lookup: o.Lookup, Stderr: o.Stderr, Verbose: o.Verbose})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}

// Summary counts a sweep's outcome.
type Summary struct {
	Planned, Deleted, Skipped int
	// Left maps "kind id (region)" to why it is still there.
	Left map[string]string
}

// ErrLeft means resources in scope are still there after the sweep.
var ErrLeft = errors.New("resources in scope are still there")

// Run sweeps in five named steps: load the provider and check it may
// sweep, discover the scope, report it, sweep it, and verify what is left.
// Exit codes follow from the error: usage (2) when the provider cannot or
// may not sweep, unknown state (3) when the cloud could not be read,
// failure (1) when something is left.
func Run(ctx context.Context, o Options) (Summary, error) {
	r := &run{o: o, out: o.Stdout, pr: o.Printer}
	if r.pr == nil {
		r.pr = ui.New(ui.Options{Out: r.out})
	}
	c, release, err := r.loadSweeper(ctx)
	if err != nil {
		return Summary{}, err
	}
	defer release()
	// No bootstrap preflight here: quotas and the like mean nothing to a
	// teardown. Discover checks what a sweep needs (credentials, and the
	// account against the allow-list) before it lists anything.
	inv, err := discover(ctx, c)
	if err != nil {
		return Summary{}, err
	}
	if !r.reportScope(inv) {
		return Summary{Left: map[string]string{}}, nil
	}
	s, err := r.sweep(ctx, c, inv.scope)
	if err != nil || o.DryRun {
		return s, err
	}
	// A NotFound counted as deleted, and a deletion reported finished, are
	// checked once more by a fresh discovery: the account is what counts.
	if err := verify(ctx, c, inv.scope, s); err != nil {
		return s, err
	}
	return s, r.summarize(s)
}

// run is one sweep's output and options.
type run struct {
	o   Options
	out io.Writer
	pr  *ui.Progress
}

// loadSweeper starts the environment's provider and checks that it can
// sweep and that its teardown policy allows this sweep.
func (r *run) loadSweeper(ctx context.Context) (*sdk.Client, func(), error) {
	o := r.o
	c, release, err := o.provider(ctx)
	if err != nil {
		return nil, nil, err
	}
	d := c.Description()
	if !d.Has(sdk.CapSweep) {
		release()
		return nil, nil, cli.Usagef("environment %s uses provider %s, which cannot sweep cloud resources (it lacks the %s capability); see its teardown policy", o.Environment.Name, c.Name, sdk.CapSweep)
	}
	if d.Has(sdk.CapTeardownPolicy) {
		pol, err := c.TeardownPolicy(ctx)
		if err != nil {
			release()
			return nil, nil, err
		}
		if !pol.CloudOnlySweepAllowed && !o.AfterKubernetes {
			release()
			return nil, nil, cli.Usagef("provider %s does not allow a cloud-only sweep of environment %s", c.Name, o.Environment.Name)
		}
	}
	return c, release, nil
}

// reportScope prints the account, the suspects left alone and the size of
// the scope; false when there is nothing to sweep.
func (r *run) reportScope(inv inventory) bool {
	r.pr.Successf("account %s, regions %s", inv.account, strings.Join(inv.regions, ", "))
	// Without an allow-list the account is whichever the credentials
	// select: a stale AWS_PROFILE sweeps the wrong account by evidence that
	// holds there too. Said before anything is deleted, not refused: the
	// list is optional.
	if inv.account != "" && len(r.o.Environment.AllowedAccounts) == 0 {
		r.pr.Warnf("environments.%s.allowed-accounts is not set: this sweep acts on account %s because the credentials select it; list the accounts this environment may touch to have any other refused", r.o.Environment.Name, inv.account)
	}
	for _, sus := range inv.suspects {
		r.pr.Skippedf("not touched (suspect, not ours by evidence): %s", describe(sus))
	}
	r.pr.Actionf("%s: %d resources in scope", r.o.Environment.Name, len(inv.scope))
	if len(inv.scope) == 0 {
		r.pr.Successf("nothing to sweep")
		return false
	}
	return true
}

// sweep streams the provider's sweep of scope into the printer and the
// summary. An interrupt reports what was deleted and what was in flight.
func (r *run) sweep(ctx context.Context, c *sdk.Client, scope []sdk.Resource) (Summary, error) {
	o, out, pr := r.o, r.out, r.pr
	if o.DryRun {
		fmt.Fprintln(out, "Plan (deletion order; --dry-run: nothing is changed):")
	}
	s := Summary{Left: map[string]string{}}
	step := 0
	// inFlight holds what the provider started deleting and has not
	// reported finished: after an interrupt it is neither deleted nor left.
	inFlight := map[string]bool{}
	err := c.Sweep(ctx, sdk.SweepRequest{DryRun: o.DryRun, Scope: scope, MaxIdlePasses: o.MaxIdlePasses}, func(e sdk.SweepEvent) error {
		name := label(e.Resource)
		switch e.State {
		case sdk.SweepPlanned:
			s.Planned++
			if o.DryRun {
				step++
				fmt.Fprintf(out, "  %3d. %s\n", step, name)
			}
		case sdk.SweepDeleting:
			inFlight[name] = true
			if e.Message != "" {
				pr.Actionf("deleting %s: %s", name, e.Message)
			} else {
				pr.Actionf("deleting %s", name)
			}
		case sdk.SweepRetrying:
			pr.Retryf("%s: %s", name, e.Message)
		case sdk.SweepDeleted:
			s.Deleted++
			delete(s.Left, name)
			delete(inFlight, name)
			msg := ""
			if e.Message != "" {
				msg = " (" + e.Message + ")"
			}
			pr.Successf("deleted %s%s", name, msg)
		case sdk.SweepSkipped:
			s.Skipped++
			pr.Skippedf("skipped %s: %s", name, e.Message)
		case sdk.SweepFailed:
			delete(inFlight, name)
			s.Left[name] = e.Message
			pr.Failuref("%s: %s", name, e.Message)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return s, interrupted(out, s, inFlight, o.Environment.Name)
		}
		return s, unknown(err)
	}
	if o.DryRun {
		pr.Successf("dry run: %d resources would be deleted; nothing was changed", s.Planned)
	}
	return s, nil
}

// summarize prints the counts and what is left, failing when anything is.
func (r *run) summarize(s Summary) error {
	fmt.Fprintf(r.out, "Summary: %d deleted, %d skipped, %d left\n", s.Deleted, s.Skipped, len(s.Left))
	if len(s.Left) == 0 {
		return nil
	}
	var names []string
	for n := range s.Left {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(r.out, "  left: %s: %s\n", n, s.Left[n])
	}
	return fmt.Errorf("%d %w; rerun `krops-sweep cloud %s` once the causes above are fixed", len(s.Left), ErrLeft, r.o.Environment.Name)
}

func unknown(err error) error {
	switch {
	case errors.Is(err, sdk.ErrRefused):
		return cli.UsageError(err)
	case errors.Is(err, sdk.ErrUnknownState):
		return cli.UnknownStateError(err)
	}
	return err
}

// inventory is one discovery's result.
type inventory struct {
	account  string
	regions  []string
	scope    []sdk.Resource
	suspects []sdk.Resource
}

// discover reads the environment's inventory. Anything short of a complete
// read is an unknown state (exit 3, nothing deleted); a refused account is
// a configuration error (exit 2).
// Check reads the environment's cloud scope (nothing is changed): the
// full teardown runs it before its first deletion, so credentials that do
// not work or an account outside allowed-accounts stop it while everything
// is still in place. It returns the account read.
func Check(ctx context.Context, o Options) (string, error) {
	c, release, err := o.provider(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	inv, err := discover(ctx, c)
	return inv.account, err
}

func discover(ctx context.Context, c *sdk.Client) (inventory, error) {
	var inv inventory
	var failures []string
	err := c.Discover(ctx, func(e sdk.DiscoverEvent) error {
		switch {
		case e.Scope != nil:
			inv.account, inv.regions = e.Scope.Account, e.Scope.Regions
		case e.Resource != nil:
			inv.scope = append(inv.scope, *e.Resource)
		case e.Suspect != nil:
			inv.suspects = append(inv.suspects, *e.Suspect)
		case e.Error != nil:
			failures = append(failures, fmt.Sprintf("%s in %s: %s", e.Error.Kind, orAll(e.Error.Region), e.Error.Message))
		}
		return nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return inv, err
	case errors.Is(err, sdk.ErrRefused):
		return inv, cli.UsageError(err)
	case err != nil:
		return inv, cli.UnknownStateError(fmt.Errorf("reading the environment's resources failed, so nothing was deleted: %w", err))
	case len(failures) > 0:
		sort.Strings(failures)
		return inv, cli.UnknownStateError(fmt.Errorf("discovery failed, so the scope is unknown and nothing was deleted:\n  %s", strings.Join(failures, "\n  ")))
	}
	return inv, nil
}

// verify re-discovers after a sweep and moves anything of the scope that is
// still there into s.Left.
func verify(ctx context.Context, c *sdk.Client, scope []sdk.Resource, s Summary) error {
	after, err := discover(ctx, c)
	if err != nil {
		return fmt.Errorf("the sweep ended, but checking what is left failed (run krops-orphans to see): %w", err)
	}
	want := map[string]bool{}
	for _, r := range scope {
		want[r.Kind+"/"+r.ID] = true
	}
	for _, r := range after.scope {
		name := label(r)
		if _, known := s.Left[name]; known {
			continue
		}
		if want[r.Kind+"/"+r.ID] {
			s.Left[name] = "still there after the sweep (reported deleted or skipped); rerun"
		} else {
			s.Left[name] = "appeared during the sweep; rerun"
		}
	}
	return nil
}

// interrupted reports an interrupted sweep: what was deleted, and what was
// in flight and is not known to be gone.
func interrupted(out io.Writer, s Summary, inFlight map[string]bool, env string) error {
	fmt.Fprintf(out, "Interrupted: %d deleted, %d in flight (deletion started, not confirmed), %d left\n", s.Deleted, len(inFlight), len(s.Left))
	var names []string
	for n := range inFlight {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(out, "  in flight: %s\n", n)
	}
	return fmt.Errorf("interrupted before the sweep finished; rerun `krops-sweep cloud %s` to finish it", env)
}

// label names a resource in output and in Summary.Left.
func label(r sdk.Resource) string { return fmt.Sprintf("%s %s (%s)", r.Kind, r.ID, orAll(r.Region)) }

// describe is label with the resource's evidence.
func describe(r sdk.Resource) string {
	if len(r.Evidence) > 0 {
		return label(r) + ": " + strings.Join(r.Evidence, "; ")
	}
	return label(r)
}

func orAll(region string) string {
	if region == "" {
		return "all regions"
	}
	return region
}
