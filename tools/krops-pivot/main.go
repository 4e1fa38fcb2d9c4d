// Command krops-pivot hands the Cluster API inventory from the kind
// bootstrap cluster to the self-managed management cluster, then deletes
// kind. Every step can be rerun; rerunning after a failure resumes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ucli "github.com/urfave/cli/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/pivoted"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/krops-flux-seed/helmrelease"
	"github.com/kropsdev/krops/tools/krops-flux-seed/seed"
	"github.com/kropsdev/krops/tools/krops-flux-seed/seedconfig"
	"github.com/kropsdev/krops/tools/krops-kind/bootcluster"
	"github.com/kropsdev/krops/tools/krops-kind/kindsetup"
	"github.com/kropsdev/krops/tools/krops-pivot/install"
	"github.com/kropsdev/krops/tools/krops-pivot/pivot"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

var knobs = []string{
	"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KUBECONFIG", "MGMT_KUBECONFIG",
	"MGMT_READY_TIMEOUT", "PIVOT_SKIP_DELETE", "KROPS_TOOLBOX", "KROPS_PLUGIN_DIR", "CONTAINER_ENGINE", "ENGINE_SOCK",
	"KROPS_REGISTRY_NAME", "REGISTRY_PORT", "GIT_REPO_URL", "GITHUB_USER", "AGE_KEY_FILE", "AGE_PUBLIC_KEY",
	"OCI_REPOSITORY", "OCI_TAG", "LOCAL_RECONCILE_TIMEOUT", "KROPS_RUN_ID",
}

func run(args []string) int {
	// Every exit path kills the plugins this process started.
	defer sdk.CleanupClients()
	return cli.Run(context.Background(), newApp(), args, cli.RunOptions{BeforeForcedExit: sdk.KillPlugins})
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
declared provider; verifies the management cluster's provider inventory, dry-runs the move, writes the plan and a
backup to .krops/pivot/<run-id>/; suspends Flux on kind; moves with the clusterctl library; seeds Flux on the
management cluster with kind's run metadata; and, unless PIVOT_SKIP_DELETE=1, deletes kind once the management
cluster lists every moved Cluster.

Kind stays authoritative until the last step. Rerun the same command after any failure: it resumes (the run's state
is in .krops/pivot/<run-id>/state.json). Never delete moved Cluster, AWSManaged*, MachinePool or Dev* objects on the
management cluster to work around a failure: providers treat that as deprovisioning. docs/pivot.md has the details.`,
		Version: version,
		Knobs:   knobs,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "cert-manager-repository", Value: install.CertManagerRepository, Usage: "Helm repository of the cert-manager chart"},
			&ucli.StringFlag{Name: "capi-operator-repository", Value: install.CAPIOperatorRepository, Usage: "Helm repository of the cluster-api-operator chart"},
			&ucli.StringFlag{Name: "chart-repository", Value: seed.DefaultChartRepository, Usage: "oci:// repository holding the flux-operator chart"},
			&ucli.StringFlag{Name: "registry-in-cluster", Usage: "registry address the management cluster pulls the artifact from (sync = oci; default: <registry-name>:5000)"},
			&ucli.DurationFlag{Name: "node-timeout", Value: 15 * time.Minute, Usage: "how long to wait for the management cluster's nodes"},
			&ucli.DurationFlag{Name: "provider-timeout", Value: 15 * time.Minute, Usage: "how long to wait for each chart and for the providers to be Ready"},
			&ucli.StringFlag{Name: "state-dir", Usage: "where the run's state, plan and backup go (default: <repository>/.krops/pivot)"},
			&ucli.BoolFlag{Name: "from-bootstrap", Usage: "called as bootstrap's last step: do nothing unless BOOTSTRAP_PIVOT is 1"},
		},
		Action: pivotAction,
	})
	return app
}

// answers returns a client of the cluster when its API server answers
// within kubecfg.ProbeTimeout.
func answers(c seed.Cluster) (*kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	if err := kubecfg.Answers(cfg); err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// finishedEarlier recognises a pivot that ended after deleting kind but
// before it could say so (killed, or the machine went down): the
// management cluster carries the metadata of run (pivoted.Look), that
// run's state says the move finished (kind is deleted only after the move
// and the seed), and kind's own listing confirms the cluster is gone. It
// then removes the stale kind context, if any. Anything less certain is
// not a finish.
func finishedEarlier(ctx context.Context, sel *cli.Selected, run, stateRoot, kubeconfig string, prog *ui.Progress, out io.Writer) bool {
	if run == runmeta.Unknown {
		return false
	}
	st, err := pivot.LoadState(filepath.Join(stateRoot, run))
	if err != nil || !st.Moved {
		return false
	}
	boot := sel.Config.Bootstrap
	ks, err := kindsetup.Load(ctx, sel, prog, out)
	if err != nil || ks.Options.Kind == nil {
		return false
	}
	names, err := ks.Options.Kind.List(ctx)
	if err != nil || slices.Contains(names, boot.KindCluster) {
		return false
	}
	if err := kubecfg.Remove(kubeconfig, boot.KindContext); err != nil {
		prog.Warnf("removing the stale context %s from %s: %v", boot.KindContext, kubeconfig, err)
	}
	return true
}

// registryAnswers probes the local registry Flux syncs from (sync = oci).
func registryAnswers(ctx context.Context, ref string) error {
	hostPort, _, _ := strings.Cut(ref, "/")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostPort+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the local registry %s does not answer (%v): the management cluster's Flux syncs from it; start it (`task kind` recreates it) and rerun", hostPort, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("the local registry %s answers %s at /v2/: the management cluster's Flux syncs from it", hostPort, resp.Status)
	}
	return nil
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
	prog := cli.Printer(c, c.App.ErrWriter)
	home, _ := os.UserHomeDir()
	kubeconfig, err := kubecfg.Path(sel.Knobs.Kubeconfig, home)
	if err != nil {
		return cli.UsageError(err)
	}
	env := sel.Environment
	boot := sel.Config.Bootstrap
	source := seed.Cluster{Kubeconfig: kubeconfig, Context: boot.KindContext}
	mgmt := seed.Cluster{Kubeconfig: sel.Knobs.MgmtKubeconfig, Context: boot.MgmtContext}

	stateRoot := c.String("state-dir")
	if stateRoot == "" {
		stateRoot = filepath.Join(sel.Config.Root, ".krops", "pivot")
	}

	// Step 0, preflight: nothing changes before every check passes.
	var problems []string
	kc, err := answers(source)
	if err != nil {
		msg := fmt.Sprintf("kind (context %s in %s) does not answer: %v", source.Context, kubeconfig, err)
		f, ferr := pivoted.Look(ctx, pivoted.Options{Kubeconfig: mgmt.Kubeconfig, Context: mgmt.Context, FluxNamespace: boot.FluxNamespace})
		switch {
		case ferr != nil:
			return cli.UsageError(fmt.Errorf("%s; %w", msg, ferr))
		case f.State == pivoted.Pivoted && finishedEarlier(ctx, sel, f.RunID, stateRoot, kubeconfig, prog, c.App.Writer):
			fmt.Fprintf(c.App.Writer, "The pivot of run %s has finished: the management cluster holds the moved Clusters and kind is gone.\n", f.RunID)
			return nil
		case f.State == pivoted.Pivoted || f.State == pivoted.NotYet:
			msg += fmt.Sprintf("; the management cluster answers through %s: if an earlier pivot deleted kind, it has finished", mgmt.Kubeconfig)
		case f.State == pivoted.Unknown:
			// Neither side answers, and a management context exists: an
			// earlier pivot may have finished or stopped anywhere.
			return cli.UnknownStateError(fmt.Errorf("%s, and neither does the management cluster behind context %s in %s (%v): whether an earlier pivot finished is unknown, so nothing was done; rerun once either answers",
				msg, mgmt.Context, mgmt.Kubeconfig, f.Err))
		}
		return cli.UsageError(errors.New(msg))
	}
	cm, err := kc.CoreV1().ConfigMaps(boot.FluxNamespace).Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	var tags runmeta.Tags
	if err != nil {
		problems = append(problems, fmt.Sprintf("reading ConfigMap %s/%s on kind: %v (seed kind first: krops-flux-seed %s)", boot.FluxNamespace, runmeta.ConfigMapName, err, env.Name))
	} else if tags, err = runmeta.FromData(cm.Data); err != nil {
		problems = append(problems, fmt.Sprintf("ConfigMap %s/%s on kind: %v", boot.FluxNamespace, runmeta.ConfigMapName, err))
	}
	lk, err := kindsetup.Hold(boot.KindCluster, tags.RunID, prog)
	if err != nil {
		return err
	}
	defer lk.Release()
	provider, err := pluginhost.Load(ctx, pluginhost.Options{Config: sel.Config, Environment: env, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")})
	if err != nil {
		return err
	}
	defer provider.Close()
	checks, err := provider.Preflight(ctx)
	if err != nil {
		problems = append(problems, "provider preflight: "+err.Error())
	}
	for _, ch := range checks {
		if !ch.OK {
			problems = append(problems, fmt.Sprintf("%s: %s (%s)", ch.Name, ch.Message, ch.Remedy))
		}
	}
	localRef := ""
	if env.Sync == seed.SyncOCI {
		localRef = seedconfig.LocalRef(sel)
		if err := registryAnswers(ctx, localRef); err != nil {
			problems = append(problems, err.Error())
		}
	}
	checked, err := seedconfig.Check(ctx, sel)
	if err != nil {
		problems = append(problems, err.Error())
	}
	sopsFiles, err := install.ReadFiles(env.PivotSOPSSecrets, func(p string) (string, error) { return sel.Config.RepoFile("pivot-sops-secrets", p) })
	if err != nil {
		problems = append(problems, err.Error())
	}
	secrets, err := install.DecryptAll(sopsFiles, sel.Knobs.AgeKeyFile)
	if err != nil {
		problems = append(problems, err.Error())
	}
	read := func(key string, paths []string) ([]install.File, error) {
		return install.ReadFiles(paths, func(p string) (string, error) { return sel.Config.RepoFile(key, p) })
	}
	providerFiles, err := read("provider-manifests", env.ProviderManifests)
	if err != nil {
		problems = append(problems, err.Error())
	}
	// pivot-manifests are substituted now, so an unset ${VAR} stops the
	// pivot before anything changes.
	pivotFiles, err := read("pivot-manifests", env.PivotManifests)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(pivotFiles) > 0 {
		cms, err := fluxVars(ctx, kc, boot.FluxNamespace)
		if err != nil {
			problems = append(problems, err.Error())
		}
		vars := install.Vars(cms, env.PivotManifestVars)
		for i, f := range pivotFiles {
			out, err := install.Substitute(f.Data, vars, "pivot-manifests "+f.Path)
			if err != nil {
				problems = append(problems, err.Error())
			}
			pivotFiles[i].Data = out
		}
	}
	var fallbacks []pivot.Fallback
	for _, fb := range env.MoveFallbacks {
		f, err := read("move-fallbacks", []string{fb.Manifest})
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		fallbacks = append(fallbacks, pivot.Fallback{Resource: fb.Resource, Name: fb.Name, Manifest: f[0].Data, Source: fb.Manifest})
	}
	if err := kubecfg.Writable(mgmt.Kubeconfig); err != nil {
		problems = append(problems, fmt.Sprintf("MGMT_KUBECONFIG: %v", err))
	}
	if len(problems) > 0 {
		return cli.UsageError(fmt.Errorf("preflight failed, nothing was changed:\n  %s", strings.Join(problems, "\n  ")))
	}
	var extra [][]byte
	o := pivot.Options{
		Source: source, Namespace: boot.MgmtNamespace, MgmtCluster: env.MgmtCluster, FluxNamespace: boot.FluxNamespace,
		MgmtKubeconfig: mgmt.Kubeconfig, MgmtContext: mgmt.Context, StateDir: filepath.Join(stateRoot, tags.RunID),
		ReadyTimeout: sel.Knobs.MgmtReadyTimeout, NodeTimeout: c.Duration("node-timeout"), ProviderTimeout: c.Duration("provider-timeout"),
		Fallbacks: fallbacks, Progress: prog, Log: logr.Discard(),
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = env.MgmtReadyTimeout
	}
	if provider.Description().Has(sdk.CapPivotInputs) {
		o.Endpoint = func(ctx context.Context, raw []byte) (string, error) {
			in, err := provider.PivotInputs(ctx, sdk.PivotInputsRequest{Kubeconfig: raw, InToolbox: sel.Knobs.Toolbox})
			extra = in.Manifests
			return in.Server, err
		}
	}
	o.Install = func(ctx context.Context, target seed.Cluster) ([]kubewait.Target, error) {
		return install.Run(ctx, target, install.Options{
			CertManager:  helmrelease.Chart{Repository: c.String("cert-manager-repository"), Name: "cert-manager", Version: sel.Config.Charts.CertManager},
			CAPIOperator: helmrelease.Chart{Repository: c.String("capi-operator-repository"), Name: "cluster-api-operator", Version: sel.Config.Charts.CAPIOperator},
			Wait:         c.Duration("provider-timeout"), ProviderManifests: providerFiles, PivotManifests: pivotFiles,
			Secrets: secrets, Extra: extra, Infof: prog.Infof,
		})
	}
	o.Seed = func(ctx context.Context, target seed.Cluster) error {
		so, release, err := seedconfig.Options(ctx, checked, seedconfig.Params{
			Cluster: target, CopyFrom: &source, ChartRepository: c.String("chart-repository"), RegistryInCluster: c.String("registry-in-cluster"),
			// The management cluster's own chain is what pivot waits for
			// next time it is needed; here Flux taking over is enough.
			NoFollow: true, Progress: prog, PluginStderr: c.App.ErrWriter, Verbose: c.Bool("verbose"),
		})
		defer release()
		if err != nil {
			return err
		}
		return seed.Seed(ctx, so)
	}
	if localRef != "" {
		o.Guard = func(ctx context.Context) error { return registryAnswers(ctx, localRef) }
	}
	if !sel.Knobs.PivotSkipDelete {
		o.DeleteKind = func(ctx context.Context) error {
			ks, err := kindsetup.Load(ctx, sel, prog, c.App.Writer)
			if err != nil {
				return err
			}
			if err := ks.EngineNeeded(); err != nil {
				return err
			}
			_, err = bootcluster.Down(ctx, ks.Options)
			return err
		}
	}
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
	fmt.Fprintf(c.App.Writer, "The management cluster runs itself.\n  export KUBECONFIG=%s\n  kubectl --context %s get clusters -A\n", mgmt.Kubeconfig, mgmt.Context)
	if sel.Knobs.PivotSkipDelete {
		fmt.Fprintf(c.App.Writer, "kind was kept (PIVOT_SKIP_DELETE=1): `task kind:down ENV=%s` deletes it.\n", env.Name)
	}
	return nil
}

// fluxVars reads the data of every ConfigMap in the Flux namespace on kind.
func fluxVars(ctx context.Context, kc kubernetes.Interface, ns string) (map[string]map[string]string, error) {
	list, err := kc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the ConfigMaps in %s on kind (pivot-manifests variables): %w", ns, err)
	}
	out := map[string]map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.Data
	}
	return out, nil
}

// testHooks reads the test-only stop points. They let the resumption tests
// end the process at a step boundary or in the middle of the move, the way
// a crash or a kill would.
func testHooks(o *pivot.Options) {
	o.StopAfter = os.Getenv("KROPS_TEST_PIVOT_STOP_AFTER")
	if n := os.Getenv("KROPS_TEST_PIVOT_KILL_AFTER_CREATES"); n != "" {
		var limit, seen int
		fmt.Sscan(n, &limit)
		o.MoveMutator = func(kind, namespace, name string) {
			seen++
			if seen > limit {
				fmt.Fprintf(os.Stderr, "KROPS_TEST_PIVOT_KILL_AFTER_CREATES=%d: exiting before creating %s %s/%s\n", limit, kind, namespace, name)
				os.Exit(137)
			}
		}
	}
}
