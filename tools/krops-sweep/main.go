// Command krops-sweep tears an environment down. Today it provides the
// cloud sweep (`krops-sweep cloud`, also `AWS_ONLY=1 krops-sweep`): the
// recovery path that deletes the environment's cloud resources through its
// provider plugin without a management cluster.
package main

import (
	"context"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/krops-sweep/internal/cloudsweep"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	// Every exit path kills the plugins this process started.
	defer sdk.CleanupClients()
	knobs := []string{"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "AWS_ONLY", "KROPS_PLUGIN_DIR", "CLUSTER_DELETE_TIMEOUT"}
	flags := []ucli.Flag{
		&ucli.BoolFlag{Name: "dry-run", Usage: "print the plan in deletion order and change nothing"},
		&ucli.IntFlag{Name: "max-idle-passes", Value: 5, Usage: "stop after this many passes in which nothing was deleted or still deleting"},
	}
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
		Flags:  flags,
		Action: func(c *ucli.Context) error { return sweep(c) },
	}
	app := cli.New(cli.Options{
		Name:      "krops-sweep",
		Usage:     "tear an environment down",
		ArgsUsage: "[ENV]",
		Description: `With AWS_ONLY=1, krops-sweep [ENV] is krops-sweep cloud [ENV]. The Kubernetes-side teardown (deleting
workload clusters through the management cluster, then the management cluster) is not available yet.`,
		Version:  version,
		Knobs:    knobs,
		Flags:    flags,
		Commands: []*ucli.Command{cloud},
		Action: func(c *ucli.Context) error {
			if v, _ := cli.Lookup(c).Get("AWS_ONLY"); v != "1" {
				return cli.Usagef("the Kubernetes-side teardown is not available yet: run `krops-sweep cloud [ENV]` (or AWS_ONLY=1 krops-sweep [ENV]) to sweep the cloud resources")
			}
			return sweep(c)
		},
	})
	return cli.Run(context.Background(), app, args, cli.RunOptions{BeforeForcedExit: sdk.CleanupClients})
}

func sweep(c *ucli.Context) error {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	if c.Int("max-idle-passes") < 1 {
		return cli.Usagef("--max-idle-passes must be at least 1")
	}
	// CLUSTER_DELETE_TIMEOUT bounds the whole sweep: EKS and RDS deletions
	// take minutes, and the provider reports what is left before it ends.
	ctx, cancel := context.WithTimeout(c.Context, sel.Knobs.ClusterDeleteTimeout)
	defer cancel()
	_, err = cloudsweep.Run(ctx, cloudsweep.Options{
		Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, DryRun: c.Bool("dry-run"), MaxIdlePasses: c.Int("max-idle-passes"),
		Stdout: c.App.Writer, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose"),
	})
	return err
}
