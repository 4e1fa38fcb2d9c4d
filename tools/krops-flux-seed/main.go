// Command krops-flux-seed hands a cluster over to Flux: the Flux Operator,
// the run metadata, the secrets Flux reads with, the local config artifact
// (sync = oci), the FluxInstance, and watch-based waits until Flux has taken
// over. It works on whatever cluster it is pointed at, by an explicit
// kubeconfig and context.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/seed"
	"github.com/kropsdev/krops/tools/kit/seedconfig"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

var knobs = []string{
	"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KUBECONFIG", "KROPS_REGISTRY_NAME",
	"REGISTRY_PORT", "GIT_REPO_URL", "GITHUB_USER", "AGE_KEY_FILE", "AGE_PUBLIC_KEY", "OCI_REPOSITORY", "OCI_TAG",
	"KROPS_CHART_REPOSITORY", "KROPS_PROVIDER_REPOSITORY", "KROPS_FLUX_REGISTRY", "LOCAL_RECONCILE_TIMEOUT", "KROPS_TOOLBOX", "KROPS_PLUGIN_DIR", "KROPS_RUN_ID", "KROPS_RUN_TTL", "KROPS_REVISION", "KROPS_RUN_KIND",
}

func run(args []string) int {
	// Every exit path kills the plugins this process started.
	return cli.Run(context.Background(), newApp(), args, pluginhost.RunOptions())
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	seedFlags := []ucli.Flag{
		&ucli.StringFlag{Name: "context", Usage: "kubeconfig context of the cluster to seed (default: the kind cluster's context)"},
		&ucli.StringFlag{Name: "copy-run-from", Usage: "copy the krops-run ConfigMap exactly from `KUBECONFIG[:CONTEXT]` instead of writing new run metadata"},
		&ucli.StringFlag{Name: "registry-in-cluster", Usage: "registry address the cluster pulls the artifact from (sync = oci; default: <registry-name>:5000)"},
		&ucli.StringSliceFlag{Name: "wait-for", Usage: "also wait for this Kustomization in the Flux namespace (repeatable; flux-system always)"},
		&ucli.BoolFlag{Name: "no-follow", Usage: "wait for the FluxInstance, flux-system and --wait-for only, not the environment's [seed] chain"},
		&ucli.BoolFlag{Name: "no-wait", Usage: "apply and return without waiting for Flux"},
		&ucli.DurationFlag{Name: "query-timeout", Value: budget.APIRequest, Usage: "how long the seeded cluster's API server may stay silent while the seed waits for Flux before the state is unknown (exit 3); 0 waits out LOCAL_RECONCILE_TIMEOUT. A workload cluster's own Flux is waited for without it"},
		&ucli.BoolFlag{Name: "from-bootstrap", Usage: "called as bootstrap's step: a cluster a pivot is under way on is left to the pivot (exit 0) instead of refused"},
	}
	app := cli.New(cli.Options{
		Name:      "krops-flux-seed",
		Usage:     "hand a cluster over to Flux",
		ArgsUsage: "[ENV]",
		Description: `Installs the Flux Operator (Helm, chart [charts] flux-operator), writes the run metadata (ConfigMap krops-run),
the secrets Flux reads the repository with (sync = github: flux-github-pat, sops-age), publishes the local config
artifact (sync = oci), applies the FluxInstance "flux", and waits by watch until it and the flux-system
Kustomization are Ready. It then follows the environment's chain ([environments.<env>.seed]): the Kustomizations
listed in "wait", then each workload cluster in "workloads" through the kubeconfig Secret Cluster API writes for
it, until that cluster's own flux-system is Ready. LOCAL_RECONCILE_TIMEOUT bounds each stage; on timeout the
blocking objects are listed with Flux's messages. Ctrl-C stops a wait cleanly (nothing is undone; rerun to go on).

Every step is idempotent: a rerun on a seeded cluster changes nothing. The preflight runs first and nothing
changes unless it passes. A cluster a pivot is under way on (krops-pivot suspended its Flux before the move) is not
seeded again, since that could resume Flux against the move: exit 2, or, with --from-bootstrap (what task bootstrap
passes), a notice and exit 0 so that the pivot, bootstrap's next step, resumes.

The cluster is named explicitly: --kubeconfig (KUBECONFIG, one file) and --context (default: the kind context).
Secret values (GITHUB_TOKEN, the age key) come from the environment and a file, never from arguments, and never
appear in output. docs/flux-seed.md has the details.`,
		Version: version,
		Knobs:   knobs,
		Flags:   seedFlags,
		Action:  seedAction,
		Commands: []*ucli.Command{
			{Name: "preflight", Usage: "check the GitHub repository, branch and token (sync = github) and the age key; changes nothing", ArgsUsage: "[ENV]", Action: preflightAction},
			{Name: "publish", Usage: "pack the trees the environment syncs and push them to the local registry (sync = oci)", ArgsUsage: "[ENV]", Action: publishAction,
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "ref", Usage: "push to `REGISTRY/REPOSITORY:TAG` instead of REGISTRY_HOST:REGISTRY_PORT/OCI_REPOSITORY:OCI_TAG"},
					&ucli.BoolFlag{Name: "reconcile", Usage: "then ask Flux to fetch it now (OCIRepository flux-system on the kind cluster and on the management cluster, each that has one)"},
				}},
		},
	})
	return app
}

func check(c *ucli.Context) (*seedconfig.Checked, error) {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return nil, err
	}
	return seedconfig.Check(c.Context, sel)
}

func preflightAction(c *ucli.Context) error {
	ch, err := check(c)
	if err != nil {
		return err
	}
	out := cli.Printer(c, c.App.Writer)
	if ch.Sel.Environment.Sync == seed.SyncGitHub {
		out.Successf("GitHub branch %s at %s", ch.Sel.Config.Bootstrap.GitBranch, ch.Revision)
		out.Successf("age key %s", ch.Age.Public)
	} else {
		out.Successf("sync = %s: nothing to check before seeding", ch.Sel.Environment.Sync)
	}
	return nil
}

func publishAction(c *ucli.Context) error {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	if sel.Environment.Sync != seed.SyncOCI {
		return cli.Usagef("environment %s syncs from %s, not from an OCI artifact: nothing to publish", sel.Environment.Name, sel.Environment.Sync)
	}
	ref := c.String("ref")
	if ref == "" {
		ref = seedconfig.LocalRef(sel)
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	if err := seedconfig.Publish(c.Context, sel, ref, prog); err != nil {
		return err
	}
	if !c.Bool("reconcile") {
		return nil
	}
	kind, err := sel.Kind()
	if err != nil {
		return err
	}
	return seedconfig.Reconcile(c.Context, sel.Config.Bootstrap.FluxNamespace, []kubecfg.Ref{kind, sel.Mgmt()}, prog)
}

func seedAction(c *ucli.Context) error {
	ch, err := check(c)
	if err != nil {
		return err
	}
	sel := ch.Sel
	prog := cli.Printer(c, c.App.ErrWriter)
	kind, err := sel.Kind()
	if err != nil {
		return err
	}
	if kctx := c.String("context"); kctx != "" {
		kind.Context = kctx
	}
	p := seedconfig.Params{
		Cluster:           kind,
		RegistryInCluster: c.String("registry-in-cluster"), WaitFor: c.StringSlice("wait-for"), NoFollow: c.Bool("no-follow"), NoWait: c.Bool("no-wait"),
		QueryTimeout: c.Duration("query-timeout"),
		Progress:     prog, PluginStderr: c.App.ErrWriter, Verbose: c.Bool("verbose"),
	}
	if from := c.String("copy-run-from"); from != "" {
		path, fctx, _ := strings.Cut(from, ":")
		p.CopyFrom = &kubecfg.Ref{Path: path, Context: fctx}
	}
	o, release, err := seedconfig.Options(c.Context, ch, p)
	defer release()
	if err != nil {
		return err
	}
	err = seed.Seed(c.Context, o)
	if errors.Is(err, seed.ErrPivoting) {
		if c.Bool("from-bootstrap") {
			prog.Warnf("%v: not seeding it again; the pivot resumes next", err)
			return nil
		}
		return cli.UsageError(fmt.Errorf("%w; nothing was changed. Finish the pivot with `task pivot ENV=%s` (it resumes), or, to start over, `task teardown ENV=%s`", err, sel.Environment.Name, sel.Environment.Name))
	}
	var te *kubewait.TimeoutError
	var silent *kubewait.SilentError
	var we *seed.WorkloadError
	where := "the FluxInstance and Kustomizations were"
	if errors.As(err, &we) {
		where = "workload cluster " + we.Cluster + "'s Flux was"
	}
	switch {
	case errors.As(err, &te):
		fmt.Fprintln(c.App.ErrWriter, "Blocking:")
		for _, s := range te.Blocking {
			fmt.Fprintf(c.App.ErrWriter, "  %s\n", s)
		}
		return fmt.Errorf("%s not Ready within LOCAL_RECONCILE_TIMEOUT (%s); rerun `krops-flux-seed %s` once the blocking objects above are fixed", where, te.Timeout, sel.Environment.Name)
	case errors.As(err, &silent):
		return cli.UnknownStateError(fmt.Errorf("context %s: %w while the seed waited for Flux; everything applied so far stays, nothing was undone: rerun `krops-flux-seed %s` once it answers", kind.Context, silent, sel.Environment.Name))
	case errors.Is(err, kubewait.ErrInterrupted):
		return fmt.Errorf("%w; everything applied so far stays; rerun `krops-flux-seed %s` to go on", err, sel.Environment.Name)
	case errors.Is(err, seed.ErrRunMetadata):
		return cli.UsageError(err)
	}
	return err
}
