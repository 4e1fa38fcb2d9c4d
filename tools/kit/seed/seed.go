// Package seed hands a cluster over to Flux: the Flux Operator (Helm), the
// run metadata, the secrets Flux reads with, the FluxInstance, and the waits
// until Flux has taken over. Every step is idempotent: on a seeded cluster a
// rerun changes nothing (no resourceVersion moves).
package seed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// FieldManager owns every field krops applies.
const FieldManager = "krops"

// FluxInstanceName is the FluxInstance krops applies.
const FluxInstanceName = "flux"

// Sync kinds.
const (
	SyncGitHub = "github"
	SyncOCI    = "oci"
)

var fluxInstances = schema.GroupVersionResource{Group: "fluxcd.controlplane.io", Version: "v1", Resource: "fluxinstances"}

// Kustomizations are Flux's Kustomization resource.
var Kustomizations = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}

// Secrets are the values Flux reads the repository with.
type Secrets struct {
	GitHubUser  string
	GitHubToken string
	// AgeIdentity is the age key file's content; AgePublic its recipient.
	AgeIdentity []byte
	AgePublic   string
}

// Sync says where Flux reads the environment from.
type Sync struct {
	Kind string // SyncGitHub or SyncOCI
	// URL is the repository (github) or oci://<registry>/<repository>.
	URL string
	// Ref is refs/heads/<branch> (github) or the tag (oci).
	Ref  string
	Path string
	// Insecure: the OCI registry speaks plain HTTP (the local registry).
	Insecure bool
}

// Charts is where this cluster's Flux fetches the charts the trees install
// (cert-manager, cluster-api-operator) when the run sets one repository for
// all of them (KROPS_CHART_REPOSITORY); empty Repository means each chart's
// upstream repository, as the trees say.
type Charts struct {
	// Repository is oci://<registry>/<path> or an http(s):// chart
	// repository, as this cluster's pods reach it.
	Repository string
	// Insecure: the OCI registry speaks plain HTTP (the local registry).
	Insecure bool
}

// Providers is where the Cluster API operator on this cluster fetches the
// providers' components when the run mirrors their releases
// (KROPS_PROVIDER_REPOSITORY); an empty Repository means their GitHub
// releases, as the trees say.
type Providers struct {
	// Repository is oci://<registry>/<path>, as this cluster's pods reach
	// it; each release is the artifact <path>/<GitHub repository>/releases
	// tagged with its version.
	Repository string
	// PlainHTTP: the registry speaks plain HTTP (the local registry).
	PlainHTTP bool
}

// Options describe one seeding.
type Options struct {
	Cluster     kubecfg.Ref
	Environment string
	Namespace   string // the Flux namespace
	// PATSecret and AgeSecret are the Secret names (bootstrap.toml).
	PATSecret, AgeSecret string
	Sync                 Sync
	Charts               Charts
	Providers            Providers
	// FluxRegistry is where the clusters pull the Flux controllers from
	// (FluxInstance distribution.registry); empty means ghcr.io/fluxcd.
	FluxRegistry string
	Secrets      Secrets
	// Run is the run metadata: RunID set means reuse the ConfigMap when it
	// is there; CopyFrom, when set, copies it from another cluster.
	Run      runmeta.Options
	CopyFrom *kubecfg.Ref
	Operator OperatorOptions
	// Wait lists the Kustomizations (in the Flux namespace) to wait for
	// with the FluxInstance; zero WaitTimeout skips every wait, and it
	// bounds each stage of the chain.
	Wait        []string
	WaitTimeout time.Duration
	// Silence ends a wait on the seeded cluster with a
	// *kubewait.SilentError once its API server has not answered for this
	// long (its node stopped, its engine gone), instead of waiting out
	// WaitTimeout; zero waits it out. A workload cluster's own Flux is
	// waited for without it: while Cluster API still builds that cluster
	// its load balancer may not answer yet, which is not a failure.
	Silence time.Duration
	// Workloads are Clusters in WorkloadNamespace whose own flux-system
	// Kustomization the seed then follows, one after the other.
	Workloads         []string
	WorkloadNamespace string
	// Endpoint, when set, gives the address a workload cluster is reached
	// at instead of the one Cluster API recorded (the provider's rewrite
	// outside the provider's network); "" keeps the recorded one.
	Endpoint func(ctx context.Context, cluster string, kubeconfig []byte) (string, error)
	Progress *ui.Progress
}

// Seed runs every step in order and stops at the first failure.
func Seed(ctx context.Context, o Options) error {
	cfg, err := o.Cluster.RESTConfig()
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p := o.Progress
	if err := checkNotPivoting(ctx, dyn); err != nil {
		return err
	}
	if err := p.Step(ctx, "Flux namespace "+o.Namespace, func(ctx context.Context) error { return ensureNamespace(ctx, kc, o.Namespace) }); err != nil {
		return err
	}
	if err := p.Step(ctx, "Flux Operator (chart flux-operator "+o.Operator.Version+")", func(ctx context.Context) error {
		changed, err := InstallOperator(ctx, o.Cluster, o.Namespace, o.Operator)
		if err == nil && !changed {
			p.Infof("release flux-operator is already at %s: unchanged", o.Operator.Version)
		}
		return err
	}); err != nil {
		return err
	}
	if err := p.Step(ctx, "run metadata (ConfigMap "+runmeta.ConfigMapName+")", func(ctx context.Context) error {
		tags, action, err := runMetadata(ctx, kc, o)
		if err == nil {
			p.Infof("run %s (%s)", tags.RunID, action)
		}
		return err
	}); err != nil {
		return err
	}
	if err := p.Step(ctx, "sync source (ConfigMap "+SyncConfigMapName+")", func(ctx context.Context) error { return applySyncVars(ctx, kc, o) }); err != nil {
		return err
	}
	if o.Sync.Kind == SyncGitHub {
		if err := p.Step(ctx, "secrets "+o.PATSecret+" and "+o.AgeSecret, func(ctx context.Context) error { return applySecrets(ctx, kc, o) }); err != nil {
			return err
		}
	}
	if err := p.Step(ctx, "FluxInstance "+o.Namespace+"/"+FluxInstanceName, func(ctx context.Context) error { return applyInstance(ctx, dyn, o) }); err != nil {
		return err
	}
	if o.WaitTimeout == 0 {
		return nil
	}
	return waitChain(ctx, o, kc, dyn)
}

// streamWarnings prints each Warning event recorded in ns while the wait
// runs (Flux's controllers say there why something does not reconcile),
// once per object and reason; it returns when ctx ends.
func streamWarnings(ctx context.Context, kc kubernetes.Interface, ns string, p *ui.Progress) {
	opts := metav1.ListOptions{FieldSelector: "type=Warning"}
	list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: opts.FieldSelector, Limit: 1})
	if err != nil {
		return
	}
	opts.ResourceVersion = list.ResourceVersion // only what happens from now on
	w, err := kc.CoreV1().Events(ns).Watch(ctx, opts)
	if err != nil {
		return
	}
	defer w.Stop()
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, open := <-w.ResultChan():
			if !open {
				return
			}
			e, ok := ev.Object.(*corev1.Event)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			obj := e.InvolvedObject
			// Once per object and reason: a retrying controller repeats the
			// same failure with details that change (temporary paths).
			key := obj.Kind + "/" + obj.Name + "|" + e.Reason
			if seen[key] {
				continue
			}
			seen[key] = true
			p.Warnf("%s %s/%s: %s: %s", obj.Kind, obj.Namespace, obj.Name, e.Reason, strings.TrimSpace(e.Message))
		}
	}
}

func ensureNamespace(ctx context.Context, kc kubernetes.Interface, ns string) error {
	_, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// PivotAnnotation marks a Flux Kustomization or HelmRelease krops-pivot
// suspended on kind before the move; its value is the pivot's run id.
// From then until the pivot deletes kind, kind is mid-pivot.
const PivotAnnotation = "krops.io/suspended-by-pivot"

// ErrPivoting means the cluster is in the middle of a pivot: krops-pivot
// suspended its Flux and may have moved Cluster API objects away. Seeding
// it again could resume Flux there, which would recreate what the move
// took and have two sets of controllers act on one cluster.
var ErrPivoting = errors.New("a pivot is under way on this cluster")

// checkNotPivoting returns ErrPivoting, naming the evidence, when a
// Kustomization on the cluster carries PivotAnnotation and is suspended. A
// cluster without Flux's CRD has none.
func checkNotPivoting(ctx context.Context, dyn dynamic.Interface) error {
	list, err := dyn.Resource(Kustomizations).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing Flux Kustomizations to see whether a pivot is under way (nothing was changed): %w", err)
	}
	for _, u := range list.Items {
		run, marked := u.GetAnnotations()[PivotAnnotation]
		if s, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); marked && s {
			return fmt.Errorf("%w: pivot run %s suspended Flux here (Kustomization %s/%s carries %s)", ErrPivoting, run, u.GetNamespace(), u.GetName(), PivotAnnotation)
		}
	}
	return nil
}

// ErrRunMetadata means the cluster's krops-run ConfigMap cannot be used.
var ErrRunMetadata = errors.New("run metadata")

// runMetadata writes, keeps or copies the krops-run ConfigMap.
func runMetadata(ctx context.Context, kc kubernetes.Interface, o Options) (runmeta.Tags, string, error) {
	cms := kc.CoreV1().ConfigMaps(o.Namespace)
	cur, err := cms.Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	present := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return runmeta.Tags{}, "", fmt.Errorf("reading ConfigMap %s/%s: %w", o.Namespace, runmeta.ConfigMapName, err)
	}
	if env := labelOf(present, cur); env != "" && env != o.Environment {
		// Every environment's kind and management clusters share names:
		// this one is another environment's, and seeding it would hand
		// that environment's Flux this one's tree.
		return runmeta.Tags{}, "", fmt.Errorf("%w: ConfigMap %s/%s on this cluster belongs to environment %s (run %s), not %s: this is %s's cluster; nothing was changed",
			ErrRunMetadata, o.Namespace, runmeta.ConfigMapName, env, cur.Data[runmeta.KeyRunID], o.Environment, env)
	}
	var want runmeta.Tags
	action := ""
	switch {
	case o.CopyFrom != nil:
		want, err = copyRun(ctx, *o.CopyFrom, o.Namespace)
		if err != nil {
			return runmeta.Tags{}, "", err
		}
		action = "copied from " + o.CopyFrom.Context
	case present && o.Run.RunID != "":
		tags, err := runmeta.FromData(cur.Data)
		if err != nil {
			return runmeta.Tags{}, "", fmt.Errorf("%w: %v: delete it, or unset KROPS_RUN_ID to start a new run", ErrRunMetadata, err)
		}
		if tags.RunID != o.Run.RunID {
			return runmeta.Tags{}, "", fmt.Errorf("%w: ConfigMap %s/%s belongs to run %s, not KROPS_RUN_ID=%s", ErrRunMetadata, o.Namespace, runmeta.ConfigMapName, tags.RunID, o.Run.RunID)
		}
		return tags, "kept", labelEnvironment(ctx, cms, cur, o.Environment)
	case present:
		// A rerun without KROPS_RUN_ID continues the cluster's run, as long
		// as what is there is valid.
		tags, err := runmeta.FromData(cur.Data)
		if err != nil {
			return runmeta.Tags{}, "", fmt.Errorf("%w: %v: delete it to start a new run", ErrRunMetadata, err)
		}
		return tags, "kept", labelEnvironment(ctx, cms, cur, o.Environment)
	default:
		want, err = runmeta.New(ctx, o.Run)
		if err != nil {
			return runmeta.Tags{}, "", fmt.Errorf("%w: %v", ErrRunMetadata, err)
		}
		action = "new"
	}
	if present && maps.Equal(cur.Data, want.Data()) && cur.Labels[runmeta.LabelEnvironment] == o.Environment {
		return want, "unchanged", nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: runmeta.ConfigMapName, Namespace: o.Namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "krops", runmeta.LabelEnvironment: o.Environment}}, Data: want.Data()}
	if present {
		cm.ResourceVersion = cur.ResourceVersion
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
	} else {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
	}
	if err != nil {
		return runmeta.Tags{}, "", fmt.Errorf("writing ConfigMap %s/%s: %w", o.Namespace, runmeta.ConfigMapName, err)
	}
	return want, action, nil
}

// labelOf is the environment label of a ConfigMap that is there.
func labelOf(present bool, cm *corev1.ConfigMap) string {
	if !present || cm == nil {
		return ""
	}
	return cm.Labels[runmeta.LabelEnvironment]
}

// labelEnvironment labels a kept krops-run ConfigMap with its environment
// when an earlier krops wrote it without the label, so a teardown can tell
// whose it is.
func labelEnvironment(ctx context.Context, cms typedcorev1.ConfigMapInterface, cur *corev1.ConfigMap, env string) error {
	if cur.Labels[runmeta.LabelEnvironment] == env {
		return nil
	}
	cm := cur.DeepCopy()
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[runmeta.LabelEnvironment] = env
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("labelling ConfigMap %s/%s with its environment %s: %w", cm.Namespace, cm.Name, env, err)
	}
	return nil
}

// copyRun reads the four keys exactly from another cluster; it never
// invents one.
func copyRun(ctx context.Context, from kubecfg.Ref, ns string) (runmeta.Tags, error) {
	cfg, err := from.RESTConfig()
	if err != nil {
		return runmeta.Tags{}, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return runmeta.Tags{}, err
	}
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, runmeta.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return runmeta.Tags{}, fmt.Errorf("%w: reading ConfigMap %s/%s from %s: %v", ErrRunMetadata, ns, runmeta.ConfigMapName, from.Context, err)
	}
	tags, err := runmeta.FromData(cm.Data)
	if err != nil {
		return runmeta.Tags{}, fmt.Errorf("%w: the source cluster's %v", ErrRunMetadata, err)
	}
	return tags, nil
}

// applySecrets writes the PAT and age Secrets, each replaced whole so no
// old key lingers, and only when they differ.
func applySecrets(ctx context.Context, kc kubernetes.Interface, o Options) error {
	user := o.Secrets.GitHubUser
	if user == "" {
		user = "git"
	}
	pat := map[string][]byte{"username": []byte(user), "password": []byte(o.Secrets.GitHubToken)}
	if err := putSecret(ctx, kc, o.Namespace, o.PATSecret, pat); err != nil {
		return err
	}
	ageData := map[string][]byte{o.Secrets.AgePublic + ".agekey": o.Secrets.AgeIdentity}
	for _, ns := range []string{o.Namespace, "default"} {
		if err := putSecret(ctx, kc, ns, o.AgeSecret, ageData); err != nil {
			return err
		}
	}
	return nil
}

// putSecret makes the Secret hold exactly data. Errors name the Secret,
// never its values.
func putSecret(ctx context.Context, kc kubernetes.Interface, ns, name string, data map[string][]byte) error {
	secrets := kc.CoreV1().Secrets(ns)
	cur, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "krops"}},
			Type: corev1.SecretTypeOpaque, Data: data}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %s", ns, name, apiReason(err))
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading Secret %s/%s: %s", ns, name, apiReason(err))
	}
	if maps.EqualFunc(cur.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return nil
	}
	cur.Data, cur.StringData = data, nil
	if _, err := secrets.Update(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("replacing Secret %s/%s: %s", ns, name, apiReason(err))
	}
	return nil
}

// SyncConfigMapName is the ConfigMap in the Flux namespace that says where
// this cluster's Flux reads the environment and its charts from. The trees
// substitute it (postBuild substituteFrom), so what they hand on, such as
// the workload clusters' FluxInstance, follows the configured registry and
// repository instead of naming them, and their HelmRepositories follow a
// chart repository the run sets.
const SyncConfigMapName = "krops-sync"

// SyncVars are the variables of SyncConfigMapName. The chart, provider and
// Flux registry variables are there only when the run sets them: absent,
// the trees' defaults (each chart's upstream, each provider's GitHub
// releases, ghcr.io/fluxcd) apply.
func SyncVars(o Options) map[string]string {
	s, c, p := o.Sync, o.Charts, o.Providers
	vars := map[string]string{"KROPS_SYNC_KIND": s.Kind, "KROPS_SYNC_URL": s.URL, "KROPS_SYNC_REF": s.Ref}
	if c.Repository != "" {
		vars["KROPS_CHART_REPOSITORY"] = strings.TrimSuffix(c.Repository, "/")
		vars["KROPS_CHART_REPOSITORY_TYPE"] = "default"
		if strings.HasPrefix(c.Repository, "oci://") {
			vars["KROPS_CHART_REPOSITORY_TYPE"] = "oci"
			// For charts an OCIRepository fetches (the workload's
			// Podinfo), which an HTTP Helm repository cannot serve.
			vars["KROPS_OCI_CHART_REPOSITORY"] = vars["KROPS_CHART_REPOSITORY"]
		}
		vars["KROPS_CHART_REPOSITORY_INSECURE"] = strconv.FormatBool(c.Insecure)
	}
	if p.Repository != "" {
		// The provider objects' fetchConfig key (oci instead of url) and
		// its prefix, in the operator's own notation: no scheme, and
		// http:// for a plain-HTTP registry.
		repo := strings.TrimSuffix(strings.TrimPrefix(p.Repository, "oci://"), "/")
		if p.PlainHTTP {
			repo = "http://" + repo
		}
		vars["KROPS_PROVIDER_FETCH"] = "oci"
		vars["KROPS_PROVIDER_REPOSITORY"] = repo
	}
	if o.FluxRegistry != "" && o.FluxRegistry != config.DefaultFluxRegistry {
		vars["KROPS_FLUX_REGISTRY"] = o.FluxRegistry
	}
	return vars
}

// applySyncVars makes the ConfigMap hold exactly SyncVars.
func applySyncVars(ctx context.Context, kc kubernetes.Interface, o Options) error {
	cms := kc.CoreV1().ConfigMaps(o.Namespace)
	want := SyncVars(o)
	cur, err := cms.Get(ctx, SyncConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SyncConfigMapName, Namespace: o.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "krops"}}, Data: want}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", o.Namespace, SyncConfigMapName, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s/%s: %w", o.Namespace, SyncConfigMapName, err)
	case maps.Equal(cur.Data, want):
		return nil
	}
	cur.Data = want
	if _, err := cms.Update(ctx, cur, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("replacing ConfigMap %s/%s: %w", o.Namespace, SyncConfigMapName, err)
	}
	return nil
}

// apiReason keeps an API error's reason, never an echoed object.
func apiReason(err error) string {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return string(se.ErrStatus.Reason) + " (" + fmt.Sprint(se.ErrStatus.Code) + ")"
	}
	return err.Error()
}

func fluxRegistry(r string) string {
	if r == "" {
		return config.DefaultFluxRegistry
	}
	return r
}

// Instance renders the FluxInstance.
func Instance(o Options) *unstructured.Unstructured {
	sync := map[string]any{"kind": "GitRepository", "url": o.Sync.URL, "ref": o.Sync.Ref, "path": o.Sync.Path}
	spec := map[string]any{
		"distribution": map[string]any{"version": "2.x", "registry": fluxRegistry(o.FluxRegistry)},
		"components":   []any{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"},
		"cluster":      map[string]any{"type": "kubernetes", "networkPolicy": true},
	}
	if o.Sync.Kind == SyncGitHub {
		sync["pullSecret"] = o.PATSecret
	} else {
		sync["kind"] = "OCIRepository"
		if o.Sync.Insecure {
			// The local registry speaks plain HTTP; FluxInstance has no
			// field for it, so the generated OCIRepository is patched.
			spec["kustomize"] = map[string]any{"patches": []any{map[string]any{
				"target": map[string]any{"kind": "OCIRepository"},
				"patch":  "- op: add\n  path: /spec/insecure\n  value: true\n",
			}}}
		}
	}
	spec["sync"] = sync
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "fluxcd.controlplane.io/v1",
		"kind":       "FluxInstance",
		"metadata":   map[string]any{"name": FluxInstanceName, "namespace": o.Namespace},
		"spec":       spec,
	}}
	return u
}

// applyInstance server-side applies the FluxInstance with krops's field
// manager; an unchanged instance is not written.
func applyInstance(ctx context.Context, dyn dynamic.Interface, o Options) error {
	want := Instance(o)
	ri := dyn.Resource(fluxInstances).Namespace(o.Namespace)
	if cur, err := ri.Get(ctx, FluxInstanceName, metav1.GetOptions{}); err == nil {
		if specEqual(cur, want) {
			return nil
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading FluxInstance %s/%s: %w", o.Namespace, FluxInstanceName, err)
	}
	if _, err := ri.Apply(ctx, FluxInstanceName, want, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		if apierrors.IsNotFound(err) {
			// Applying answers NotFound only when the type is not served.
			return fmt.Errorf("the cluster does not serve FluxInstance (fluxcd.controlplane.io/v1): the Flux Operator's CRDs are missing: %w", err)
		}
		return fmt.Errorf("applying FluxInstance %s/%s: %w", o.Namespace, FluxInstanceName, err)
	}
	return nil
}

// specEqual compares what krops sets with what is there, after the API
// server's defaulting: every field krops sets must hold krops's value.
func specEqual(cur, want *unstructured.Unstructured) bool {
	return contains(cur.Object["spec"], want.Object["spec"])
}

func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(have) == fmt.Sprint(want)
}
