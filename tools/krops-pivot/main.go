// Command krops-pivot hands the Cluster API inventory from the kind
// bootstrap cluster to the self-managed management cluster, then deletes
// kind. Every step can be rerun; rerunning after a failure resumes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	ucli "github.com/urfave/cli/v2"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubeapply"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/seed"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/install"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/pivot"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/pivotsetup"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

var knobs = []string{
	"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KUBECONFIG", "MGMT_KUBECONFIG",
	"MGMT_READY_TIMEOUT", "MGMT_POLL_INTERVAL", "PIVOT_SKIP_DELETE", "KROPS_TOOLBOX", "KROPS_PLUGIN_DIR", "CONTAINER_ENGINE", "ENGINE_SOCK",
	"KROPS_REGISTRY_NAME", "REGISTRY_PORT", "GIT_REPO_URL", "GITHUB_USER", "AGE_KEY_FILE", "AGE_PUBLIC_KEY",
	"OCI_REPOSITORY", "OCI_TAG", "KROPS_CHART_REPOSITORY", "KROPS_PROVIDER_REPOSITORY", "KROPS_FLUX_REGISTRY", "LOCAL_RECONCILE_TIMEOUT", "KROPS_RUN_ID",
}

func run(args []string) int {
	// Every exit path kills the plugins this process started.
	return cli.Run(context.Background(), newApp(), args, pluginhost.RunOptions())
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	app := cli.New(cli.Options{
		Name:      "krops-pivot",
		Usage:     "hand the Cluster API inventory from kind to the management cluster, then delete kind",
		ArgsUsage: "[ENV]",
		Description: `Waits (by watch) for the management Cluster Flux creates on kind and for the kubeconfig Secret Cluster API
writes for it; exports that kubeconfig to MGMT_KUBECONFIG (0600, context bootstrap.mgmt-context); waits for the
management cluster's nodes (none yet is "waiting"); installs cert-manager and the Cluster API operator with Helm at
the [charts] pins, the environment's provider-manifests, pivot-manifests (${VAR} from kind's Flux-namespace
ConfigMaps and pivot-manifest-vars) and pivot-sops-secrets (decrypted in memory with the age key), and waits for every
declared provider; verifies that every provider installed on kind is installed on the management cluster at least at
kind's version (the Cluster API operator's provider objects, or clusterctl's inventory), dry-runs the move, writes
the plan and a backup to .krops/pivot/<run-id>/; suspends Flux on kind; moves with the clusterctl library; seeds Flux on the
management cluster with kind's run metadata; and, unless PIVOT_SKIP_DELETE=1, deletes kind once the management
cluster lists every moved Cluster.

Kind stays authoritative until the last step. Rerun the same command after any failure: it resumes (the run's state
is in .krops/pivot/<run-id>/state.json). Never delete moved Cluster, AWSManaged*, MachinePool or Dev* objects on the
management cluster to work around a failure: providers treat that as deprovisioning. docs/pivot.md has the details.`,
		Version: version,
		Knobs:   knobs,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "cert-manager-repository", Usage: "Helm repository of the cert-manager chart (default: KROPS_CHART_REPOSITORY, else " + install.CertManagerRepository + ")"},
			&ucli.StringFlag{Name: "capi-operator-repository", Usage: "Helm repository of the cluster-api-operator chart (default: KROPS_CHART_REPOSITORY, else " + install.CAPIOperatorRepository + ")"},
			&ucli.StringFlag{Name: "registry-in-cluster", Usage: "registry address the management cluster pulls the artifact from (sync = oci; default: <registry-name>:5000)"},
			&ucli.DurationFlag{Name: "node-timeout", Value: 15 * time.Minute, Usage: "how long to wait for the management cluster's nodes"},
			&ucli.DurationFlag{Name: "provider-timeout", Value: 15 * time.Minute, Usage: "how long to wait for each chart and for the providers to be Ready"},
			&ucli.DurationFlag{Name: "query-timeout", Value: budget.APIRequest, Usage: "how long an API server may stay silent during a wait (kind's for the management Cluster, its kubeconfig Secret and the Clusters' provisioning; the management cluster's for its nodes) before the state is unknown (exit 3); 0 waits out the wait's own timeout"},
			&ucli.StringFlag{Name: "state-dir", Usage: "where the run's state, plan and backup go (default: <repository>/.krops/pivot)"},
			&ucli.BoolFlag{Name: "from-bootstrap", Usage: "called as bootstrap's last step: do nothing unless BOOTSTRAP_PIVOT is 1"},
		},
		Action: pivotAction,
		Commands: []*ucli.Command{{
			Name: "controller-credentials", ArgsUsage: "[ENV]", Action: controllerCredentialsAction,
			Usage: "apply on the management cluster again what the provider supplies for its controllers before the move (aws: the credentials Secrets CAPA and ACK read, and cluster-vars), from the current credentials: after rotating them",
		}},
	})
	return app
}

// controllerCredentialsAction re-applies the provider's pivot inputs on the
// management cluster: the one way, once kind is gone, to hand its
// controllers rotated credentials.
func controllerCredentialsAction(c *ucli.Context) error {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	mgmt := sel.Mgmt()
	cfg, err := mgmt.RESTConfig()
	if err != nil {
		return cli.Usagef("the management cluster (%s): %v; the pivot writes it, or `task mgmt-kubeconfig ENV=%s`", mgmt, err, sel.Environment.Name)
	}
	provider, err := pluginhost.Load(c.Context, pluginhost.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")})
	if err != nil {
		return err
	}
	defer provider.Close()
	if !provider.Description().Has(sdk.CapPivotInputs) {
		prog.Successf("provider %s supplies nothing for its controllers: nothing to apply", provider.Name)
		return nil
	}
	in, err := provider.PivotInputs(c.Context, sdk.PivotInputsRequest{InToolbox: sel.Knobs.Toolbox})
	if err != nil {
		return err
	}
	if len(in.Manifests) == 0 {
		prog.Successf("provider %s supplies nothing for its controllers: nothing to apply", provider.Name)
		return nil
	}
	return prog.Step(c.Context, "applying what provider "+provider.Name+" supplies for its controllers on "+mgmt.String(), func(ctx context.Context) error {
		ap, err := kubeapply.New(cfg, seed.FieldManager)
		if err != nil {
			return err
		}
		for i, m := range in.Manifests {
			objs, err := kubeapply.Decode(m, "")
			if err != nil {
				return fmt.Errorf("the provider's manifest #%d is not valid YAML for Kubernetes objects (content not shown)", i+1)
			}
			done, err := ap.ApplySensitive(ctx, objs)
			if err != nil {
				return err
			}
			for _, d := range done {
				prog.Infof("applied %s", d)
			}
		}
		return nil
	})
}

func pivotAction(c *ucli.Context) error {
	ctx := c.Context
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return err
	}
	if c.Bool("from-bootstrap") && !sel.Knobs.Pivot {
		fmt.Fprintf(c.App.Writer, "BOOTSTRAP_PIVOT is not 1: stopping on kind. `task pivot ENV=%s` pivots later.\n", sel.Environment.Name)
		return nil
	}
	s, err := pivotsetup.Load(ctx, sel, pivotsetup.Params{
		StateDir: c.String("state-dir"), CertManagerRepository: c.String("cert-manager-repository"),
		CAPIOperatorRepository: c.String("capi-operator-repository"), RegistryInCluster: c.String("registry-in-cluster"),
		NodeTimeout: c.Duration("node-timeout"), ProviderTimeout: c.Duration("provider-timeout"), QueryTimeout: c.Duration("query-timeout"), Verbose: c.Bool("verbose"),
		Progress: cli.Printer(c, c.App.ErrWriter), Out: c.App.Writer, PluginStderr: c.App.ErrWriter,
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Finished != "" {
		fmt.Fprintln(c.App.Writer, s.Finished)
		return nil
	}
	o := s.Options
	testHooks(&o)
	if c.Bool("verbose") {
		o.Log = logr.FromSlogHandler(cli.Logger(c).Handler())
	}
	clusterctllog.SetLogger(o.Log)
	// clusterctl's clients are controller-runtime's, whose global logger,
	// left unset, prints a warning with a stack trace into the run's output
	// half a minute in (seen in every pivot that moved for that long).
	ctrllog.SetLogger(o.Log)

	err = pivot.Run(ctx, o)
	if errors.Is(err, pivot.ErrRefused) {
		return cli.UsageError(err)
	}
	if errors.Is(err, pivot.ErrUnknownState) {
		return cli.UnknownStateError(err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "The management cluster runs itself.\n  export KUBECONFIG=%s\n  kubectl --context %s get clusters -A\n", o.Target.Path, o.Target.Context)
	if sel.Knobs.PivotSkipDelete {
		fmt.Fprintf(c.App.Writer, "kind was kept (PIVOT_SKIP_DELETE=1): `task kind:down ENV=%s` deletes it.\n", sel.Environment.Name)
	}
	return nil
}
