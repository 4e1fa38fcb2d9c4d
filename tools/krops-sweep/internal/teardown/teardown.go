// Package teardown removes an environment in reverse order of its
// bootstrap: what makes cloud objects Cluster API does not own, Flux, the
// workload Clusters (by watch until confirmed absent), the provider's cloud
// sweep, the Cluster API providers and Flux's releases, and last the
// controller host, which goes only when every Cluster is confirmed gone.
//
// State is three-valued: present, absent (a successful empty list, a
// NotFound on a named lookup, or a type the server does not serve), or
// unknown. Unknown stops the destructive step that needed it and keeps the
// controller host running, so what is deprovisioning goes on.
package teardown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/capikubeconfig"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/pivoted"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/kit/steps"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// FieldManager owns the patches a teardown makes.
const FieldManager = "krops"

var (
	clustersGVR       = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	kustomizationsGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	servicesGVR       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	fluxInstancesGVR  = schema.GroupVersionResource{Group: "fluxcd.controlplane.io", Version: "v1", Resource: "fluxinstances"}
	resourceSetsGVR   = schema.GroupVersionResource{Group: "fluxcd.controlplane.io", Version: "v1", Resource: "resourcesets"}
	helmReleasesGVR   = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	// fluxObjects are the Flux kinds whose finalizers need a running
	// controller: the appliers (suspended before deletion, so that they
	// prune and uninstall nothing) and the sources.
	fluxObjects = []struct {
		gvr     schema.GroupVersionResource
		kind    string
		applies bool
	}{
		{kustomizationsGVR, "Kustomization", true},
		{helmReleasesGVR, "HelmRelease", true},
		{schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmcharts"}, "HelmChart", false},
		{schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmrepositories"}, "HelmRepository", false},
		{schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}, "OCIRepository", false},
		{schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}, "GitRepository", false},
		{schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "buckets"}, "Bucket", false},
	}
	// providerOrder is the CAPI operator's provider kinds in deletion
	// order: addons first, core last.
	providerOrder = []string{"addonproviders", "ipamproviders", "runtimeextensionproviders", "controlplaneproviders", "bootstrapproviders", "infrastructureproviders", "coreproviders"}
)

// Host is a cluster that runs the controllers, bound explicitly.
type Host struct {
	Name string // "kind" or "the management cluster"
	kubecfg.Ref
	// Management marks the management cluster's candidate: an earlier
	// pivot may live there.
	Management bool
}

// answers returns the host's client configuration when its API server
// answers within kubecfg.ProbeTimeout.
func (h Host) answers(timeout time.Duration) (*rest.Config, bool) {
	cfg, err := kubecfg.RESTConfig(h.Path, h.Context, timeout)
	if err != nil || kubecfg.Answers(cfg) != nil {
		return nil, false
	}
	return cfg, true
}

// Options describe one teardown.
type Options struct {
	Environment string
	// Candidates are the controller hosts in the order they are tried:
	// kind, then the management cluster.
	Candidates []Host
	// Namespace holds the Clusters (mgmt-namespace); FluxNamespace Flux.
	Namespace, FluxNamespace string
	MgmtCluster              string
	// InfraProviderName names the environment's Cluster API infrastructure
	// provider (docker, aws, ...): evidence that a host whose run metadata
	// names no environment is this environment's.
	InfraProviderName string
	Policy            sdk.TeardownPolicy
	// CAPIWorkloads are the Clusters to delete for environments that name
	// them (local-host); empty means every Cluster but MgmtCluster, or
	// every Cluster when Policy.DeleteAllClusters.
	CAPIWorkloads []string
	// Secrets krops created, as namespace/name.
	Secrets []string
	// CloudSweep runs the provider's sweep; nil when it has none.
	CloudSweep func(ctx context.Context, dryRun bool) error
	// UninstallOperator removes the flux-operator Helm release.
	UninstallOperator func(ctx context.Context, h Host) (removed bool, err error)
	// DeleteKind removes the kind cluster and says whether there was one.
	DeleteKind func(ctx context.Context) (deleted bool, err error)
	// KindCluster names the kind cluster, whose containers ListContainers
	// finds by the same prefix rule.
	KindCluster string
	// ListContainers lists the self-managed management cluster's containers:
	// those named exactly prefix or prefix-… on the host's engine.
	ListContainers func(ctx context.Context, prefix string) ([]string, error)
	// RemoveContainers removes the named containers, in order; one already
	// gone counts as removed.
	RemoveContainers func(ctx context.Context, names []string) error
	// Force removes the host even when Clusters are not confirmed gone
	// (FORCE_KIND_DELETE=1).
	Force  bool
	DryRun bool
	// QueryTimeout bounds each query (DefaultQueryTimeout).
	QueryTimeout time.Duration
	// AdmissionWait bounds how long a deletion the API server refused
	// because it could not reach an admission webhook is tried again
	// (budget.AdmissionWebhook when zero), every AdmissionRetry
	// (admissionRetry when zero).
	AdmissionWait, AdmissionRetry   time.Duration
	ClusterTimeout, ProviderTimeout time.Duration
	Progress                        *ui.Progress
	Out                             io.Writer
	// StopAfter stops the run after the named step (tests of reruns).
	StopAfter string
}

// steps are the teardown's steps in order, named as Steps lists them.
func (r *run) steps() []steps.Step {
	fns := []func(context.Context) error{r.loadBalancers, r.suspendFlux, r.deleteClusters, r.providers, r.cloud, r.removeHost}
	out := make([]steps.Step, len(fns))
	for i, fn := range fns {
		out[i] = steps.Step{Name: Steps[i], Run: fn}
	}
	return out
}

// Steps are the teardown's steps in order; StopAfter names one of them.
//
// The providers go before the cloud sweep: a provider still running would
// recreate what the sweep deletes (CAPA on kind, the management EKS
// cluster), and after a pivot the sweep deletes the host itself, so nothing
// may need to query it afterwards.
var Steps = []string{"load-balancers", "suspend-flux", "clusters", "providers", "cloud", "host"}

// ErrStopped is returned when Options.StopAfter stopped the run.
var ErrStopped = steps.ErrStopped

// Summary is what a teardown did, skipped and left.
type Summary struct {
	Environment string   `json:"environment"`
	Host        string   `json:"controller_host"`
	DryRun      bool     `json:"dry_run"`
	Deleted     []string `json:"deleted"`
	Skipped     []string `json:"skipped"`
	Left        []string `json:"left"`
	Next        string   `json:"next,omitempty"`
}

// ErrHostUnreachable: no controller host answered; only the cloud sweep ran.
var ErrHostUnreachable = errors.New("no controller host answered")

// ErrLeft: something the teardown should have removed is still there.
var ErrLeft = errors.New("not everything is gone")

type run struct {
	o    Options
	host Host
	cfg  *rest.Config
	dyn  dynamic.Interface
	// disc tells a resource type the host does not serve from a NotFound.
	disc discovery.DiscoveryInterface
	sum  *Summary
	// clustersGone: step 3 confirmed every Cluster it had to delete absent.
	clustersGone bool
	// mgmtDeleted: step 3 deleted the management Cluster (on kind) and
	// confirmed it gone.
	mgmtDeleted bool
	// leftoverKind is kind when it still answers although the management
	// cluster, the host, holds the pivoted Clusters: it goes too.
	leftoverKind *Host
	// hostGone: the cloud sweep removed the host (see goesWithCloud) and it
	// no longer answers.
	hostGone bool
}

func (r *run) plan(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if r.o.DryRun {
		fmt.Fprintf(r.o.Out, "  would %s\n", line)
	}
}

// Run tears the environment down.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	if o.AdmissionWait <= 0 {
		o.AdmissionWait = budget.AdmissionWebhook
	}
	if o.AdmissionRetry <= 0 {
		o.AdmissionRetry = admissionRetry
	}
	sum := &Summary{Environment: o.Environment, DryRun: o.DryRun, Deleted: []string{}, Skipped: []string{}, Left: []string{}}
	r := &run{o: o, sum: sum}
	if err := r.chooseHost(ctx); err != nil {
		sum.Host = "none"
		sum.Next = "rerun `krops-sweep " + o.Environment + "` once the management cluster answers"
		return sum, err
	}
	if r.cfg == nil {
		sum.Host = "none"
		// A management context that exists is evidence of a management
		// cluster, whose Cluster API and Flux may still run (a VPN drop):
		// sweeping the cloud under it would delete what it manages.
		if h, ok, err := managementContext(o.Candidates); err != nil || ok {
			if err != nil {
				return sum, err
			}
			sum.Skipped = append(sum.Skipped, "everything: the management cluster (context "+h.Context+") does not answer")
			sum.Next = "bring the management cluster back and rerun; if it is gone for good, remove its context (`kubectl --kubeconfig " + h.Path + " config delete-context " + h.Context + "`) and rerun, or sweep only the cloud with `krops-sweep cloud " + o.Environment + "`"
			return sum, &UnknownError{What: fmt.Sprintf("reaching the management cluster behind context %s in %s, which may still run Cluster API and Flux over the cloud resources; nothing was deleted", h.Context, h.Path),
				Err: errors.New("it did not answer within the query timeout")}
		}
		if r.nothingOnKubernetes(ctx) {
			// A finished teardown, run again: a no-op on this side.
			sum.Skipped = append(sum.Skipped, "the Kubernetes side: already gone (no kind or management context, no kind container)")
			if err := r.cloud(ctx); err != nil {
				return sum, err
			}
			return sum, nil
		}
		sum.Skipped = append(sum.Skipped, "the Kubernetes side: no controller host answered within 10 s ("+hostNames(o.Candidates)+")")
		if err := r.cloud(ctx); err != nil {
			return sum, err
		}
		sum.Next = "start the controller host and rerun, or `krops-sweep cloud " + o.Environment + "` if only the cloud side is left"
		return sum, fmt.Errorf("%w: the Kubernetes side was not torn down (%s)", ErrHostUnreachable, hostNames(o.Candidates))
	}
	sum.Host = r.host.Name
	var err error
	if r.dyn, err = dynamic.NewForConfig(r.cfg); err != nil {
		return sum, err
	}
	if r.disc, err = discovery.NewDiscoveryClientForConfig(r.cfg); err != nil {
		return sum, err
	}
	o.Progress.Infof("controller host: %s (context %s)", r.host.Name, r.host.Context)
	if err := r.checkOwner(ctx); err != nil {
		if errors.Is(err, ErrUnknownState) {
			sum.Next = "rerun `krops-sweep " + o.Environment + "` once the API server answers"
		}
		return sum, err
	}
	if err := steps.Run(ctx, steps.Options{StopAfter: o.StopAfter}, r.steps()...); err != nil {
		if errors.Is(err, ErrUnknownState) {
			sum.Left = append(sum.Left, "the controller host "+r.host.Name+" is kept running: what it is deprovisioning goes on")
			if sum.Next == "" { // a step that knows better said what to do
				sum.Next = "rerun `krops-sweep " + o.Environment + "` once the API server answers"
			}
		}
		return sum, err
	}
	if len(sum.Left) > 0 {
		return sum, ErrLeft
	}
	return sum, nil
}

// nothingOnKubernetes says whether the Kubernetes side is confirmed absent
// when no host answered: no candidate's context exists (krops removes each
// with its cluster) and the engine lists no container of the kind cluster.
// Anything it cannot read counts as present.
func (r *run) nothingOnKubernetes(ctx context.Context) bool {
	for _, h := range r.o.Candidates {
		if has, err := kubecfg.HasContext(h.Path, h.Context); err != nil || has {
			return false
		}
	}
	if r.o.KindCluster == "" || r.o.ListContainers == nil {
		return false
	}
	names, err := r.o.ListContainers(ctx, r.o.KindCluster)
	return err == nil && len(names) == 0
}

// chooseHost picks the controller host. When the management cluster
// carries a run's metadata, an earlier pivot moved the Clusters there: it is
// the host even if kind still answers (a pivot that stopped before deleting
// kind), and such a kind goes with the rest. Otherwise the first candidate
// that answers is the host. A management context whose cluster does not
// answer while kind does is unknown state: kind may hold nothing because
// the Clusters are there, and tearing down kind alone would report an
// environment gone that still runs.
func (r *run) chooseHost(ctx context.Context) error {
	// Each candidate is probed once: one that does not answer costs the
	// whole probe timeout.
	cfgs := make([]*rest.Config, len(r.o.Candidates))
	var kind *Host
	for i, h := range r.o.Candidates {
		if cfg, ok := h.answers(r.o.QueryTimeout); ok {
			cfgs[i] = cfg
			if !h.Management {
				kind = &r.o.Candidates[i]
			}
		}
	}
	for i, h := range r.o.Candidates {
		if !h.Management {
			continue
		}
		f, err := pivoted.Look(ctx, pivoted.Options{Cluster: h.Ref, FluxNamespace: r.o.FluxNamespace, Timeout: r.o.QueryTimeout})
		switch {
		case err != nil:
			return err
		case f.State == pivoted.Pivoted && cfgs[i] != nil:
			r.host, r.cfg, r.leftoverKind = h, cfgs[i], kind
			return nil
		case (f.State == pivoted.Unknown || f.State == pivoted.Pivoted) && kind != nil:
			cause := f.Err
			if cause == nil {
				cause = errors.New("it stopped answering")
			}
			return &UnknownError{What: fmt.Sprintf("reading %s (context %s in %s), where an earlier pivot may have moved the Clusters; kind answers but may hold none of them. "+
				"Bring it back and rerun, or, if it is gone for good, remove the context (`kubectl --kubeconfig %s config delete-context %s`)", h.Name, h.Context, h.Path, h.Path, h.Context), Err: cause}
		}
	}
	for i, h := range r.o.Candidates {
		if cfgs[i] != nil {
			r.host, r.cfg = h, cfgs[i]
			return nil
		}
	}
	return nil
}

// ErrOtherEnvironment means the controller host that answered is another
// environment's: every environment shares the default kind and management
// context names, so answering is no evidence of whose a cluster is.
var ErrOtherEnvironment = errors.New("the controller host is another environment's")

var infraProvidersGVR = schema.GroupVersionResource{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Resource: "infrastructureproviders"}

// checkOwner makes sure the host is this environment's before anything on
// it changes. The run metadata's environment label is the evidence; where
// an earlier krops wrote none, the environment's infrastructure provider
// is. A host that runs only other infrastructure providers is refused; one
// with no run metadata and no provider at all (a kind cluster whose seed
// never finished) holds nothing of any environment and is this one's by its
// configured name.
func (r *run) checkOwner(ctx context.Context) error {
	knob := "KUBECONFIG"
	if r.host.Management {
		knob = "MGMT_KUBECONFIG"
	}
	qctx, cancel := context.WithTimeout(ctx, r.o.QueryTimeout)
	cm, err := r.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(r.o.FluxNamespace).Get(qctx, runmeta.ConfigMapName, metav1.GetOptions{})
	cancel()
	switch {
	case err == nil:
		env := cm.GetLabels()[runmeta.LabelEnvironment]
		if env == r.o.Environment {
			return nil
		}
		if env != "" {
			runID, _, _ := unstructured.NestedString(cm.Object, "data", runmeta.KeyRunID)
			r.sum.Skipped = append(r.sum.Skipped, "everything: "+r.host.Name+" is environment "+env+"'s")
			r.sum.Next = "`task teardown ENV=" + env + "` tears that environment down"
			return fmt.Errorf("%w: %s (context %s) carries run %s of environment %s, not %s; nothing was changed. Tear that environment down with `task teardown ENV=%s`, or point %s at %s's own cluster",
				ErrOtherEnvironment, r.host.Name, r.host.Context, runID, env, r.o.Environment, env, knob, r.o.Environment)
		}
	case !apierrors.IsNotFound(err):
		return &UnknownError{What: "reading the run metadata on " + r.host.Name + ", which says whose host it is", Err: err}
	}
	providers, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, infraProvidersGVR, "", "Cluster API infrastructure providers on "+r.host.Name)
	if err != nil {
		return err
	}
	var others []string
	for _, p := range providers {
		// By name: the namespace an operator install uses varies.
		if p.GetName() == r.o.InfraProviderName {
			return nil
		}
		others = append(others, p.GetName()+" in "+p.GetNamespace())
	}
	if len(others) == 0 {
		return nil
	}
	r.sum.Skipped = append(r.sum.Skipped, "everything: "+r.host.Name+" runs another environment's infrastructure provider")
	return fmt.Errorf("%w: %s (context %s) has no run metadata naming its environment and runs the infrastructure provider %s, while %s's is %s; nothing was changed. Tear it down as the environment it belongs to, or point %s at %s's own cluster",
		ErrOtherEnvironment, r.host.Name, r.host.Context, strings.Join(others, ", "), r.o.Environment, r.o.InfraProviderName, knob, r.o.Environment)
}

// managementContext is the management candidate when its context exists.
func managementContext(hs []Host) (Host, bool, error) {
	for _, h := range hs {
		if !h.Management {
			continue
		}
		has, err := kubecfg.HasContext(h.Path, h.Context)
		if err != nil {
			return h, false, fmt.Errorf("reading the management cluster's kubeconfig %s (MGMT_KUBECONFIG): %w", h.Path, err)
		}
		if has {
			return h, true, nil
		}
	}
	return Host{}, false, nil
}

func hostNames(hs []Host) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name+" (context "+h.Context+")")
	}
	return strings.Join(out, ", ")
}

// lbService is a Service of type LoadBalancer and where it runs.
type lbService struct {
	cluster string // "" for the host, else the workload Cluster's name
	dyn     dynamic.Interface
	ns      string
	name    string
	owner   string // "ns/name" of the Flux Kustomization that applied it
}

// loadBalancers deletes the Flux Kustomizations on the host that own
// Services of type LoadBalancer, on the host or on a workload cluster
// (through the kubeconfig Secret Cluster API writes for it), without
// suspending them first (a suspended Kustomization skips its prune and
// leaves the cloud load balancer behind), and waits for the Services to go.
// A Kustomization owns a Service by evidence: Flux's labels on the Service
// name it, it exists on the host, and it applies to that cluster (its
// kubeConfig Secret is the Cluster's, or it has none for the host).
func (r *run) loadBalancers(ctx context.Context) error {
	found, err := r.lbServices(ctx, "", r.dyn)
	if err != nil {
		return err
	}
	cls, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, clustersGVR, r.o.Namespace, "Clusters in "+r.o.Namespace)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(r.cfg)
	if err != nil {
		return err
	}
	for _, c := range cls {
		raw, err := capikubeconfig.Read(ctx, kc, r.o.Namespace, c.GetName())
		if apierrors.IsNotFound(err) {
			continue // not provisioned: nothing can run there
		}
		if err != nil {
			return &UnknownError{What: "reading the kubeconfig of Cluster " + c.GetName(), Err: err}
		}
		cfg, err := capikubeconfig.RESTConfig(raw, "")
		if err != nil {
			return &UnknownError{What: "the kubeconfig of Cluster " + c.GetName(), Err: err}
		}
		cfg.Timeout = r.o.QueryTimeout
		wdyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		more, err := r.lbServices(ctx, c.GetName(), wdyn)
		if err != nil {
			return err
		}
		found = append(found, more...)
	}
	ks, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, kustomizationsGVR, "", "Flux Kustomizations")
	if err != nil {
		return err
	}
	applies := map[string]string{} // "ns/name" -> the Cluster it applies to ("" the host)
	for _, k := range ks {
		secret, _, _ := unstructured.NestedString(k.Object, "spec", "kubeConfig", "secretRef", "name")
		applies[k.GetNamespace()+"/"+k.GetName()] = strings.TrimSuffix(secret, "-kubeconfig")
	}
	owners := map[string][]lbService{}
	for _, s := range found {
		where := "the host"
		if s.cluster != "" {
			where = "Cluster " + s.cluster
		}
		target, ok := applies[s.owner]
		if s.owner == "" || !ok || target != s.cluster {
			r.sum.Left = append(r.sum.Left, fmt.Sprintf("Service %s/%s on %s (type LoadBalancer, not applied by a Kustomization on the controller host: delete it, or its load balancer, yourself)", s.ns, s.name, where))
			continue
		}
		owners[s.owner] = append(owners[s.owner], s)
	}
	if len(owners) == 0 {
		return nil
	}
	keys := sortedKeys(owners)
	return r.o.Progress.Step(ctx, fmt.Sprintf("deleting %d Kustomizations that own load balancers", len(keys)), func(ctx context.Context) error {
		var wait []kubewait.Target
		for _, k := range keys {
			ns, name, _ := strings.Cut(k, "/")
			var names []string
			for _, s := range owners[k] {
				n := s.ns + "/" + s.name
				if s.cluster != "" {
					n += " on " + s.cluster
				}
				names = append(names, n)
			}
			r.plan("delete Kustomization %s (owns Services %s)", k, strings.Join(names, ", "))
			if r.o.DryRun {
				continue
			}
			if _, err := r.del(ctx, kustomizationsGVR, ns, name); err != nil {
				return err
			}
			r.sum.Deleted = append(r.sum.Deleted, "Kustomization "+k)
			for _, s := range owners[k] {
				wait = append(wait, kubewait.Target{Resource: servicesGVR, Namespace: s.ns, Name: s.name, Kind: "Service", Client: s.dyn})
			}
		}
		return r.waitGone(ctx, wait, r.o.ClusterTimeout, "CLUSTER_DELETE_TIMEOUT")
	})
}

// lbServices lists the Services of type LoadBalancer on one cluster.
func (r *run) lbServices(ctx context.Context, cluster string, dyn dynamic.Interface) ([]lbService, error) {
	what := "Services"
	if cluster != "" {
		what = "Services on Cluster " + cluster + " (its load balancers must go before it does)"
	}
	svcs, err := list(ctx, r.o.QueryTimeout, dyn, nil, servicesGVR, "", what)
	if err != nil {
		return nil, err
	}
	var out []lbService
	for _, s := range svcs {
		if t, _, _ := unstructured.NestedString(s.Object, "spec", "type"); t != "LoadBalancer" {
			continue
		}
		l := s.GetLabels()
		owner := ""
		if name, ns := l["kustomize.toolkit.fluxcd.io/name"], l["kustomize.toolkit.fluxcd.io/namespace"]; name != "" && ns != "" {
			owner = ns + "/" + name
		}
		out = append(out, lbService{cluster: cluster, dyn: dyn, ns: s.GetNamespace(), name: s.GetName(), owner: owner})
	}
	return out, nil
}

// suspendFlux suspends every other Kustomization in the Flux namespace, so
// nothing recreates what is being deleted.
func (r *run) suspendFlux(ctx context.Context) error {
	ks, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, kustomizationsGVR, r.o.FluxNamespace, "Flux Kustomizations in "+r.o.FluxNamespace)
	if err != nil {
		return err
	}
	return r.o.Progress.Step(ctx, fmt.Sprintf("suspending %d Flux Kustomizations", len(ks)), func(ctx context.Context) error {
		for _, k := range ks {
			if s, _, _ := unstructured.NestedBool(k.Object, "spec", "suspend"); s || k.GetDeletionTimestamp() != nil {
				continue
			}
			r.plan("suspend Kustomization %s/%s", k.GetNamespace(), k.GetName())
			if r.o.DryRun {
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, r.o.QueryTimeout)
			_, err := r.dyn.Resource(kustomizationsGVR).Namespace(k.GetNamespace()).Patch(qctx, k.GetName(), types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{FieldManager: FieldManager})
			cancel()
			if err != nil && !apierrors.IsNotFound(err) {
				return &UnknownError{What: "suspending Kustomization " + k.GetNamespace() + "/" + k.GetName(), Err: err}
			}
		}
		return nil
	})
}

// deleteClusters deletes the Clusters the policy names and waits, by
// watch, until each is confirmed absent.
func (r *run) deleteClusters(ctx context.Context) error {
	cls, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, clustersGVR, r.o.Namespace, "Clusters in "+r.o.Namespace)
	if err != nil {
		return err
	}
	var doomed []string
	for _, c := range cls {
		name := c.GetName()
		switch {
		case r.mgmtOnKind() && name == r.o.MgmtCluster:
			doomed = append(doomed, name)
		case len(r.o.CAPIWorkloads) > 0:
			if slices.Contains(r.o.CAPIWorkloads, name) {
				doomed = append(doomed, name)
			}
		case r.o.Policy.DeleteAllClusters:
			doomed = append(doomed, name)
		case name != r.o.MgmtCluster:
			doomed = append(doomed, name)
		}
	}
	sort.Strings(doomed)
	if len(doomed) == 0 {
		r.clustersGone = true
		return nil
	}
	return r.o.Progress.Wait(ctx, fmt.Sprintf("deleting Clusters %s (up to %s)", strings.Join(doomed, ", "), r.o.ClusterTimeout), func(ctx context.Context) error {
		var wait []kubewait.Target
		for _, name := range doomed {
			r.plan("delete Cluster %s/%s and wait until Cluster API has removed it", r.o.Namespace, name)
			if r.o.DryRun {
				continue
			}
			if _, err := r.del(ctx, clustersGVR, r.o.Namespace, name); err != nil {
				return err
			}
			wait = append(wait, kubewait.Target{Resource: clustersGVR, Namespace: r.o.Namespace, Name: name, Kind: "Cluster"})
		}
		if r.o.DryRun {
			return nil
		}
		err := r.waitGone(ctx, wait, r.o.ClusterTimeout, "CLUSTER_DELETE_TIMEOUT")
		var te *timeoutError
		switch {
		case err == nil:
			r.clustersGone = true
			for _, name := range doomed {
				r.sum.Deleted = append(r.sum.Deleted, "Cluster "+r.o.Namespace+"/"+name)
				r.mgmtDeleted = r.mgmtDeleted || name == r.o.MgmtCluster
			}
		case errors.As(err, &te) && r.o.Force:
			// The user chose to go on: what those Clusters still hold is
			// orphaned, and the summary says so.
			r.o.Progress.Warnf("FORCE_KIND_DELETE=1: going on although %s", te)
			return nil
		}
		return err
	})
}

// mgmtOnKind: the host is kind and the management cluster's host is
// containers. Before a pivot that cluster is an ordinary Cluster on kind,
// made by the infrastructure provider there; it is deleted through its
// Cluster object, so the provider removes exactly its containers, instead
// of being left running once kind is gone.
func (r *run) mgmtOnKind() bool {
	return !r.host.Management && r.o.Policy.HostRemoval == sdk.RemoveContainers
}

// goesWithCloud: the host is the management cluster and the provider's
// cloud sweep is what removes it (aws: the management EKS cluster).
func (r *run) goesWithCloud() bool {
	return r.host.Management && r.o.Policy.HostRemoval == sdk.RemoveByDeletingCluster && r.o.CloudSweep != nil
}

func (r *run) cloud(ctx context.Context) error {
	if r.o.CloudSweep == nil {
		return nil
	}
	err := r.o.Progress.Step(ctx, "the provider's cloud sweep", func(ctx context.Context) error { return r.o.CloudSweep(ctx, r.o.DryRun) })
	if !r.goesWithCloud() || r.o.DryRun {
		return err
	}
	// The host answered when this run began and the sweep has deleted
	// clusters since; one that answers no more is gone, also when a later
	// part of the sweep failed. Its context is removed now: kept, it would
	// make every rerun stop on a cluster that cannot answer again, and the
	// next bootstrap refuse to start.
	if _, ok := r.host.answers(r.o.QueryTimeout); ok {
		return err
	}
	r.hostGone = true
	r.sum.Deleted = append(r.sum.Deleted, "the management cluster (context "+r.host.Context+"), by the cloud sweep")
	if ferr := r.forgetManagement(); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// providers removes the CAPI operator's provider objects (addons first,
// core last), the FluxInstance before the Flux Operator (so its finalizer
// has its controller), and the Secrets krops created, while the host
// answers.
func (r *run) providers(ctx context.Context) error {
	return r.o.Progress.Step(ctx, "Cluster API providers, Flux and krops's Secrets", func(ctx context.Context) error {
		for _, res := range providerOrder {
			gvr := schema.GroupVersionResource{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Resource: res}
			items, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, gvr, "", res)
			if err != nil {
				return err
			}
			var wait []kubewait.Target
			for _, u := range items {
				r.plan("delete %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
				if r.o.DryRun {
					continue
				}
				if _, err := r.del(ctx, gvr, u.GetNamespace(), u.GetName()); err != nil {
					return err
				}
				wait = append(wait, kubewait.Target{Resource: gvr, Namespace: u.GetNamespace(), Name: u.GetName(), Kind: u.GetKind()})
				r.sum.Deleted = append(r.sum.Deleted, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
			}
			if err := r.waitGone(ctx, wait, r.o.ProviderTimeout, "PROVIDER_DELETE_TIMEOUT"); err != nil {
				return err
			}
		}
		if err := r.releaseFlux(ctx); err != nil {
			return err
		}
		instances, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, fluxInstancesGVR, r.o.FluxNamespace, "FluxInstances")
		if err != nil {
			return err
		}
		var wait []kubewait.Target
		for _, u := range instances {
			r.plan("delete FluxInstance %s/%s", u.GetNamespace(), u.GetName())
			if r.o.DryRun {
				continue
			}
			if _, err := r.del(ctx, fluxInstancesGVR, u.GetNamespace(), u.GetName()); err != nil {
				return err
			}
			wait = append(wait, kubewait.Target{Resource: fluxInstancesGVR, Namespace: u.GetNamespace(), Name: u.GetName(), Kind: "FluxInstance"})
			r.sum.Deleted = append(r.sum.Deleted, "FluxInstance "+u.GetNamespace()+"/"+u.GetName())
		}
		if err := r.waitGone(ctx, wait, r.o.ProviderTimeout, "PROVIDER_DELETE_TIMEOUT"); err != nil {
			return err
		}
		r.plan("uninstall Helm release %s/flux-operator", r.o.FluxNamespace)
		if !r.o.DryRun && r.o.UninstallOperator != nil {
			removed, err := r.o.UninstallOperator(ctx, r.host)
			if err != nil {
				return err
			}
			if removed {
				r.sum.Deleted = append(r.sum.Deleted, "Helm release "+r.o.FluxNamespace+"/flux-operator")
			}
		}
		for _, s := range r.o.Secrets {
			ns, name, _ := strings.Cut(s, "/")
			r.plan("delete Secret %s", s)
			if r.o.DryRun {
				continue
			}
			found, err := r.del(ctx, schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, ns, name)
			if err != nil {
				return err
			}
			if found {
				r.sum.Deleted = append(r.sum.Deleted, "Secret "+s)
			}
		}
		return nil
	})
}

// releaseFlux deletes Flux's own objects on the host while their
// controllers still run, before the FluxInstance: the ResourceSets first
// (their generated objects would otherwise come back), then every
// Kustomization and HelmRelease, suspended first so that it prunes and
// uninstalls nothing, and the sources. The Flux Operator's uninstall
// deletes these anyway, with the CRDs, after stopping the controllers and
// clearing their finalizers; a controller pod still terminating re-adds a
// finalizer it finds missing, and the uninstall then waits five minutes
// on a CRD that cannot go (seen on the real engine). What the appliers
// applied stays, as with the uninstall: it goes with the host.
func (r *run) releaseFlux(ctx context.Context) error {
	sets, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, resourceSetsGVR, "", "Flux ResourceSets")
	if err != nil {
		return err
	}
	// The ResourceSets' objects are suspended before the sets go, so their
	// deletion by the operator prunes nothing either.
	var appliers, sources []fluxObject
	for _, k := range fluxObjects {
		items, err := list(ctx, r.o.QueryTimeout, r.dyn, r.disc, k.gvr, "", "Flux "+k.kind+" objects")
		if err != nil {
			return err
		}
		for _, u := range items {
			o := fluxObject{gvr: k.gvr, kind: k.kind, ns: u.GetNamespace(), name: u.GetName(), applies: k.applies}
			if !k.applies {
				sources = append(sources, o)
				continue
			}
			appliers = append(appliers, o)
			if s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); s || u.GetDeletionTimestamp() != nil {
				continue
			}
			if r.o.DryRun && k.gvr == kustomizationsGVR && o.ns == r.o.FluxNamespace {
				continue // suspend-flux planned it
			}
			r.plan("suspend %s", o)
			if r.o.DryRun {
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, r.o.QueryTimeout)
			_, err := r.dyn.Resource(o.gvr).Namespace(o.ns).Patch(qctx, o.name, types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{FieldManager: FieldManager})
			cancel()
			if err != nil && !apierrors.IsNotFound(err) {
				return &UnknownError{What: "suspending " + o.String(), Err: err}
			}
		}
	}
	var rs []fluxObject
	for _, u := range sets {
		rs = append(rs, fluxObject{gvr: resourceSetsGVR, kind: "ResourceSet", ns: u.GetNamespace(), name: u.GetName()})
	}
	for _, group := range [][]fluxObject{rs, append(appliers, sources...)} {
		var deleted []fluxObject
		for _, o := range group {
			r.plan("delete %s (Flux's controllers still run; nothing it applied is pruned)", o)
			if r.o.DryRun {
				continue
			}
			found, err := r.del(ctx, o.gvr, o.ns, o.name)
			if err != nil {
				return err
			}
			if !found {
				continue // a ResourceSet's, gone with it
			}
			deleted = append(deleted, o)
			r.sum.Deleted = append(r.sum.Deleted, o.String())
		}
		if err := r.waitFluxGone(ctx, deleted); err != nil {
			return err
		}
	}
	return nil
}

// fluxReleaseWait bounds the wait for Flux's objects (and
// PROVIDER_DELETE_TIMEOUT, when shorter): with their controllers running
// they go in seconds.
const fluxReleaseWait = 2 * time.Minute

// fluxFinalizeGrace is how long a suspended applier's controller has to
// finalize it before krops releases its finalizer itself. A controller
// takes a deletion only between reconciles, and a Kustomization whose
// health check waits (`wait: true` on a release that is not Ready) holds
// it for up to its timeout: the real lane's teardown waited out the whole
// cap on one.
const fluxFinalizeGrace = 10 * time.Second

// fluxFinalizer is the finalizer kustomize-controller and helm-controller
// put on their objects.
const fluxFinalizer = "finalizers.fluxcd.io"

// waitFluxGone waits for Flux's objects to go. A suspended Kustomization
// or HelmRelease still there after fluxFinalizeGrace has its controller
// busy elsewhere; finalizing a suspended one prunes and uninstalls nothing
// (both controllers skip that for suspended objects), so krops removes
// Flux's finalizer itself, as the Flux Operator's uninstall does. One still
// there when the wait ends (another finalizer, or a source whose
// controller is down) is left to the operator's uninstall, which clears
// finalizers itself, rather than failing a teardown that would finish. A
// host that stops answering is still unknown state.
func (r *run) waitFluxGone(ctx context.Context, objs []fluxObject) error {
	if len(objs) == 0 {
		return nil
	}
	timeout := min(fluxReleaseWait, r.o.ProviderTimeout)
	start, grace := time.Now(), min(fluxFinalizeGrace, timeout)
	left, err := r.watchGone(ctx, fluxTargets(objs), grace)
	if !errors.Is(err, kubewait.ErrTimeout) {
		return err
	}
	var rest []fluxObject
	for _, o := range objs {
		if !slices.Contains(left, o.String()) {
			continue
		}
		rest = append(rest, o)
		if o.applies {
			if err := r.releaseFinalizer(ctx, o, grace); err != nil {
				return err
			}
		}
	}
	left, err = r.watchGone(ctx, fluxTargets(rest), max(time.Second, timeout-time.Since(start)))
	if errors.Is(err, kubewait.ErrTimeout) {
		r.o.Progress.Warnf("%s still there after %s: no Flux controller finalized it; the Flux Operator's uninstall clears it with the FluxInstance", strings.Join(left, ", "), timeout)
		return nil
	}
	return err
}

// releaseFinalizer removes Flux's finalizer from an applier that is being
// deleted and is suspended, read afresh: one that is not suspended (it was
// deleting before the teardown came) may be pruning, and keeps it. The
// update carries the version it read, so a change in between (the
// controller writing its status or finalizing it) is read again.
func (r *run) releaseFinalizer(ctx context.Context, o fluxObject, grace time.Duration) error {
	res := r.dyn.Resource(o.gvr).Namespace(o.ns)
	for range 3 {
		qctx, cancel := context.WithTimeout(ctx, r.o.QueryTimeout)
		u, err := res.Get(qctx, o.name, metav1.GetOptions{})
		if err == nil {
			suspended, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
			fins := u.GetFinalizers()
			if u.GetDeletionTimestamp() == nil || !suspended || !slices.Contains(fins, fluxFinalizer) {
				cancel()
				return nil
			}
			u.SetFinalizers(slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == fluxFinalizer }))
			_, err = res.Update(qctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		}
		cancel()
		switch {
		case err == nil:
			r.o.Progress.Infof("released %s: its controller had not finalized it after %s (busy with an earlier reconcile); suspended, it prunes and uninstalls nothing", o, grace)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return &UnknownError{What: "releasing " + o.String(), Err: err}
		}
	}
	return nil // changing under us three times: the wait sees what becomes of it
}

func fluxTargets(objs []fluxObject) []kubewait.Target {
	ts := make([]kubewait.Target, 0, len(objs))
	for _, o := range objs {
		ts = append(ts, kubewait.Target{Resource: o.gvr, Namespace: o.ns, Name: o.name, Kind: o.kind})
	}
	return ts
}

// fluxObject is one Flux object on the host.
type fluxObject struct {
	gvr      schema.GroupVersionResource
	kind     string
	ns, name string
	applies  bool // a Kustomization or HelmRelease, suspended before its deletion
}

func (o fluxObject) String() string { return o.kind + " " + o.ns + "/" + o.name }

// removeHost removes the controller host when every Cluster is confirmed
// gone, or when forced. A self-managed cluster is never asked to delete
// itself through its own Cluster object: its host goes by the provider's
// policy instead.
func (r *run) removeHost(ctx context.Context) error {
	if r.o.DryRun {
		r.plan("remove the controller host %s once every Cluster is confirmed gone (%s)", r.host.Name, r.o.Policy.HostRemoval)
		if !r.host.Management && r.o.Policy.HostRemoval == sdk.RemoveContainers && len(r.o.Policy.RemoveLast) > 0 {
			r.plan("then remove %s", strings.Join(r.o.Policy.RemoveLast, ", "))
		}
		if r.leftoverKind != nil {
			r.plan("delete the kind cluster (context %s) an unfinished pivot left", r.leftoverKind.Context)
		}
		return nil
	}
	if !r.clustersGone && !r.o.Force {
		r.sum.Left = append(r.sum.Left, "the controller host "+r.host.Name+": not every Cluster is confirmed gone")
		return fmt.Errorf("%w: the controller host %s is kept because not every Cluster is confirmed gone; FORCE_KIND_DELETE=1 removes it anyway and orphans whatever those Clusters still hold in the cloud", ErrLeft, r.host.Name)
	}
	if r.leftoverKind != nil && r.o.DeleteKind != nil {
		// Its Flux is suspended and its Clusters were moved: it is what
		// the pivot's last step would have deleted.
		deleted, err := r.o.DeleteKind(ctx)
		if err != nil {
			return fmt.Errorf("deleting the kind cluster an unfinished pivot left (context %s): %w", r.leftoverKind.Context, err)
		}
		if deleted {
			r.sum.Deleted = append(r.sum.Deleted, "kind cluster ("+r.leftoverKind.Context+"), left by an unfinished pivot")
		}
	}
	switch {
	case !r.host.Management:
		if r.o.DeleteKind == nil {
			return nil
		}
		deleted, err := r.o.DeleteKind(ctx)
		if err != nil {
			return err
		}
		if deleted {
			r.sum.Deleted = append(r.sum.Deleted, "kind cluster ("+r.host.Context+")")
		} else {
			// It answered through its context but kind has no cluster of
			// that name: the context pointed elsewhere, and is gone now.
			r.sum.Skipped = append(r.sum.Skipped, "kind cluster: kind has none of that name (context "+r.host.Context+" removed)")
		}
		// What the provider removes last (local-host's registry) goes
		// with kind too: a bootstrap that stopped on kind made it
		// (found by the real-engine lane: it stayed running).
		if r.o.Policy.HostRemoval == sdk.RemoveContainers && len(r.o.Policy.RemoveLast) > 0 && r.o.RemoveContainers != nil {
			if err := r.o.RemoveContainers(ctx, r.o.Policy.RemoveLast); err != nil {
				return err
			}
			for _, n := range r.o.Policy.RemoveLast {
				r.sum.Deleted = append(r.sum.Deleted, "container "+n)
			}
		}
		if r.mgmtDeleted {
			if err := r.forgetManagement(); err != nil {
				return err
			}
		}
	case r.o.Policy.HostRemoval == sdk.RemoveContainers:
		r.plan("remove the containers named %s* and then %s", r.o.Policy.ContainerPrefix, strings.Join(r.o.Policy.RemoveLast, ", "))
		if r.o.DryRun || r.o.RemoveContainers == nil || r.o.ListContainers == nil {
			return nil
		}
		names, err := r.o.ListContainers(ctx, r.o.Policy.ContainerPrefix)
		if err != nil {
			return &UnknownError{What: "listing the management cluster's containers (" + r.o.Policy.ContainerPrefix + "*)", Err: err}
		}
		if len(names) == 0 {
			// The cluster answered a moment ago, so its containers exist
			// somewhere: on another engine or socket, or under another
			// name. Removing the registry and forgetting the context now
			// would leave a running cluster nobody can find.
			r.sum.Left = append(r.sum.Left, "the management cluster (context "+r.host.Context+"): it answers, but no container named "+r.o.Policy.ContainerPrefix+" or "+r.o.Policy.ContainerPrefix+"-* is on this engine")
			r.sum.Next = "point CONTAINER_ENGINE or ENGINE_SOCK at the engine that runs it (or set teardown.mgmt-container-prefix to its containers' names), then rerun `krops-sweep " + r.o.Environment + "`"
			return &UnknownError{What: "finding the management cluster's containers", Err: fmt.Errorf("the management cluster answers through context %s, but the container engine has no container named %s or %s-*; nothing of the host was removed and its context is kept", r.host.Context, r.o.Policy.ContainerPrefix, r.o.Policy.ContainerPrefix)}
		}
		if err := r.o.RemoveContainers(ctx, append(names, r.o.Policy.RemoveLast...)); err != nil {
			return err
		}
		for _, n := range append(names, r.o.Policy.RemoveLast...) {
			r.sum.Deleted = append(r.sum.Deleted, "container "+n)
		}
		if err := r.forgetManagement(); err != nil {
			return err
		}
	case r.goesWithCloud() && !r.hostGone:
		// The sweep finished and the cluster still answers: the sweep did
		// not find it (other tags, another region or account).
		r.sum.Left = append(r.sum.Left, "the management cluster (context "+r.host.Context+"): it still answers after the cloud sweep")
		r.sum.Next = "check that the sweep's targets name the management cluster (environments." + r.o.Environment + ".mgmt-cluster and its sweep settings), then rerun `krops-sweep " + r.o.Environment + "`"
		return fmt.Errorf("%w: the management cluster still answers through context %s after the cloud sweep; its context is kept", ErrLeft, r.host.Context)
	case r.o.Policy.HostRemoval == sdk.RemoveManually:
		r.sum.Left = append(r.sum.Left, "the management cluster: "+r.o.Policy.Manual)
	}
	return nil
}

// forgetManagement removes the management cluster's context once the
// cluster is confirmed gone: a context left behind would make the next
// bootstrap stop on a cluster it cannot reach (krops-kind's pivot guard).
func (r *run) forgetManagement() error {
	for _, h := range r.o.Candidates {
		if !h.Management {
			continue
		}
		if has, err := kubecfg.HasContext(h.Path, h.Context); err != nil || !has {
			return err
		}
		if err := kubecfg.Remove(h.Path, h.Context); err != nil {
			return fmt.Errorf("the management cluster is gone, but removing its context %s from %s failed: %w", h.Context, h.Path, err)
		}
		r.sum.Deleted = append(r.sum.Deleted, "context "+h.Context+" in "+h.Path)
	}
	return nil
}

// admissionRetry is how often a deletion refused for an unreachable
// admission webhook is tried again.
const admissionRetry = 3 * time.Second

// del deletes one object; NotFound is success. found says whether there
// was one to delete.
//
// A deletion the API server refused because it could not reach an
// admission webhook is tried again for up to AdmissionWait: the API server
// answered, and refused before changing anything, so the state is known.
// It happens right after the host's API server was away (paused, restarted,
// unreachable): the controllers that serve the webhooks lost their leader
// leases meanwhile and restart, and their webhooks answer again tens of
// seconds later. A rerun of the teardown at once met exactly that.
func (r *run) del(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (found bool, err error) {
	what := fmt.Sprintf("deleting %s %s/%s", gvr.Resource, ns, name)
	wait := r.o.AdmissionWait
	deadline := time.Now().Add(wait)
	for told := false; ; {
		err = r.delOnce(ctx, gvr, ns, name)
		if !webhookUnreachable(err) {
			break
		}
		if !time.Now().Before(deadline) {
			return false, &UnknownError{What: fmt.Sprintf("%s (an admission webhook did not answer the API server for %s)", what, wait), Err: err}
		}
		if !told {
			r.o.Progress.Infof("%s: the API server cannot reach an admission webhook yet and refused it, changing nothing; trying again for up to %s", what, wait)
			told = true
		}
		select {
		case <-ctx.Done():
			return false, &UnknownError{What: what, Err: ctx.Err()}
		case <-time.After(r.o.AdmissionRetry):
		}
	}
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, &UnknownError{What: what, Err: err}
}

func (r *run) delOnce(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.QueryTimeout)
	defer cancel()
	return r.dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// webhookUnreachable: the API server refused a call because calling an
// admission webhook failed (its message: "failed calling webhook"). An
// admission webhook runs before anything is stored, so the call changed
// nothing. A timeout or a dropped connection to the API server itself is
// not this: whether that call was applied is unknown.
func webhookUnreachable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

// waitGone waits until the API server confirms each target gone, printing
// the wait's progress as it changes. What is still there goes into the
// summary's Left; a timeout is unknown state named with its knob.
func (r *run) waitGone(ctx context.Context, targets []kubewait.Target, timeout time.Duration, knob string) error {
	left, err := r.watchGone(ctx, targets, timeout)
	if err == nil {
		return nil
	}
	r.sum.Left = append(r.sum.Left, left...)
	if errors.Is(err, kubewait.ErrTimeout) {
		return &UnknownError{What: "deleting " + strings.Join(left, ", "), Err: &timeoutError{left: left, timeout: timeout, knob: knob}}
	}
	return err
}

// watchGone waits by watch until the API server confirms each target gone,
// printing the wait's progress as it changes, and names what is left when
// it ends early: kubewait.ErrTimeout as it is, an interruption or a failed
// watch as the error to return.
func (r *run) watchGone(ctx context.Context, targets []kubewait.Target, timeout time.Duration) ([]string, error) {
	// Silence: a host whose API server hangs mid-wait (a paused node, a
	// dropped route) is unknown state at once, not a 20-minute timeout that
	// blames the Clusters.
	states, err := kubewait.Gone(ctx, kubewait.Options{Client: r.dyn, Timeout: timeout, Silence: r.o.QueryTimeout,
		Report: func(line string) { r.o.Progress.Infof("%s", line) }}, targets...)
	if err == nil {
		return nil, nil
	}
	var left []string
	for _, s := range states {
		left = append(left, s.Target.String())
	}
	switch {
	case ctx.Err() != nil:
		return left, fmt.Errorf("interrupted while waiting for %s to go: %w", strings.Join(left, ", "), ctx.Err())
	case errors.Is(err, kubewait.ErrTimeout):
		return left, err
	}
	return left, &UnknownError{What: "watching " + strings.Join(left, ", "), Err: err}
}

// timeoutError: a deletion was accepted but not confirmed in time.
type timeoutError struct {
	left    []string
	timeout time.Duration
	knob    string
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s still there after %s (%s)", strings.Join(e.left, ", "), e.timeout, e.knob)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
