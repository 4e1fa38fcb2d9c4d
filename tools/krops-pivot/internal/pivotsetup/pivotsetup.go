// Package pivotsetup turns the selected environment and the command's
// flags into a checked pivot: kind and its run metadata, the host lock,
// the provider plugin, and every file and secret the pivot applies, read
// and checked before anything changes (the preflight reports every problem
// at once, exit 2). The command then only runs it.
package pivotsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/bootcluster"
	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/helmrelease"
	"github.com/kropsdev/krops/tools/kit/kindsetup"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/pivoted"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/kit/seed"
	"github.com/kropsdev/krops/tools/kit/seedconfig"
	"github.com/kropsdev/krops/tools/kit/ui"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/install"
	"github.com/kropsdev/krops/tools/krops-pivot/internal/pivot"
)

// Params are the command's flags and outputs.
type Params struct {
	// StateDir holds each run's state, plan and backup (default
	// <repository>/.krops/pivot).
	StateDir                                      string
	CertManagerRepository, CAPIOperatorRepository string
	RegistryInCluster                             string
	NodeTimeout, ProviderTimeout                  time.Duration
	QueryTimeout                                  time.Duration
	Verbose                                       bool
	Progress                                      *ui.Progress
	// Out receives what the user reads; PluginStderr the plugin's logs.
	Out, PluginStderr io.Writer
}

// Setup is a checked pivot, ready to run.
type Setup struct {
	Options pivot.Options
	// Finished, when set, says an earlier pivot has finished: there is
	// nothing to run.
	Finished string
	closers  []func()
}

// Close releases the host lock and stops the plugin.
func (s *Setup) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Load runs the preflight and builds the pivot's options. The caller
// closes the setup.
func Load(ctx context.Context, sel *cli.Selected, p Params) (*Setup, error) {
	source, err := sel.Kind()
	if err != nil {
		return nil, err
	}
	env := sel.Environment
	boot := sel.Config.Bootstrap
	mgmt := sel.Mgmt()

	stateRoot := p.StateDir
	if stateRoot == "" {
		stateRoot = filepath.Join(sel.Config.Root, ".krops", "pivot")
	}

	// Step 0, preflight: nothing changes before every check passes.
	// Every check runs and every problem is reported; each is a refusal
	// (exit 2): nothing has changed.
	var problems cli.Preflight
	kc, err := answers(source)
	if err != nil {
		msg := fmt.Sprintf("kind (context %s in %s) does not answer: %v", source.Context, source.Path, err)
		f, ferr := pivoted.Look(ctx, pivoted.Options{Cluster: mgmt, FluxNamespace: boot.FluxNamespace})
		switch {
		case ferr != nil:
			return nil, cli.UsageError(fmt.Errorf("%s; %w", msg, ferr))
		case f.State == pivoted.Pivoted && finishedEarlier(ctx, sel, f.RunID, stateRoot, source.Path, p.Progress, p.Out):
			return &Setup{Finished: fmt.Sprintf("The pivot of run %s has finished: the management cluster holds the moved Clusters and kind is gone.", f.RunID)}, nil
		case f.State == pivoted.Pivoted || f.State == pivoted.NotYet:
			msg += fmt.Sprintf("; the management cluster answers through %s: if an earlier pivot deleted kind, it has finished", mgmt.Path)
		case f.State == pivoted.Unknown:
			// Neither side answers, and a management context exists: an
			// earlier pivot may have finished or stopped anywhere.
			return nil, cli.UnknownStateError(fmt.Errorf("%s, and neither does the management cluster behind context %s in %s (%v): whether an earlier pivot finished is unknown, so nothing was done; rerun once either answers",
				msg, mgmt.Context, mgmt.Path, f.Err))
		}
		return nil, cli.UsageError(errors.New(msg))
	}
	cm, err := kc.CoreV1().ConfigMaps(boot.FluxNamespace).Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	var tags runmeta.Tags
	if err != nil {
		problems.Addf("reading ConfigMap %s/%s on kind: %v (seed kind first: krops-flux-seed %s)", boot.FluxNamespace, runmeta.ConfigMapName, err, env.Name)
	} else if tags, err = runmeta.FromData(cm.Data); err != nil {
		problems.Addf("ConfigMap %s/%s on kind: %v", boot.FluxNamespace, runmeta.ConfigMapName, err)
	}
	lk, err := kindsetup.Hold(boot.KindCluster, tags.RunID, p.Progress)
	if err != nil {
		return nil, err
	}
	s := &Setup{}
	s.closers = append(s.closers, func() { _ = lk.Release() })
	// The setup owns the lock and the plugin until Close, also when it
	// fails half way.
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	provider, err := pluginhost.Load(ctx, pluginhost.Options{Config: sel.Config, Environment: env, Lookup: sel.Lookup, Stderr: p.PluginStderr, Verbose: p.Verbose})
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, provider.Close)
	checks, err := provider.Preflight(ctx)
	if err != nil {
		problems.Addf("provider preflight: %v", err)
	}
	for _, ch := range checks {
		if !ch.OK {
			problems.Addf("%s: %s (%s)", ch.Name, ch.Message, ch.Remedy)
		}
	}
	localRef := ""
	if env.Sync == seed.SyncOCI {
		localRef = seedconfig.LocalRef(sel)
		if err := registryAnswers(ctx, localRef); err != nil {
			problems.Addf("%v", err)
		}
	}
	checked, err := seedconfig.Check(ctx, sel)
	if err != nil {
		problems.Addf("%v", err)
	}
	sopsFiles, err := install.ReadFiles(env.PivotSOPSSecrets, func(p string) (string, error) { return sel.Config.RepoFile("pivot-sops-secrets", p) })
	if err != nil {
		problems.Addf("%v", err)
	}
	secrets, err := install.DecryptAll(sopsFiles, sel.Knobs.AgeKeyFile)
	if err != nil {
		problems.Addf("%v", err)
	}
	read := func(key string, paths []string) ([]install.File, error) {
		return install.ReadFiles(paths, func(p string) (string, error) { return sel.Config.RepoFile(key, p) })
	}
	providerFiles, err := read("provider-manifests", env.ProviderManifests)
	if err != nil {
		problems.Addf("%v", err)
	}
	pivotFiles, err := read("pivot-manifests", env.PivotManifests)
	if err != nil {
		problems.Addf("%v", err)
	}
	// Both lists are substituted now, as Flux substitutes the same files on
	// kind (the provider objects' fetchConfig from krops-sync, the provider
	// variables from cluster-vars), so an unset ${VAR} stops the pivot
	// before anything changes.
	if len(providerFiles)+len(pivotFiles) > 0 {
		cms, err := fluxVars(ctx, kc, boot.FluxNamespace)
		if err != nil {
			problems.Addf("%v", err)
		}
		vars := install.Vars(cms, env.PivotManifestVars)
		for _, l := range []struct {
			key   string
			files []install.File
		}{{"provider-manifests", providerFiles}, {"pivot-manifests", pivotFiles}} {
			for i, f := range l.files {
				out, err := install.Substitute(f.Data, vars, l.key+" "+f.Path)
				if err != nil {
					problems.Addf("%v", err)
				}
				l.files[i].Data = out
			}
		}
	}
	var fallbacks []pivot.Fallback
	for _, fb := range env.MoveFallbacks {
		f, err := read("move-fallbacks", []string{fb.Manifest})
		if err != nil {
			problems.Addf("%v", err)
			continue
		}
		fallbacks = append(fallbacks, pivot.Fallback{Resource: fb.Resource, Name: fb.Name, Manifest: f[0].Data, Source: fb.Manifest})
	}
	if err := kubecfg.Writable(mgmt.Path); err != nil {
		problems.Addf("MGMT_KUBECONFIG: %v", err)
	}
	if err := problems.Err("preflight failed, nothing was changed"); err != nil {
		return nil, err
	}
	var extra [][]byte
	o := &s.Options
	*o = pivot.Options{
		Source: source, Namespace: boot.MgmtNamespace, MgmtCluster: env.MgmtCluster, FluxNamespace: boot.FluxNamespace,
		Target: mgmt, StateDir: filepath.Join(stateRoot, tags.RunID),
		ReadyTimeout: sel.Knobs.MgmtReadyTimeout, NodeTimeout: p.NodeTimeout, ProviderTimeout: p.ProviderTimeout, QueryTimeout: p.QueryTimeout, PollInterval: sel.Knobs.MgmtPollInterval,
		Fallbacks: fallbacks, Progress: p.Progress, Log: logr.Discard(),
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
	chart := func(flag, upstream, name, version string) helmrelease.Chart {
		repo := flag
		if repo == "" {
			repo = sel.Knobs.ChartRepositoryOr(upstream)
		}
		return helmrelease.Chart{Repository: repo, Name: name, Version: version, PlainHTTP: seedconfig.OnLocalRegistry(sel, repo)}
	}
	certManager := chart(p.CertManagerRepository, install.CertManagerRepository, "cert-manager", sel.Config.Charts.CertManager)
	capiOperator := chart(p.CAPIOperatorRepository, install.CAPIOperatorRepository, "cluster-api-operator", sel.Config.Charts.CAPIOperator)
	o.Install = func(ctx context.Context, target kubecfg.Ref) ([]kubewait.Target, error) {
		return install.Run(ctx, target, install.Options{
			CertManager:  certManager,
			CAPIOperator: capiOperator,
			Wait:         p.ProviderTimeout, ProviderManifests: providerFiles, PivotManifests: pivotFiles,
			Secrets: secrets, Extra: extra, Infof: p.Progress.Infof,
		})
	}
	o.Seed = func(ctx context.Context, target kubecfg.Ref) error {
		so, release, err := seedconfig.Options(ctx, checked, seedconfig.Params{
			Cluster: target, CopyFrom: &source, RegistryInCluster: p.RegistryInCluster,
			// The management cluster's own chain is what pivot waits for
			// next time it is needed; here Flux taking over is enough.
			NoFollow: true, Progress: p.Progress, PluginStderr: p.PluginStderr, Verbose: p.Verbose,
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
			ks, err := kindsetup.Load(ctx, sel, p.Progress, p.Out)
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
	ok = true
	return s, nil
}

// answers returns a client of the cluster when its API server answers
// within kubecfg.ProbeTimeout.
func answers(c kubecfg.Ref) (*kubernetes.Clientset, error) {
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
	ctx, cancel := context.WithTimeout(ctx, budget.Probe)
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
