package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/engine"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/krops-flux-seed/helmrelease"
	"github.com/kropsdev/krops/tools/krops-kind/bootcluster"
	"github.com/kropsdev/krops/tools/krops-kind/kindsetup"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/cloudsweep"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/teardown"
)

func teardownAction(c *ucli.Context) error {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return cli.Usagef("--output %q: want text or json", format)
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	// Two teardowns, or a teardown and a bootstrap or pivot, of one kind
	// cluster never run at once.
	lk, err := kindsetup.Hold(sel.Config.Bootstrap.KindCluster, sel.Knobs.RunID, prog)
	if err != nil {
		return err
	}
	defer lk.Release()
	if sel.Knobs.AWSOnly {
		return sweep(c, sel)
	}
	provider, err := pluginhost.Load(c.Context, pluginhost.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")})
	if err != nil {
		return err
	}
	defer provider.Close()
	pol := sdk.TeardownPolicy{HostRemoval: sdk.RemoveByDeletingCluster}
	if provider.Description().Has(sdk.CapTeardownPolicy) {
		if pol, err = provider.TeardownPolicy(c.Context); err != nil {
			return err
		}
	}
	if pol.HostRemoval == sdk.RemoveManually {
		fmt.Fprintf(c.App.Writer, "Environment %s is torn down by hand; provider %s says:\n%s\n", sel.Environment.Name, provider.Name, pol.Manual)
		for _, n := range pol.Notices {
			fmt.Fprintf(c.App.Writer, "- %s\n", n)
		}
		return cli.Usagef("krops does not tear %s down: follow the steps above", sel.Environment.Name)
	}
	for _, n := range pol.Notices {
		prog.Warnf("%s", n)
	}
	home, _ := os.UserHomeDir()
	kubeconfig, err := kubecfg.Path(sel.Knobs.Kubeconfig, home)
	if err != nil {
		return cli.UsageError(err)
	}
	boot := sel.Config.Bootstrap
	o := teardown.Options{
		Environment: sel.Environment.Name,
		Candidates: []teardown.Host{
			{Name: "kind", Kubeconfig: kubeconfig, Context: boot.KindContext},
			{Name: "the management cluster", Kubeconfig: sel.Knobs.MgmtKubeconfig, Context: boot.MgmtContext, Management: true},
		},
		Namespace: boot.MgmtNamespace, FluxNamespace: boot.FluxNamespace, MgmtCluster: sel.Environment.MgmtCluster,
		InfraProviderName: sel.Environment.InfraProviderName,
		Policy:            pol, CAPIWorkloads: sel.Environment.Teardown.CAPIWorkloads,
		Secrets: []string{boot.FluxNamespace + "/" + boot.GitHubPATSecret, boot.FluxNamespace + "/" + boot.SOPSAgeSecret, "default/" + boot.SOPSAgeSecret},
		Force:   sel.Knobs.ForceKindDelete, DryRun: c.Bool("dry-run"), QueryTimeout: c.Duration("query-timeout"),
		ClusterTimeout: sel.Knobs.ClusterDeleteTimeout, ProviderTimeout: sel.Knobs.ProviderDeleteTimeout,
		Progress: prog, Out: c.App.ErrWriter,
		// Test-only: end the run at a step boundary, as a crash would.
		StopAfter: os.Getenv("KROPS_TEST_TEARDOWN_STOP_AFTER"),
		UninstallOperator: func(ctx context.Context, h teardown.Host) (bool, error) {
			return helmrelease.Uninstall(helmrelease.Release{Kubeconfig: h.Kubeconfig, Context: h.Context, Name: "flux-operator", Namespace: boot.FluxNamespace})
		},
		DeleteKind: func(ctx context.Context) (bool, error) {
			ks, err := kindsetup.Load(ctx, sel, prog, c.App.ErrWriter)
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
	// the host goes through one.
	if provider.Description().Has(sdk.CapSweep) {
		opts := cloudsweep.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")}
		if err := prog.Step(c.Context, "preflight: reading the cloud side", func(ctx context.Context) error {
			account, err := cloudsweep.Check(ctx, opts)
			if err == nil {
				prog.Infof("account %s", account)
			}
			return err
		}); err != nil {
			return err
		}
	}
	if !c.Bool("dry-run") && !sel.Knobs.AWSOnly {
		_, err := detectEngine(c.Context, sel)
		switch {
		case err != nil && pol.HostRemoval == sdk.RemoveContainers:
			// Its whole host is containers: nothing of it can go.
			return cli.UsageError(fmt.Errorf("environment %s runs on containers and no container engine answers: %w; nothing was changed", sel.Environment.Name, err))
		case err != nil:
			prog.Warnf("no container engine answers (%v): the Kubernetes side and the cloud can go, but kind cannot be removed until one does", err)
		}
	}
	if provider.Description().Has(sdk.CapSweep) {
		o.CloudSweep = func(ctx context.Context, dryRun bool) error {
			ctx, cancel := context.WithTimeout(ctx, sel.Knobs.ClusterDeleteTimeout)
			defer cancel()
			_, err := cloudsweep.Run(ctx, cloudsweep.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, DryRun: dryRun,
				MaxIdlePasses: c.Int("max-idle-passes"), Stdout: c.App.ErrWriter, Stderr: c.App.ErrWriter, Printer: prog, Verbose: c.Bool("verbose"), AfterKubernetes: true})
			return err
		}
	}
	sum, err := teardown.Run(c.Context, o)
	printSummary(c, format, sum)
	switch {
	case errors.Is(err, teardown.ErrOtherEnvironment):
		return cli.UsageError(err)
	case errors.Is(err, teardown.ErrUnknownState):
		return cli.UnknownStateError(err)
	}
	return err
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

func printSummary(c *ucli.Context, format string, sum *teardown.Summary) {
	if sum == nil {
		return
	}
	if format == "json" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Fprintln(c.App.Writer, string(b))
		return
	}
	w := c.App.Writer
	verb := "Deleted"
	if sum.DryRun {
		verb = "Would delete (dry run; nothing was changed)"
	}
	fmt.Fprintf(w, "Teardown of %s (controller host: %s)\n", sum.Environment, sum.Host)
	for _, sec := range []struct {
		title string
		items []string
	}{{verb, sum.Deleted}, {"Skipped", sum.Skipped}, {"Left", sum.Left}} {
		if len(sec.items) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", sec.title)
		for _, it := range sec.items {
			fmt.Fprintf(w, "  - %s\n", it)
		}
	}
	if sum.Next != "" {
		fmt.Fprintf(w, "Next: %s\n", sum.Next)
	}
}
