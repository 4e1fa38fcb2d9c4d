// Command krops-sweep tears an environment down in reverse order of its
// bootstrap (`krops-sweep [ENV]`), or sweeps only its cloud resources
// (`krops-sweep cloud`, also `AWS_ONLY=1 krops-sweep`), the recovery path
// without a management cluster.
package main

import (
	"context"
	"os"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kindsetup"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/cloudsweep"
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
	knobs := []string{"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "AWS_ONLY", "KROPS_PLUGIN_DIR", "CLUSTER_DELETE_TIMEOUT", "PROVIDER_DELETE_TIMEOUT",
		"FORCE_KIND_DELETE", "KUBECONFIG", "BOOTSTRAP_KUBECONTEXT", "KROPS_KIND_CLUSTER", "MGMT_KUBECONFIG", "KROPS_TOOLBOX",
		"CONTAINER_ENGINE", "ENGINE_SOCK", "KROPS_RUN_ID"}
	flags := []ucli.Flag{
		&ucli.BoolFlag{Name: "dry-run", Usage: "print the plan in deletion order and change nothing"},
		&ucli.IntFlag{Name: "max-idle-passes", Value: 5, Usage: "stop after this many passes in which nothing was deleted or still deleting"},
	}
	teardownFlags := append([]ucli.Flag{
		&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "summary format: text or json (on stdout)"},
		&ucli.DurationFlag{Name: "query-timeout", Value: 30 * time.Second, Usage: "bound on each Kubernetes query, and on the API server's silence during a wait; one that runs out leaves the state unknown (exit 3)"},
	}, flags...)
	cloud := &ucli.Command{
		Name:      "cloud",
		Usage:     "delete the environment's cloud resources through its provider (recovery path)",
		ArgsUsage: "[ENV]",
		Description: `Discovers everything krops owns for the environment and deletes exactly that, in dependency order,
retrying what is blocked. A resource is in scope only by evidence: an ownership tag of one of the environment's
clusters, an exact name bootstrap.toml or the provider's documented naming derives, or a confirmed edge from a
resource in scope (docs/operations.md lists the rule for every kind). Resources that only look like ours are
printed as suspects and never touched. After deleting, a fresh discovery confirms what is gone.

Exit codes: 2 when the provider cannot or may not sweep, or the account is outside allowed-accounts (nothing
was read); 3 when credentials, the endpoint or any query failed before deleting (nothing was deleted); 1 when
something in scope is still there afterwards, or the sweep was interrupted (rerun to finish). Use --dry-run first.`,
		Flags: flags,
		Action: func(c *ucli.Context) error {
			sel, err := cli.SelectEnvironment(c)
			if err != nil {
				return err
			}
			lk, err := kindsetup.Hold(sel.Config.Bootstrap.KindCluster, sel.Knobs.RunID, cli.Printer(c, c.App.ErrWriter))
			if err != nil {
				return err
			}
			defer lk.Release()
			return sweep(c, sel)
		},
	}
	app := cli.New(cli.Options{
		Name:      "krops-sweep",
		Usage:     "tear an environment down",
		ArgsUsage: "[ENV]",
		Description: `Tears the environment down in reverse order, on the controller host that answers first (kind, else the
management cluster through MGMT_KUBECONFIG; each within 10 s). A management cluster that carries a run's metadata
(an earlier pivot moved the Clusters there) is the host even when kind still answers, and that kind goes in step 6;
a management context whose cluster does not answer while kind does is unknown state (exit 3, nothing changed).
  1. the Flux Kustomizations that own Services of type LoadBalancer are deleted (not suspended: a suspended
     Kustomization does not prune, and the cloud load balancer would stay), and the Services waited out;
  2. every other Kustomization in the Flux namespace is suspended;
  3. the workload Clusters are deleted (local-host: teardown.capi-workloads, and on kind its management Cluster
     too; aws: every Cluster but the management one; local-talos: all of them) and watched until Cluster API has
     removed them (CLUSTER_DELETE_TIMEOUT);
  4. the provider's cloud sweep (aws: every resource in scope, the management cluster's included);
  5. the Cluster API providers (addons first, core last; PROVIDER_DELETE_TIMEOUT); Flux's own objects while its
     controllers run (ResourceSets, then every Kustomization and HelmRelease, suspended first so nothing is pruned,
     and the sources; a suspended one not finalized within 10 s has Flux's finalizer removed by krops); the
     FluxInstance, the Flux Operator release and the Secrets krops created;
  6. the controller host (kind; local-host's management containers and then the registry) — only when step 3
     confirmed every Cluster gone, or with FORCE_KIND_DELETE=1 — and then the management context, once that
     cluster is gone.
Any query that does not answer clearly (30 s each) stops before the step that needed it, keeps the host running
and exits 3. Environments whose provider says teardown is manual (azure, gcp) are refused with its steps (exit 2).
With AWS_ONLY=1 it is krops-sweep cloud [ENV]. --dry-run prints the whole plan and changes nothing. docs/operations.md
has the details.`,
		Version:  version,
		Knobs:    knobs,
		Flags:    teardownFlags,
		Commands: []*ucli.Command{cloud},
		Action:   teardownAction,
	})
	return app
}

func sweep(c *ucli.Context, sel *cli.Selected) error {
	if c.Int("max-idle-passes") < 1 {
		return cli.Usagef("--max-idle-passes must be at least 1")
	}
	// CLUSTER_DELETE_TIMEOUT bounds the whole sweep: EKS and RDS deletions
	// take minutes, and the provider reports what is left before it ends.
	ctx, cancel := context.WithTimeout(c.Context, sel.Knobs.ClusterDeleteTimeout)
	defer cancel()
	_, err := cloudsweep.Run(ctx, cloudsweep.Options{
		Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, DryRun: c.Bool("dry-run"), MaxIdlePasses: c.Int("max-idle-passes"),
		Stdout: c.App.Writer, Stderr: c.App.ErrWriter, Printer: cli.Printer(c, c.App.Writer), Verbose: c.Bool("verbose"),
	})
	return err
}
