// Package teardownsetup turns the selected environment and the command's
// flags into a checked teardown: the provider plugin (started once, for
// the policy, the preflight and the cloud sweep), the hosts to look for,
// and what removes kind and containers. Its preflight runs every check
// before anything changes and reports every problem at once.
package teardownsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/engine"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/bootcluster"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/helmrelease"
	"github.com/kropsdev/krops/tools/kit/kindsetup"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/cloudsweep"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/teardown"
)

// Params are the command's flags and outputs.
type Params struct {
	DryRun        bool
	QueryTimeout  time.Duration
	MaxIdlePasses int
	Verbose       bool
	Progress      *ui.Progress
	// Out receives progress detail and the plugin's logs.
	Out io.Writer
}

// Setup is a checked teardown, ready to run.
type Setup struct {
	Options teardown.Options
	// Manual, when set, is the provider's steps for an environment krops
	// does not tear down: print them and refuse.
	Manual string
	close  func()
}

// Close stops the plugin.
func (s *Setup) Close() {
	if s.close != nil {
		s.close()
		s.close = nil
	}
}

// Load starts the plugin, reads its teardown policy, runs the preflight
// and builds the teardown's options. The caller closes the setup.
func Load(ctx context.Context, sel *cli.Selected, p Params) (*Setup, error) {
	provider, err := pluginhost.Load(ctx, pluginhost.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: p.Out, Verbose: p.Verbose})
	if err != nil {
		return nil, err
	}
	s := &Setup{close: provider.Close}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	pol := sdk.TeardownPolicy{HostRemoval: sdk.RemoveByDeletingCluster}
	if provider.Description().Has(sdk.CapTeardownPolicy) {
		if pol, err = provider.TeardownPolicy(ctx); err != nil {
			return nil, err
		}
	}
	if pol.HostRemoval == sdk.RemoveManually {
		s.Manual = fmt.Sprintf("Environment %s is torn down by hand; provider %s says:\n%s\n", sel.Environment.Name, provider.Name, pol.Manual)
		for _, n := range pol.Notices {
			s.Manual += fmt.Sprintf("- %s\n", n)
		}
		ok = true
		return s, nil
	}
	for _, n := range pol.Notices {
		p.Progress.Warnf("%s", n)
	}
	for _, sec := range pol.Secrets {
		// Deleted by exact name: a malformed one is the plugin's bug,
		// refused before anything is deleted.
		if ns, name, ok := strings.Cut(sec, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("provider %s's teardown policy names Secret %q, not namespace/name: nothing was deleted; report it to the plugin's authors", provider.Name, sec)
		}
	}
	kind, err := sel.Kind()
	if err != nil {
		return nil, err
	}
	boot := sel.Config.Bootstrap
	o := &s.Options
	*o = teardown.Options{
		Environment: sel.Environment.Name,
		Candidates: []teardown.Host{
			{Name: "kind", Ref: kind},
			{Name: "the management cluster", Ref: sel.Mgmt(), Management: true},
		},
		Namespace: boot.MgmtNamespace, FluxNamespace: boot.FluxNamespace, MgmtCluster: sel.Environment.MgmtCluster, KindCluster: boot.KindCluster,
		InfraProviderName: sel.Environment.InfraProviderName,
		Policy:            pol, CAPIWorkloads: sel.Environment.Teardown.CAPIWorkloads,
		Secrets: append([]string{boot.FluxNamespace + "/" + boot.GitHubPATSecret, boot.FluxNamespace + "/" + boot.SOPSAgeSecret, "default/" + boot.SOPSAgeSecret}, pol.Secrets...),
		Force:   sel.Knobs.ForceKindDelete, DryRun: p.DryRun, QueryTimeout: p.QueryTimeout,
		ClusterTimeout: sel.Knobs.ClusterDeleteTimeout, ProviderTimeout: sel.Knobs.ProviderDeleteTimeout,
		Progress: p.Progress, Out: p.Out,
		UninstallOperator: func(ctx context.Context, h teardown.Host) (bool, error) {
			return helmrelease.Uninstall(helmrelease.Release{Cluster: h.Ref, Name: "flux-operator", Namespace: boot.FluxNamespace})
		},
		DeleteKind: func(ctx context.Context) (bool, error) {
			ks, err := kindsetup.Load(ctx, sel, p.Progress, p.Out)
			if err != nil {
				return false, err
			}
			if err := ks.EngineNeeded(); err != nil {
				return false, err
			}
			return bootcluster.Down(ctx, ks.Options)
		},
		ListContainers: func(ctx context.Context, prefix string) ([]string, error) {
			eng, err := detectEngine(ctx, sel)
			if err != nil {
				return nil, err
			}
			return listContainers(ctx, eng, prefix)
		},
		RemoveContainers: func(ctx context.Context, names []string) error {
			eng, err := detectEngine(ctx, sel)
			if err != nil {
				return err
			}
			return removeContainers(ctx, eng, names)
		},
	}
	// Preflight, before anything changes: the cloud side is readable with
	// these credentials in an allowed account, and an engine answers where
	// the host goes through one. Both run; both problems are reported.
	var problems cli.Preflight
	if provider.Description().Has(sdk.CapSweep) {
		opts := cloudsweep.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: p.Out, Verbose: p.Verbose, Provider: provider}
		problems.Add(p.Progress.Step(ctx, "preflight: reading the cloud side", func(ctx context.Context) error {
			account, err := cloudsweep.Check(ctx, opts)
			if err == nil {
				p.Progress.Infof("account %s", account)
			}
			return err
		}))
		if ctx.Err() != nil {
			// Interrupted: say so, not what the other checks would fail on.
			return nil, problems.Err("preflight interrupted, nothing was changed")
		}
	}
	if !p.DryRun {
		_, err := detectEngine(ctx, sel)
		switch {
		case err != nil && pol.HostRemoval == sdk.RemoveContainers:
			// Its whole host is containers: nothing of it can go.
			problems.Add(cli.UsageError(fmt.Errorf("environment %s runs on containers and no container engine answers: %w", sel.Environment.Name, err)))
		case err != nil:
			p.Progress.Warnf("no container engine answers (%v): the Kubernetes side and the cloud can go, but kind cannot be removed until one does", err)
		}
	}
	if err := problems.Err("preflight failed, nothing was changed"); err != nil {
		return nil, err
	}
	if provider.Description().Has(sdk.CapSweep) {
		o.CloudSweep = func(ctx context.Context, dryRun bool) error {
			ctx, cancel := context.WithTimeout(ctx, sel.Knobs.ClusterDeleteTimeout)
			defer cancel()
			_, err := cloudsweep.Run(ctx, cloudsweep.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, DryRun: dryRun, Provider: provider,
				MaxIdlePasses: p.MaxIdlePasses, Stdout: p.Out, Stderr: p.Out, Printer: p.Progress, Verbose: p.Verbose, AfterKubernetes: true})
			return err
		}
	}
	ok = true
	return s, nil
}

// detectEngine finds the container engine the environment's knobs name.
func detectEngine(ctx context.Context, sel *cli.Selected) (*engine.Engine, error) {
	ctxHost, _ := os.LookupEnv("CONTAINER_HOST")
	eng, err := engine.Detect(ctx, engine.Options{
		Engine: sel.Knobs.ContainerEngine, Sock: sel.Knobs.EngineSock, Toolbox: sel.Knobs.Toolbox, ContainerHost: ctxHost, Env: os.Environ(),
		Runner: proc.Exec{OwnGroup: true}, Waiting: func(m string) { fmt.Fprintln(os.Stderr, m) },
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, engine.ErrTimeout) {
		// The engine exists and does not answer: what runs on it is unknown.
		return nil, cli.UnknownStateError(err)
	}
	if err != nil {
		return nil, cli.UsageError(err)
	}
	return eng, nil
}

// listContainers lists the containers named <prefix> or <prefix>-… (CAPD
// names a cluster's containers <cluster>-lb, <cluster>-control-plane-…). A
// name that merely starts with the same letters (<prefix>ish) belongs to
// something else.
func listContainers(ctx context.Context, eng *engine.Engine, prefix string) ([]string, error) {
	res, err := eng.Run(ctx, "ps", "-a", "--filter", "name=^"+prefix, "--format", "{{.Names}}")
	if err != nil {
		return nil, fmt.Errorf("listing containers named %s*: %w", prefix, err)
	}
	var names []string
	for _, n := range strings.Fields(string(res.Stdout)) {
		// The engine's filter is a regular expression on the name; the
		// boundary is checked here.
		if n == prefix || strings.HasPrefix(n, prefix+"-") {
			names = append(names, n)
		}
	}
	return names, nil
}

// removeContainers removes names in order; one that is already gone counts
// as removed (a rerun after an interrupted removal).
func removeContainers(ctx context.Context, eng *engine.Engine, names []string) error {
	for _, n := range names {
		if _, err := eng.Run(ctx, "rm", "-f", "-v", n); err != nil && !strings.Contains(err.Error(), "No such container") {
			return fmt.Errorf("removing container %s: %w", n, err)
		}
	}
	return nil
}
