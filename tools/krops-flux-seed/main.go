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
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/host"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/krops-flux-seed/preflight"
	"github.com/kropsdev/krops/tools/krops-flux-seed/publish"
	"github.com/kropsdev/krops/tools/krops-flux-seed/seed"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

var knobs = []string{
	"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KUBECONFIG", "KROPS_REGISTRY_NAME",
	"REGISTRY_PORT", "GIT_REPO_URL", "GITHUB_USER", "AGE_KEY_FILE", "AGE_PUBLIC_KEY", "OCI_REPOSITORY", "OCI_TAG",
	"LOCAL_RECONCILE_TIMEOUT", "KROPS_TOOLBOX", "KROPS_PLUGIN_DIR", "KROPS_RUN_ID", "KROPS_RUN_TTL", "KROPS_REVISION", "KROPS_RUN_KIND",
}

func run(args []string) int {
	seedFlags := []ucli.Flag{
		&ucli.StringFlag{Name: "context", Usage: "kubeconfig context of the cluster to seed (default: the kind cluster's context)"},
		&ucli.StringFlag{Name: "copy-run-from", Usage: "copy the krops-run ConfigMap exactly from `KUBECONFIG[:CONTEXT]` instead of writing new run metadata"},
		&ucli.StringFlag{Name: "chart-repository", Value: seed.DefaultChartRepository, Usage: "oci:// repository holding the flux-operator chart"},
		&ucli.StringFlag{Name: "registry-in-cluster", Usage: "registry address the cluster pulls the artifact from (sync = oci; default: <registry-name>:5000)"},
		&ucli.StringSliceFlag{Name: "wait-for", Usage: "also wait for this Kustomization in the Flux namespace (repeatable; flux-system always)"},
		&ucli.BoolFlag{Name: "no-follow", Usage: "wait for the FluxInstance, flux-system and --wait-for only, not the environment's [seed] chain"},
		&ucli.BoolFlag{Name: "no-wait", Usage: "apply and return without waiting for Flux"},
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
changes unless it passes.

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
				Flags: []ucli.Flag{&ucli.StringFlag{Name: "ref", Usage: "push to `REGISTRY/REPOSITORY:TAG` instead of REGISTRY_HOST:REGISTRY_PORT/OCI_REPOSITORY:OCI_TAG"}}},
		},
	})
	return cli.Run(context.Background(), app, args, cli.RunOptions{})
}

type checked struct {
	sel      *cli.Selected
	age      preflight.AgeKey
	revision string
}

// check runs the preflight and reports every problem together.
func check(c *ucli.Context) (*checked, error) {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return nil, err
	}
	ch := &checked{sel: sel}
	if sel.Environment.Sync != seed.SyncGitHub {
		return ch, nil
	}
	var problems []string
	k := sel.Knobs
	repo, err := preflight.ParseRepoURL(k.GitRepoURL)
	if k.GitRepoURL == "" {
		problems = append(problems, "GIT_REPO_URL is not set: the GitHub repository Flux syncs (https://github.com/<owner>/<repo>)")
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	if !k.GitHubToken.IsSet() {
		problems = append(problems, "GITHUB_TOKEN is not set: a token that can read the repository")
	}
	if len(problems) == 0 {
		api := os.Getenv("GITHUB_API_URL")
		sha, err := preflight.GitHub{API: api}.Branch(c.Context, repo, sel.Config.Bootstrap.GitBranch, k.GitHubToken.Reveal())
		if err != nil {
			problems = append(problems, err.Error())
		}
		ch.revision = sha
	}
	if ch.age, err = preflight.CheckAgeKey(k.AgeKeyFile, k.AgePublicKey); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, cli.UsageError(fmt.Errorf("preflight failed, nothing was changed:\n  %s", strings.Join(problems, "\n  ")))
	}
	return ch, nil
}

func preflightAction(c *ucli.Context) error {
	ch, err := check(c)
	if err != nil {
		return err
	}
	if ch.sel.Environment.Sync == seed.SyncGitHub {
		fmt.Fprintf(c.App.Writer, "✔ GitHub branch %s at %s\n✔ age key %s\n", ch.sel.Config.Bootstrap.GitBranch, ch.revision, ch.age.Public)
	} else {
		fmt.Fprintf(c.App.Writer, "✔ sync = %s: nothing to check before seeding\n", ch.sel.Environment.Sync)
	}
	return nil
}

func localRef(sel *cli.Selected) string {
	host := os.Getenv("REGISTRY_HOST")
	if host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s:%d/%s:%s", host, sel.Knobs.RegistryPort, sel.Knobs.OCIRepository, sel.Knobs.OCITag)
}

func doPublish(c *ucli.Context, sel *cli.Selected, ref string, prog *ui.Progress) error {
	src, err := publish.GitSource(c.Context, sel.Config.Root, sel.Lookup.Get)
	if err != nil {
		return cli.UsageError(err)
	}
	return prog.Step(c.Context, "publishing the config artifact to "+ref, func(ctx context.Context) error {
		pinned, a, err := publish.Publish(ctx, publish.Options{Root: sel.Config.Root, Environment: sel.Environment.Name, SyncPath: sel.Environment.SyncPath,
			Ref: ref, Insecure: true, Source: src})
		if err == nil {
			prog.Infof("%s: %d files, revision %s@sha1:%s", pinned, a.Files, src.Ref, src.SHA)
		}
		return err
	})
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
		ref = localRef(sel)
	}
	return doPublish(c, sel, ref, ui.New(ui.Options{Out: c.App.ErrWriter}))
}

func seedAction(c *ucli.Context) error {
	ch, err := check(c)
	if err != nil {
		return err
	}
	sel := ch.sel
	prog := ui.New(ui.Options{Out: c.App.ErrWriter})
	home, _ := os.UserHomeDir()
	kubeconfig, err := kubecfg.Path(sel.Knobs.Kubeconfig, home)
	if err != nil {
		return cli.UsageError(err)
	}
	kctx := c.String("context")
	if kctx == "" {
		kctx = sel.Config.Bootstrap.KindContext
	}
	o := seed.Options{
		Cluster: seed.Cluster{Kubeconfig: kubeconfig, Context: kctx}, Environment: sel.Environment.Name,
		Namespace: sel.Config.Bootstrap.FluxNamespace, PATSecret: sel.Config.Bootstrap.GitHubPATSecret, AgeSecret: sel.Config.Bootstrap.SOPSAgeSecret,
		Operator: seed.OperatorOptions{Repository: c.String("chart-repository"), Version: sel.Config.Charts.FluxOperator},
		Run: runmeta.Options{Environment: sel.Environment.Name, Now: time.Now(), RunID: sel.Knobs.RunID, Revision: firstNonEmpty(sel.Knobs.Revision, ch.revision),
			TTL: sel.Knobs.RunTTL, RunKind: sel.Knobs.RunKind},
		Wait: append([]string{"flux-system"}, c.StringSlice("wait-for")...), WaitTimeout: sel.Knobs.LocalReconcileTimeout,
		WorkloadNamespace: sel.Config.Bootstrap.MgmtNamespace,
		Progress:          prog,
	}
	if !c.Bool("no-follow") {
		o.Wait = append(o.Wait, sel.Environment.Seed.Wait...)
		o.Workloads = sel.Environment.Seed.Workloads
	}
	if len(o.Workloads) > 0 && !sel.Knobs.Toolbox {
		// Outside the toolbox a workload's recorded endpoint may be
		// reachable only inside the provider's network: the provider knows
		// the address to use instead. Loaded only when a wait needs it.
		var provider *sdk.Client
		defer func() {
			if provider != nil {
				provider.Close()
			}
		}()
		o.Endpoint = func(ctx context.Context, cluster string, kubeconfig []byte) (string, error) {
			if provider == nil {
				p, err := host.Load(ctx, host.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")})
				if err != nil {
					return "", err
				}
				provider = p
			}
			if !provider.Description().Has(sdk.CapPivotInputs) {
				return "", nil
			}
			in, err := provider.PivotInputs(ctx, sdk.PivotInputsRequest{Kubeconfig: kubeconfig, Cluster: cluster})
			return in.Server, err
		}
	}
	if c.Bool("no-wait") {
		o.WaitTimeout = 0
	}
	if from := c.String("copy-run-from"); from != "" {
		path, fctx, _ := strings.Cut(from, ":")
		o.CopyFrom = &seed.Cluster{Kubeconfig: path, Context: fctx}
	}
	switch sel.Environment.Sync {
	case seed.SyncGitHub:
		repo, _ := preflight.ParseRepoURL(sel.Knobs.GitRepoURL)
		o.Sync = seed.Sync{Kind: seed.SyncGitHub, URL: "https://github.com/" + repo.String(), Ref: "refs/heads/" + sel.Config.Bootstrap.GitBranch, Path: sel.Environment.SyncPath}
		o.Secrets = seed.Secrets{GitHubUser: sel.Knobs.GitHubUser, GitHubToken: sel.Knobs.GitHubToken.Reveal(), AgeIdentity: ch.age.Identity, AgePublic: ch.age.Public}
	case seed.SyncOCI:
		inCluster := c.String("registry-in-cluster")
		if inCluster == "" {
			inCluster = sel.Config.Bootstrap.RegistryName + ":" + strconv.Itoa(5000)
		}
		if err := doPublish(c, sel, localRef(sel), prog); err != nil {
			return err
		}
		o.Sync = seed.Sync{Kind: seed.SyncOCI, URL: "oci://" + inCluster + "/" + sel.Knobs.OCIRepository, Ref: sel.Knobs.OCITag, Path: sel.Environment.SyncPath, Insecure: true}
	default:
		return cli.Usagef("environment %s: sync %q is not github or oci", sel.Environment.Name, sel.Environment.Sync)
	}
	err = seed.Seed(c.Context, o)
	var te *kubewait.TimeoutError
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
	case errors.Is(err, kubewait.ErrInterrupted):
		return fmt.Errorf("%w; everything applied so far stays; rerun `krops-flux-seed %s` to go on", err, sel.Environment.Name)
	case errors.Is(err, seed.ErrRunMetadata):
		return cli.UsageError(err)
	}
	return err
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
