// Package pivot hands the Cluster API inventory from the kind bootstrap
// cluster to the management cluster it built: waits for that cluster,
// exports its kubeconfig, installs the providers on it, verifies, backs up,
// suspends Flux on kind, moves with the clusterctl client library, seeds
// Flux on the target and, guarded, deletes kind.
//
// Kind stays authoritative until the last step. Every step can be rerun,
// and a rerun after any failure resumes: what a step must remember across
// an interruption (which Clusters krops paused, whether the move began) is
// written to the run's state file before the step mutates anything.
package pivot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/seed"
	"github.com/kropsdev/krops/tools/kit/steps"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// FieldManager owns what the pivot applies.
const FieldManager = "krops"

// Steps are the pivot's steps in order; StopAfter names one of them.
var Steps = []string{"preflight", "mgmt-cluster", "kubeconfig-secret", "kubeconfig", "nodes", "providers", "verify", "suspend-flux", "move", "seed", "delete-kind"}

// ErrStopped is returned when Options.StopAfter stopped the run (tests).
var ErrStopped = steps.ErrStopped

// ErrRefused marks a refusal before any mutation: the state found makes the
// next step unsafe, and the message says what to do.
var ErrRefused = errors.New("refused")

// ErrUnknownState marks a query that failed where a decision depends on its
// answer (what to move, whether kind may go): the step stops without
// acting, and a rerun once the cluster answers goes on.
var ErrUnknownState = errors.New("the state is unknown")

var (
	clustersGVR       = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	clusterClassesGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusterclasses"}
	secretsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	helmReleases      = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
)

// Fallback is an object clusterctl move is known to skip, and the manifest
// that recreates it on the target when it is missing there.
type Fallback struct {
	Resource, Name string
	Manifest       []byte
	Source         string // the manifest's path, for messages
}

// Options describe one pivot.
type Options struct {
	// Source is kind, bound by an explicit context.
	Source kubecfg.Ref
	// Namespace holds the CAPI objects (mgmt-namespace); MgmtCluster is the
	// Cluster that becomes the management cluster.
	Namespace, MgmtCluster string
	FluxNamespace          string
	// Target is where the target's kubeconfig is written (0600) and the
	// context it gets there.
	Target kubecfg.Ref
	// StateDir is .krops/pivot/<run-id>: state, plan and backup.
	StateDir string

	ReadyTimeout, NodeTimeout, ProviderTimeout time.Duration
	// QueryTimeout ends a wait whose API server has not answered for this
	// long (a paused node, a dropped route): unknown state at once, rather
	// than a wait that runs out its timeout and then blames what it waited
	// for. Zero: only the wait's own timeout.
	QueryTimeout time.Duration
	// PollInterval is how often a wait for the management cluster says it
	// is still waiting when nothing changes (MGMT_POLL_INTERVAL).
	PollInterval time.Duration

	// Endpoint, when set, gives the address the target is reached at
	// instead of the recorded one ("" keeps it).
	Endpoint func(ctx context.Context, kubeconfig []byte) (string, error)
	// Install puts cert-manager, the CAPI operator and the environment's
	// manifests on the target and returns the provider objects to wait for.
	Install func(ctx context.Context, target kubecfg.Ref) ([]kubewait.Target, error)
	// Fallbacks are applied after the move where missing.
	Fallbacks []Fallback
	// Seed hands the target to Flux (krops-flux-seed as a library).
	Seed func(ctx context.Context, target kubecfg.Ref) error
	// Guard runs before kind is deleted, after the built-in checks (the
	// local registry answers, for local-host).
	Guard func(ctx context.Context) error
	// DeleteKind removes kind; nil keeps it (PIVOT_SKIP_DELETE=1).
	DeleteKind func(ctx context.Context) error

	Progress *ui.Progress
	// Log receives clusterctl's own log lines.
	Log logr.Logger
	// StopAfter stops the run after the named step (tests of resumption).
	StopAfter string
	// MoveMutator, when set, sees every object the move creates (tests
	// stop the process in the middle of a move with it).
	MoveMutator func(kind, namespace, name string)
}

// clients are the typed and dynamic clients of one cluster.
type clients struct {
	cfg *rest.Config
	kc  kubernetes.Interface
	dyn dynamic.Interface
}

func connect(c kubecfg.Ref) (*clients, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return clientsFor(cfg)
}

func clientsFor(cfg *rest.Config) (*clients, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{cfg: cfg, kc: kc, dyn: dyn}, nil
}

// run is one pivot in progress.
type run struct {
	o      Options
	src    *clients
	target kubecfg.Ref
	dst    *clients
	state  State
}

// Run pivots. Call Preflight first; Run assumes it passed.
func Run(ctx context.Context, o Options) error {
	r := &run{o: o, target: o.Target}
	var err error
	if r.src, err = connect(o.Source); err != nil {
		return err
	}
	if r.state, err = LoadState(o.StateDir); err != nil {
		return err
	}
	p := o.Progress
	if r.state.MoveStarted {
		p.Infof("resuming: the move began in an earlier run (%s); kind is no longer waited for", o.StateDir)
	}
	// A step that is behind us once the move has begun (its objects are
	// no longer on kind) is skipped on a rerun.
	moved := func() bool { return r.state.MoveStarted }
	return steps.Run(ctx, steps.Options{StopAfter: o.StopAfter},
		steps.Step{Name: "mgmt-cluster", Run: r.waitMgmtCluster, Done: moved},
		steps.Step{Name: "kubeconfig-secret", Run: r.waitKubeconfigSecret, Done: moved},
		steps.Step{Name: "kubeconfig", Run: r.exportKubeconfig, Done: moved, Resumed: func(context.Context) error { return r.connectTarget() }},
		steps.Step{Name: "nodes", Run: r.waitNodes},
		steps.Step{Name: "providers", Run: r.installProviders, Done: moved},
		steps.Step{Name: "verify", Run: r.verify, Done: moved},
		steps.Step{Name: "suspend-flux", Run: r.suspendFlux},
		steps.Step{Name: "move", Run: r.move},
		steps.Step{Name: "seed", Run: r.seed},
		steps.Step{Name: "delete-kind", Run: r.deleteKind},
	)
}

func (r *run) connectTarget() error {
	if r.dst != nil {
		return nil
	}
	c, err := connect(r.target)
	if err != nil {
		return fmt.Errorf("the management cluster's kubeconfig %s: %w", r.o.Target.Path, err)
	}
	r.dst = c
	return nil
}

// waitMgmtCluster waits for Flux to create the management Cluster on kind.
func (r *run) waitMgmtCluster(ctx context.Context) error {
	t := kubewait.Target{Resource: clustersGVR, Kind: "Cluster", Namespace: r.o.Namespace, Name: r.o.MgmtCluster, Exists: true}
	// With no Kustomization on kind, nothing will ever create the Cluster:
	// say so now rather than after the whole ready timeout.
	ks, err := r.src.dyn.Resource(seed.Kustomizations).Namespace(r.o.FluxNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err == nil && len(ks.Items) == 0:
		return fmt.Errorf("%w: kind has no Flux Kustomization in %s, so nothing will create the management Cluster %s/%s: seed kind first (`krops-flux-seed`, or `task bootstrap`)",
			ErrRefused, r.o.FluxNamespace, r.o.Namespace, r.o.MgmtCluster)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("listing the Flux Kustomizations on kind: %w", err)
	case err != nil:
		return fmt.Errorf("%w: kind does not serve Flux Kustomizations (kustomize.toolkit.fluxcd.io): Flux is not installed there; seed kind first (`krops-flux-seed`, or `task bootstrap`)", ErrRefused)
	}
	return r.o.Progress.Wait(ctx, fmt.Sprintf("management Cluster %s/%s on kind (up to %s)", r.o.Namespace, r.o.MgmtCluster, r.o.ReadyTimeout), func(ctx context.Context) error {
		err := kubewait.All(ctx, r.mgmtWait(), t)
		return kindSilent(r.withFluxState(ctx, err, "Flux has not created it"), t.String())
	})
}

// mgmtWait bounds a wait for the management cluster by ReadyTimeout and
// reports it, with a heartbeat at PollInterval: provisioning takes many
// minutes on a cloud, in which nothing may change.
func (r *run) mgmtWait() kubewait.Options {
	return kubewait.Options{Client: r.src.dyn, Timeout: r.o.ReadyTimeout, Heartbeat: r.o.PollInterval, Silence: r.o.QueryTimeout,
		Report: func(line string) { r.o.Progress.Infof("%s", line) }}
}

// kindSilent words a wait on kind that ended because kind stopped
// answering: unknown state, and nothing was changed.
func kindSilent(err error, what string) error {
	var silent *kubewait.SilentError
	if errors.As(err, &silent) {
		return fmt.Errorf("kind's API server stopped answering while the pivot waited for %s (%w): %v; nothing was changed, rerun the pivot once it answers", what, ErrUnknownState, silent)
	}
	return err
}

// waitKubeconfigSecret waits for CAPI's kubeconfig Secret: the one signal
// that means "reachable" for every provider.
func (r *run) waitKubeconfigSecret(ctx context.Context) error {
	t := kubewait.Target{Resource: secretsGVR, Kind: "Secret", Namespace: r.o.Namespace, Name: r.o.MgmtCluster + "-kubeconfig", Exists: true}
	return r.o.Progress.Wait(ctx, fmt.Sprintf("kubeconfig Secret %s/%s-kubeconfig (up to %s)", r.o.Namespace, r.o.MgmtCluster, r.o.ReadyTimeout), func(ctx context.Context) error {
		err := kindSilent(kubewait.All(ctx, r.mgmtWait(), t), t.String())
		var te *kubewait.TimeoutError
		if errors.As(err, &te) {
			return fmt.Errorf("%w; Cluster API has not provisioned the management cluster yet: `kubectl --context %s -n %s describe cluster %s` says why; rerun the pivot to go on waiting",
				err, r.o.Source.Context, r.o.Namespace, r.o.MgmtCluster)
		}
		return err
	})
}

// withFluxState adds the Flux Kustomizations on kind that are not Ready to
// a wait that ran out: they are what keeps the Cluster from appearing.
func (r *run) withFluxState(ctx context.Context, err error, what string) error {
	var te *kubewait.TimeoutError
	if !errors.As(err, &te) || ctx.Err() != nil {
		return err
	}
	states, lerr := kubewait.NotReady(ctx, r.src.dyn, kubewait.Target{Resource: seed.Kustomizations, Kind: "Kustomization"}, r.o.FluxNamespace)
	if lerr != nil {
		return fmt.Errorf("%w (%s; listing Flux Kustomizations failed too: %v)", err, what, lerr)
	}
	var blocked []string
	for _, s := range states {
		blocked = append(blocked, s.String())
	}
	slices.Sort(blocked)
	// A discovery that fails claims nothing either way.
	if served, derr := kubewait.Served(r.src.kc.Discovery(), clustersGVR); derr == nil && !served {
		return fmt.Errorf("%w (%s: kind does not serve Cluster API's %s %s; Flux has not installed Cluster API, see `flux get kustomizations` and the operator's providers)", err, what, clustersGVR.GroupVersion(), clustersGVR.Resource)
	}
	if len(blocked) == 0 {
		return fmt.Errorf("%w (%s, and every Flux Kustomization in %s is Ready: is mgmt-cluster %q the name the tree uses?)", err, what, r.o.FluxNamespace, r.o.MgmtCluster)
	}
	return &BlockedError{Err: err, Blocked: blocked}
}

// BlockedError is a wait that ran out, with what blocked it.
type BlockedError struct {
	Err     error
	Blocked []string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("%v; Flux Kustomizations not Ready:\n  %s", e.Err, strings.Join(e.Blocked, "\n  "))
}
func (e *BlockedError) Unwrap() error { return e.Err }
