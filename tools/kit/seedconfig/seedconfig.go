// Package seedconfig turns bootstrap.toml and the knobs into a seed: the
// preflight (GitHub branch and token, the age key), the local artifact's
// publication (sync = oci) and seed.Options. krops-flux-seed runs it for the
// cluster it is pointed at, krops-pivot for the new management cluster.
package seedconfig

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/gitsource"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/preflight"
	"github.com/kropsdev/krops/tools/kit/publish"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/kit/seed"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// Checked is a passed preflight.
type Checked struct {
	Sel      *cli.Selected
	Age      preflight.AgeKey
	Revision string // the branch's commit (sync = github)
}

// Check runs the preflight and reports every problem together, as a usage
// error (exit 2). Nothing changes.
func Check(ctx context.Context, sel *cli.Selected) (*Checked, error) {
	ch := &Checked{Sel: sel}
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
		sha, err := preflight.GitHub{API: os.Getenv("GITHUB_API_URL")}.Branch(ctx, repo, sel.Config.Bootstrap.GitBranch, k.GitHubToken.Reveal())
		if err != nil {
			problems = append(problems, err.Error())
		}
		ch.Revision = sha
	}
	if ch.Age, err = preflight.CheckAgeKey(k.AgeKeyFile, k.AgePublicKey); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return nil, cli.UsageError(fmt.Errorf("preflight failed, nothing was changed:\n  %s", strings.Join(problems, "\n  ")))
	}
	return ch, nil
}

// LocalRef is where the local artifact is pushed from this machine:
// REGISTRY_HOST (default localhost) at REGISTRY_PORT. In the toolbox,
// localhost is the container itself; the container is on the kind network,
// where the registry answers by its name on its own port.
func LocalRef(sel *cli.Selected) string {
	return fmt.Sprintf("%s/%s:%s", localRegistry(sel), sel.Knobs.OCIRepository, sel.Knobs.OCITag)
}

// localRegistry is the local registry's host:port as this machine (or the
// toolbox container) reaches it.
func localRegistry(sel *cli.Selected) string {
	host, _ := sel.Lookup.Get("REGISTRY_HOST")
	port := sel.Knobs.RegistryPort
	switch {
	case host != "":
	case sel.Knobs.Toolbox:
		host, port = sel.Config.Bootstrap.RegistryName, RegistryInClusterPort
	default:
		host = "localhost"
	}
	return host + ":" + strconv.Itoa(int(port))
}

// OnLocalRegistry says whether an oci:// chart repository is on the local
// registry krops starts, which speaks plain HTTP; every other registry is
// reached over TLS.
func OnLocalRegistry(sel *cli.Selected, repo string) bool {
	rest, ok := strings.CutPrefix(repo, "oci://")
	if !ok {
		return false
	}
	host, _, _ := strings.Cut(rest, "/")
	return host == localRegistry(sel)
}

// registryInCluster is the local registry's host:port as the cluster's pods
// reach it: its container name on the kind network.
func registryInCluster(sel *cli.Selected, p Params) string {
	if p.RegistryInCluster != "" {
		return p.RegistryInCluster
	}
	return sel.Config.Bootstrap.RegistryName + ":" + strconv.Itoa(RegistryInClusterPort)
}

// inClusterCharts is KROPS_CHART_REPOSITORY as the cluster's Flux reaches
// it.
func inClusterCharts(sel *cli.Selected, inCluster string) seed.Charts {
	repo, local := inClusterRepository(sel, sel.Knobs.ChartRepository, inCluster)
	return seed.Charts{Repository: repo, Insecure: local}
}

// inClusterProviders is KROPS_PROVIDER_REPOSITORY as the cluster's Cluster
// API operator reaches it.
func inClusterProviders(sel *cli.Selected, inCluster string) seed.Providers {
	repo, local := inClusterRepository(sel, sel.Knobs.ProviderRepository, inCluster)
	return seed.Providers{Repository: repo, PlainHTTP: local}
}

// inClusterRepository is an oci:// repository as the cluster's pods reach
// it: on the local registry, by the registry's in-cluster address and over
// plain HTTP (this machine reaches it at localhost:<port>, which is the pod
// itself inside the cluster); any other as given.
func inClusterRepository(sel *cli.Selected, repo, inCluster string) (string, bool) {
	if !OnLocalRegistry(sel, repo) {
		return repo, false
	}
	_, path, _ := strings.Cut(strings.TrimPrefix(repo, "oci://"), "/")
	return "oci://" + inCluster + "/" + path, true
}

// RegistryInClusterPort is the port the local registry listens on inside
// its container, where the kind network reaches it.
const RegistryInClusterPort = 5000

// Publish packs the trees the environment syncs and pushes them to ref.
func Publish(ctx context.Context, sel *cli.Selected, ref string, prog *ui.Progress) error {
	src, err := gitsource.Read(ctx, sel.Config.Root, sel.Lookup.Get)
	if err != nil {
		return cli.UsageError(err)
	}
	return prog.Step(ctx, "publishing the config artifact to "+ref, func(ctx context.Context) error {
		pinned, a, err := publish.Publish(ctx, publish.Options{Root: sel.Config.Root, Environment: sel.Environment.Name, SyncPath: sel.Environment.SyncPath,
			Ref: ref, Insecure: true, Source: src})
		if err == nil {
			prog.Infof("%s: %d files, revision %s@sha1:%s", pinned, a.Files, src.Ref, src.SHA)
		}
		return err
	})
}

// Params are the choices a caller makes beyond the configuration.
type Params struct {
	Cluster  kubecfg.Ref
	CopyFrom *kubecfg.Ref
	// RegistryInCluster overrides the default.
	RegistryInCluster string
	WaitFor           []string
	NoFollow, NoWait  bool
	// QueryTimeout is how long the seeded cluster may stay silent during
	// a wait (seed.Options.Silence).
	QueryTimeout time.Duration
	Progress     *ui.Progress
	// PluginStderr and Verbose go to the provider plugin, loaded only when
	// a workload's endpoint must be rewritten.
	PluginStderr io.Writer
	Verbose      bool
}

// Options builds the seed, publishing the artifact first for sync = oci.
// The returned close releases the provider plugin, if one was loaded.
func Options(ctx context.Context, ch *Checked, p Params) (seed.Options, func(), error) {
	sel := ch.Sel
	o := seed.Options{
		Cluster: p.Cluster, CopyFrom: p.CopyFrom, Environment: sel.Environment.Name,
		Namespace: sel.Config.Bootstrap.FluxNamespace, PATSecret: sel.Config.Bootstrap.GitHubPATSecret, AgeSecret: sel.Config.Bootstrap.SOPSAgeSecret,
		Operator: seed.OperatorOptions{Repository: sel.Knobs.ChartRepositoryOr(config.DefaultChartRepository), Version: sel.Config.Charts.FluxOperator,
			PlainHTTP: OnLocalRegistry(sel, sel.Knobs.ChartRepository)},
		Charts:       inClusterCharts(sel, registryInCluster(sel, p)),
		Providers:    inClusterProviders(sel, registryInCluster(sel, p)),
		FluxRegistry: sel.Knobs.FluxRegistry,
		Run: runmeta.Options{Environment: sel.Environment.Name, Now: time.Now(), RunID: sel.Knobs.RunID, Revision: firstNonEmpty(sel.Knobs.Revision, ch.Revision),
			TTL: sel.Knobs.RunTTL, RunKind: sel.Knobs.RunKind},
		Wait: append([]string{"flux-system"}, p.WaitFor...), WaitTimeout: sel.Knobs.LocalReconcileTimeout, Silence: p.QueryTimeout,
		WorkloadNamespace: sel.Config.Bootstrap.MgmtNamespace,
		Progress:          p.Progress,
	}
	if !p.NoFollow {
		o.Wait = append(o.Wait, sel.Environment.Seed.Wait...)
		o.Workloads = sel.Environment.Seed.Workloads
	}
	if p.NoWait {
		o.WaitTimeout = 0
	}
	endpoints := pluginhost.NewEndpoints(pluginhost.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: p.PluginStderr, Verbose: p.Verbose}, sel.Knobs.Toolbox)
	release := endpoints.Close
	if len(o.Workloads) > 0 {
		o.Endpoint = endpoints.Server
	}
	switch sel.Environment.Sync {
	case seed.SyncGitHub:
		repo, _ := preflight.ParseRepoURL(sel.Knobs.GitRepoURL)
		o.Sync = seed.Sync{Kind: seed.SyncGitHub, URL: "https://github.com/" + repo.String(), Ref: "refs/heads/" + sel.Config.Bootstrap.GitBranch, Path: sel.Environment.SyncPath}
		o.Secrets = seed.Secrets{GitHubUser: sel.Knobs.GitHubUser, GitHubToken: sel.Knobs.GitHubToken.Reveal(), AgeIdentity: ch.Age.Identity, AgePublic: ch.Age.Public}
	case seed.SyncOCI:
		inCluster := registryInCluster(sel, p)
		if err := Publish(ctx, sel, LocalRef(sel), p.Progress); err != nil {
			return o, release, err
		}
		o.Sync = seed.Sync{Kind: seed.SyncOCI, URL: "oci://" + inCluster + "/" + sel.Knobs.OCIRepository, Ref: sel.Knobs.OCITag, Path: sel.Environment.SyncPath, Insecure: true}
	default:
		return o, release, cli.Usagef("environment %s: sync %q is not github or oci", sel.Environment.Name, sel.Environment.Sync)
	}
	return o, release, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// Reconcile asks Flux on each cluster that syncs from an OCIRepository
// named flux-system to fetch it now. A cluster that is not there (no
// kubeconfig file or context, nothing answering, no such OCIRepository) is
// reported and skipped: Flux there, if any, fetches at its interval. At
// least one cluster must take the request.
func Reconcile(ctx context.Context, namespace string, clusters []kubecfg.Ref, prog *ui.Progress) error {
	var skipped []string
	took := 0
	for _, c := range clusters {
		if _, err := c.RESTConfig(); err != nil {
			prog.Infof("skipping %s: %v", c, err)
			skipped = append(skipped, err.Error())
			continue
		}
		err := prog.Step(ctx, "asking Flux to fetch OCIRepository "+namespace+"/flux-system now ("+c.String()+")", func(ctx context.Context) error {
			at, err := seed.RequestReconcile(ctx, c, namespace, "flux-system", time.Now())
			if err == nil {
				prog.Infof("%s=%s", seed.ReconcileAnnotation, at)
			}
			return err
		})
		if err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		took++
	}
	if took == 0 {
		return fmt.Errorf("no cluster took the reconcile request (the artifact is pushed; Flux fetches it at its interval):\n  %s", strings.Join(skipped, "\n  "))
	}
	return nil
}
