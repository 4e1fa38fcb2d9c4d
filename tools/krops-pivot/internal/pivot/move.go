package pivot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/kropsdev/krops/tools/kit/kubeapply"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/seed"
)

// clusterctlInventoryGVR is clusterctl's own provider inventory, which
// `clusterctl init` writes.
var clusterctlInventoryGVR = schema.GroupVersionResource{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Resource: "providers"}

// operatorProviders are the Cluster API operator's provider resources and
// the clusterctl provider type each stands for. The operator keeps no
// clusterctl inventory in the cluster (it answers clusterctl's inventory
// queries in-process), so its provider objects' status.installedVersion
// is the record of what runs.
var operatorProviders = []struct{ resource, typ string }{
	{"coreproviders", "CoreProvider"}, {"bootstrapproviders", "BootstrapProvider"},
	{"controlplaneproviders", "ControlPlaneProvider"}, {"infrastructureproviders", "InfrastructureProvider"},
	{"addonproviders", "AddonProvider"}, {"ipamproviders", "IPAMProvider"},
	{"runtimeextensionproviders", "RuntimeExtensionProvider"},
}

// pausedAnnotation pauses a ClusterClass (clusterctl sets it during a move).
const pausedAnnotation = "cluster.x-k8s.io/paused"

// inventoryEntry is one installed provider.
type inventoryEntry struct {
	Key     string // type/name, e.g. InfrastructureProvider/docker
	Version string
}

// inventory is the providers installed on a cluster: clusterctl's inventory
// where `clusterctl init` wrote one, and the Cluster API operator's provider
// objects that report an installed version (the operator's record wins for
// a provider both name). A resource the cluster does not serve contributes
// nothing; any other failure leaves the state unknown.
func inventory(ctx context.Context, dyn dynamic.Interface) (map[string]inventoryEntry, error) {
	out := map[string]inventoryEntry{}
	add := func(typ, name, v string) {
		if typ != "" && name != "" && v != "" {
			out[typ+"/"+name] = inventoryEntry{Key: typ + "/" + name, Version: v}
		}
	}
	list, err := dyn.Resource(clusterctlInventoryGVR).List(ctx, listAll)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("listing clusterctl's inventory (%s) (%w): %w", clusterctlInventoryGVR.GroupResource(), ErrUnknownState, err)
	default:
		for _, u := range list.Items {
			typ, _, _ := unstructured.NestedString(u.Object, "type")
			name, _, _ := unstructured.NestedString(u.Object, "providerName")
			v, _, _ := unstructured.NestedString(u.Object, "version")
			add(typ, name, v)
		}
	}
	for _, op := range operatorProviders {
		gvr := schema.GroupVersionResource{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Resource: op.resource}
		list, err := dyn.Resource(gvr).List(ctx, listAll)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing the Cluster API operator's %s (%w): %w", gvr.GroupResource(), ErrUnknownState, err)
		}
		for _, u := range list.Items {
			v, _, _ := unstructured.NestedString(u.Object, "status", "installedVersion")
			add(op.typ, u.GetName(), v)
		}
	}
	return out, nil
}

// InventoryProblems lists what the target's inventory lacks for the
// source's providers: a provider missing, or at an older version.
func InventoryProblems(source, target map[string]inventoryEntry) []string {
	var out []string
	for _, k := range sortedKeys(source) {
		s := source[k]
		t, ok := target[k]
		if !ok {
			out = append(out, fmt.Sprintf("%s %s is not installed on the management cluster", k, s.Version))
			continue
		}
		sv, err1 := version.ParseSemantic(s.Version)
		tv, err2 := version.ParseSemantic(t.Version)
		if err1 != nil || err2 != nil {
			if s.Version != t.Version {
				out = append(out, fmt.Sprintf("%s: versions %q (kind) and %q (management cluster) cannot be compared", k, s.Version, t.Version))
			}
			continue
		}
		if tv.LessThan(sv) {
			out = append(out, fmt.Sprintf("%s is at %s on the management cluster, older than %s on kind", k, t.Version, s.Version))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pausedSets reads which Clusters and ClusterClasses in ns are paused.
func pausedSets(ctx context.Context, dyn dynamic.Interface, ns string) (clusters, paused, classes, pausedClasses []string, err error) {
	cl, err := dyn.Resource(clustersGVR).Namespace(ns).List(ctx, listAll)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("listing Clusters in %s (%w): %w", ns, ErrUnknownState, err)
	}
	for _, u := range cl.Items {
		clusters = append(clusters, u.GetName())
		if p, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); p {
			paused = append(paused, u.GetName())
		}
	}
	cc, err := dyn.Resource(clusterClassesGVR).Namespace(ns).List(ctx, listAll)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, nil, nil, fmt.Errorf("listing ClusterClasses in %s (%w): %w", ns, ErrUnknownState, err)
	}
	if cc != nil {
		for _, u := range cc.Items {
			classes = append(classes, u.GetName())
			if _, ok := u.GetAnnotations()[pausedAnnotation]; ok {
				pausedClasses = append(pausedClasses, u.GetName())
			}
		}
	}
	return clusters, paused, classes, pausedClasses, nil
}

// foreignPaused are the paused objects krops did not pause.
func foreignPaused(paused, ours []string) []string {
	var out []string
	for _, p := range paused {
		if !slices.Contains(ours, p) {
			out = append(out, p)
		}
	}
	return out
}

// record remembers the Clusters and ClusterClasses that are not paused now:
// from here on, clusterctl may pause them, and only they are krops's to
// unpause.
func (r *run) record(clusters, paused, classes, pausedClasses []string) error {
	for _, c := range clusters {
		if !slices.Contains(paused, c) && !slices.Contains(r.state.Clusters, c) {
			r.state.Clusters = append(r.state.Clusters, c)
		}
	}
	for _, c := range classes {
		if !slices.Contains(pausedClasses, c) && !slices.Contains(r.state.ClusterClasses, c) {
			r.state.ClusterClasses = append(r.state.ClusterClasses, c)
		}
	}
	sort.Strings(r.state.Clusters)
	sort.Strings(r.state.ClusterClasses)
	return r.state.save(r.o.StateDir)
}

// checkPaused refuses when a Cluster or ClusterClass is paused by someone
// other than krops: clusterctl refuses to move it, and unpausing it would
// override a decision that is not krops's.
func (r *run) checkPaused(paused, pausedClasses []string) error {
	if f := foreignPaused(paused, r.state.Clusters); len(f) > 0 {
		return fmt.Errorf("%w: Cluster(s) %s in %s are paused (spec.paused), and not by krops: clusterctl moves no paused Cluster. Unpause them in Git (or by hand) if they are meant to move, then rerun",
			ErrRefused, strings.Join(f, ", "), r.o.Namespace)
	}
	if f := foreignPaused(pausedClasses, r.state.ClusterClasses); len(f) > 0 {
		return fmt.Errorf("%w: ClusterClass(es) %s in %s carry %s, and not from krops: clusterctl moves no paused ClusterClass. Remove the annotation if they are meant to move, then rerun",
			ErrRefused, strings.Join(f, ", "), r.o.Namespace, pausedAnnotation)
	}
	return nil
}

func (r *run) clusterctl(ctx context.Context) (client.Client, error) {
	c, err := client.New(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("clusterctl client: %w", err)
	}
	return c, nil
}

func (r *run) kubeconfigs() (from, to client.Kubeconfig) {
	return client.Kubeconfig{Path: r.o.Source.Path, Context: r.o.Source.Context}, client.Kubeconfig{Path: r.o.Target.Path, Context: r.o.Target.Context}
}

// verify checks everything the move needs before anything on kind changes,
// writes the plan, and backs the objects up.
func (r *run) verify(ctx context.Context) error {
	p := r.o.Progress
	if err := r.waitProvisioned(ctx); err != nil {
		return err
	}
	return p.Step(ctx, "verifying the move and backing up to "+filepath.Join(r.o.StateDir, "backup"), func(ctx context.Context) error {
		srcInv, err := inventory(ctx, r.src.dyn)
		if err != nil {
			return fmt.Errorf("reading the installed Cluster API providers on kind: %w", err)
		}
		if len(srcInv) == 0 {
			return fmt.Errorf("%w: kind records no installed Cluster API provider (no clusterctl inventory, no Cluster API operator provider with status.installedVersion), so what the management cluster needs is unknown; check `kubectl --context %s get coreproviders,infrastructureproviders -A`, then rerun",
				ErrRefused, r.o.Source.Context)
		}
		dstInv, err := inventory(ctx, r.dst.dyn)
		if err != nil {
			return fmt.Errorf("reading the installed Cluster API providers on the management cluster: %w", err)
		}
		if problems := InventoryProblems(srcInv, dstInv); len(problems) > 0 {
			return fmt.Errorf("%w: the management cluster cannot take the move:\n  %s", ErrRefused, strings.Join(problems, "\n  "))
		}
		clusters, paused, classes, pausedClasses, err := pausedSets(ctx, r.src.dyn, r.o.Namespace)
		if err != nil {
			return err
		}
		if len(clusters) == 0 {
			return fmt.Errorf("%w: kind holds no Cluster in %s: nothing would move (is mgmt-namespace right?)", ErrRefused, r.o.Namespace)
		}
		if err := r.checkPaused(paused, pausedClasses); err != nil {
			return err
		}
		if err := r.unpause(ctx, r.src.dyn, "kind", paused, pausedClasses); err != nil {
			return err
		}
		if err := r.record(clusters, nil, classes, nil); err != nil {
			return err
		}
		cc, err := r.clusterctl(ctx)
		if err != nil {
			return err
		}
		from, to := r.kubeconfigs()
		if err := cc.Move(ctx, client.MoveOptions{FromKubeconfig: from, ToKubeconfig: to, Namespace: r.o.Namespace, DryRun: true}); err != nil {
			return fmt.Errorf("the move's dry run failed (nothing was moved): %w", err)
		}
		backup := filepath.Join(r.o.StateDir, "backup")
		if err := os.RemoveAll(backup); err != nil {
			return err
		}
		if err := os.MkdirAll(backup, 0o700); err != nil {
			return err
		}
		// The backup pauses and resumes the Clusters itself; they are in
		// the state already, so an interruption here is resumable.
		if err := cc.Move(ctx, client.MoveOptions{FromKubeconfig: from, Namespace: r.o.Namespace, ToDirectory: backup}); err != nil {
			return fmt.Errorf("backing up to %s (nothing was moved): %w", backup, err)
		}
		objs, err := readBackup(backup)
		if err != nil {
			return err
		}
		n := 0
		for _, o := range objs {
			if strings.HasPrefix(o, "Cluster ") {
				n++
			}
		}
		if n != len(clusters) {
			return fmt.Errorf("%w: the move's object graph holds %d Clusters but kind lists %d in %s; the backup in %s shows what it found", ErrRefused, n, len(clusters), r.o.Namespace, backup)
		}
		missing, err := leftBehind(ctx, r.src.dyn, r.o.Namespace, objs)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("%w: the move would leave behind, and deleting kind would lose: %s. clusterctl places an object only once every owner it references is placed: look for an owner reference to an object that no longer exists (`kubectl --context %s -n %s get <kind> <name> -o jsonpath='{.metadata.ownerReferences}'`), wait for the garbage collector to drop it, then rerun the pivot; the backup in %s shows what the graph holds",
				ErrRefused, strings.Join(missing, ", "), r.o.Source.Context, r.o.Namespace, backup)
		}
		plan := fmt.Sprintf("# krops pivot plan: %d objects, %d Clusters, from %s to %s (namespace %s)\n%s\n",
			len(objs), n, r.o.Source.Context, r.o.Target.Context, r.o.Namespace, strings.Join(objs, "\n"))
		if err := os.WriteFile(filepath.Join(r.o.StateDir, "plan.txt"), []byte(plan), 0o600); err != nil {
			return err
		}
		p.Infof("%d objects to move (%d Clusters); plan in %s", len(objs), n, filepath.Join(r.o.StateDir, "plan.txt"))
		return nil
	})
}

// readBackup lists the objects of a to-directory backup, sorted.
func readBackup(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		objs, err := kubeapply.Decode(b, filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			out = append(out, kubeapply.Describe(u))
		}
	}
	sort.Strings(out)
	return out, nil
}

// unpause clears the pause krops (through clusterctl) set, on the named
// objects only. The field is dropped, as clusterctl does, so krops owns no
// part of the spec Git writes.
func (r *run) unpause(ctx context.Context, dyn dynamic.Interface, where string, clusters, classes []string) error {
	for _, c := range clusters {
		if !slices.Contains(r.state.Clusters, c) {
			continue
		}
		if _, err := dyn.Resource(clustersGVR).Namespace(r.o.Namespace).Patch(ctx, c, types.MergePatchType, []byte(`{"spec":{"paused":null}}`), metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("unpausing Cluster %s/%s on %s: %w", r.o.Namespace, c, where, err)
		}
		r.o.Progress.Infof("unpaused Cluster %s on %s (paused by an earlier, interrupted run)", c, where)
	}
	for _, c := range classes {
		if !slices.Contains(r.state.ClusterClasses, c) {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, pausedAnnotation)
		if _, err := dyn.Resource(clusterClassesGVR).Namespace(r.o.Namespace).Patch(ctx, c, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("unpausing ClusterClass %s/%s on %s: %w", r.o.Namespace, c, where, err)
		}
		r.o.Progress.Infof("unpaused ClusterClass %s on %s (paused by an earlier, interrupted run)", c, where)
	}
	return nil
}

// suspendFlux suspends every Kustomization in the Flux namespace on kind,
// so nothing recreates what moves. Kind is never resumed: it is deleted.
func (r *run) suspendFlux(ctx context.Context) error {
	return r.o.Progress.Step(ctx, "suspending Flux on kind", func(ctx context.Context) error {
		// Every namespace: the appliers next to a Cluster (local-host's
		// workload Flux, a HelmRelease and a Kustomization that reach the
		// workload cluster through its kubeconfig Secret) would otherwise
		// keep upgrading what the management cluster's Flux now manages,
		// two Helm clients on one release until kind is deleted.
		n, already := 0, 0
		for _, k := range []struct {
			gvr  schema.GroupVersionResource
			kind string
		}{{seed.Kustomizations, "Kustomization"}, {helmReleases, "HelmRelease"}} {
			list, err := r.src.dyn.Resource(k.gvr).Namespace(metav1.NamespaceAll).List(ctx, listAll)
			if apierrors.IsNotFound(err) && k.gvr == helmReleases {
				continue // helm-controller's CRD is not installed: none to suspend
			}
			if err != nil {
				return fmt.Errorf("listing Flux %ss on kind (nothing was suspended or moved): %w", k.kind, err)
			}
			for _, u := range list.Items {
				if s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); s {
					already++
					continue
				}
				if _, err := r.src.dyn.Resource(k.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"suspend":true}}`, seed.PivotAnnotation, filepath.Base(r.o.StateDir))), metav1.PatchOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("suspending %s %s/%s on kind (nothing was moved; rerun): %w", k.kind, u.GetNamespace(), u.GetName(), err)
				}
				n++
			}
		}
		r.o.Progress.Infof("%d Kustomizations and HelmReleases suspended, %d already were", n, already)
		return nil
	})
}

// move runs clusterctl's move, or resumes one an earlier run began.
func (r *run) move(ctx context.Context) error {
	return r.o.Progress.Step(ctx, fmt.Sprintf("moving the Cluster API objects in %s to the management cluster", r.o.Namespace), func(ctx context.Context) error {
		if !r.state.Moved {
			clusters, paused, classes, pausedClasses, err := pausedSets(ctx, r.src.dyn, r.o.Namespace)
			if err != nil {
				return err
			}
			if err := r.checkPaused(paused, pausedClasses); err != nil {
				return err
			}
			if !r.state.MoveStarted {
				if err := r.record(clusters, paused, classes, pausedClasses); err != nil {
					return err
				}
				r.state.MoveStarted = true
				if err := r.state.save(r.o.StateDir); err != nil {
					return err
				}
			}
			if err := r.unpause(ctx, r.src.dyn, "kind", paused, pausedClasses); err != nil {
				return err
			}
			if len(clusters) == 0 {
				r.o.Progress.Infof("kind holds no Cluster any more: the earlier run moved them; finishing")
			} else if err := r.runMove(ctx); err != nil {
				return err
			}
			r.state.Moved = true
			if err := r.state.save(r.o.StateDir); err != nil {
				return err
			}
		}
		return r.afterMove(ctx)
	})
}

func (r *run) runMove(ctx context.Context) error {
	err := Move(ctx, MoveOptions{From: r.o.Source, To: r.target, Namespace: r.o.Namespace, Mutator: r.o.MoveMutator})
	if err != nil {
		return fmt.Errorf("%w. Rerun the pivot: it resumes the move. Do not delete moved Cluster, AWSManaged*, MachinePool or Dev* objects on the management cluster to work around this: providers treat that as deprovisioning", err)
	}
	return nil
}

// MoveOptions is one move of the Cluster API objects in a namespace.
type MoveOptions struct {
	From, To  kubecfg.Ref
	Namespace string
	// Mutator, when set, sees every object before it is created on To.
	Mutator func(kind, namespace, name string)
}

// Move moves with the clusterctl client library: the same object graph,
// ordering and retries as `clusterctl move`, in this process.
func Move(ctx context.Context, o MoveOptions) error {
	cc, err := client.New(ctx, "")
	if err != nil {
		return fmt.Errorf("clusterctl client: %w", err)
	}
	opts := client.MoveOptions{
		FromKubeconfig: client.Kubeconfig{Path: o.From.Path, Context: o.From.Context},
		ToKubeconfig:   client.Kubeconfig{Path: o.To.Path, Context: o.To.Context},
		Namespace:      o.Namespace,
	}
	if o.Mutator != nil {
		opts.ExperimentalResourceMutators = append(opts.ExperimentalResourceMutators, func(u *unstructured.Unstructured) error {
			o.Mutator(u.GetKind(), u.GetNamespace(), u.GetName())
			return nil
		})
	}
	if err := cc.Move(ctx, opts); err != nil {
		return fmt.Errorf("clusterctl move: %w", err)
	}
	return nil
}

// afterMove checks every moved Cluster is on the target, clears the pause
// krops set there (clusterctl clears it unless it was interrupted), and
// applies the fallbacks for objects the move skips.
func (r *run) afterMove(ctx context.Context) error {
	clusters, paused, _, pausedClasses, err := pausedSets(ctx, r.dst.dyn, r.o.Namespace)
	if err != nil {
		return fmt.Errorf("on the management cluster: %w; kind is kept, rerun the pivot once the management cluster answers", err)
	}
	var missing []string
	for _, c := range r.state.Clusters {
		if !slices.Contains(clusters, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("Cluster(s) %s, which the move took from kind, are not on the management cluster: check kind (`kubectl --context %s -n %s get clusters`) and the backup in %s before anything else, and rerun the pivot",
			strings.Join(missing, ", "), r.o.Source.Context, r.o.Namespace, filepath.Join(r.o.StateDir, "backup"))
	}
	if err := r.unpause(ctx, r.dst.dyn, "the management cluster", paused, pausedClasses); err != nil {
		return err
	}
	if len(r.o.Fallbacks) == 0 {
		return nil
	}
	ap, err := kubeapply.New(r.dst.cfg, FieldManager)
	if err != nil {
		return err
	}
	for _, fb := range r.o.Fallbacks {
		ok, err := ap.Exists(ctx, fb.Resource, r.o.Namespace, fb.Name)
		if err != nil {
			return fmt.Errorf("move fallback %s %s: %w", fb.Resource, fb.Name, err)
		}
		if ok {
			continue
		}
		objs, err := kubeapply.Decode(fb.Manifest, fb.Source)
		if err != nil {
			return err
		}
		if _, err := ap.Apply(ctx, objs); err != nil {
			return fmt.Errorf("move fallback %s: %w", fb.Source, err)
		}
		r.o.Progress.Infof("%s %s was not moved: applied %s", fb.Resource, fb.Name, fb.Source)
	}
	return nil
}

func (r *run) seed(ctx context.Context) error {
	if r.o.Seed == nil {
		return nil
	}
	return r.o.Seed(ctx, r.target)
}

// deleteKind removes kind when the guard holds: the management cluster
// lists every moved Cluster, and the caller's own checks pass.
func (r *run) deleteKind(ctx context.Context) error {
	if r.o.DeleteKind == nil {
		r.o.Progress.Infof("kind is kept (PIVOT_SKIP_DELETE=1)")
		return nil
	}
	return r.o.Progress.Step(ctx, "deleting kind", func(ctx context.Context) error {
		clusters, _, _, _, err := pausedSets(ctx, r.dst.dyn, r.o.Namespace)
		if err != nil {
			return fmt.Errorf("kind is kept: the management cluster's Clusters cannot be listed: %w", err)
		}
		if len(clusters) == 0 {
			return fmt.Errorf("%w: kind is kept: the management cluster lists no Cluster in %s", ErrRefused, r.o.Namespace)
		}
		for _, c := range r.state.Clusters {
			if !slices.Contains(clusters, c) {
				return fmt.Errorf("%w: kind is kept: Cluster %s is not on the management cluster", ErrRefused, c)
			}
		}
		if r.o.Guard != nil {
			if err := r.o.Guard(ctx); err != nil {
				return fmt.Errorf("%w: kind is kept: %v", ErrRefused, err)
			}
		}
		return r.o.DeleteKind(ctx)
	})
}
