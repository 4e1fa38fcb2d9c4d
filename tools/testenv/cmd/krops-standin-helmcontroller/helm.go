package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// outcome is what one Helm action did.
type outcome struct {
	reason                          string // Install or Upgrade
	version                         int
	chart, chartVersion, appVersion string
	firstDeployed                   time.Time
}

func (o outcome) verb() string { return strings.ToLower(o.reason) }

// helmConfig is a Helm action configuration storing releases in
// rel.storage and applying namespaced objects without a namespace in
// rel.namespace (Helm's client takes the second from the getter).
func (r *reconciler) helmConfig(rel release) (*action.Configuration, error) {
	storage := rel.storage
	settings := cli.New()
	settings.KubeConfig = r.kubeconfig
	if rel.kubeconfig != "" {
		settings.KubeConfig = rel.kubeconfig
	}
	settings.SetNamespace(rel.namespace)
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	if err := cfg.Init(settings.RESTClientGetter(), storage, "secret"); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// ensure installs rel from ch, or upgrades it when Helm has it already.
func (r *reconciler) ensure(ctx context.Context, hr *unstructured.Unstructured, rel release, ch *chart.Chart, values map[string]any) (outcome, error) {
	done := outcome{reason: "Install", chart: ch.Metadata.Name, chartVersion: ch.Metadata.Version, appVersion: ch.Metadata.AppVersion}
	cfg, err := r.helmConfig(rel)
	if err != nil {
		return done, err
	}
	timeout := 5 * time.Minute
	if t, _, _ := unstructured.NestedString(hr.Object, "spec", "timeout"); t != "" {
		if timeout, err = time.ParseDuration(t); err != nil {
			return done, fmt.Errorf("spec.timeout %q: %w", t, err)
		}
	}
	strategy := func(phase string) kube.WaitStrategy {
		if off, _, _ := unstructured.NestedBool(hr.Object, "spec", phase, "disableWait"); off {
			return kube.HookOnlyStrategy
		}
		return kube.StatusWatcherStrategy
	}
	crds := func(phase, def string) string {
		if p, _, _ := unstructured.NestedString(hr.Object, "spec", phase, "crds"); p != "" {
			return p
		}
		return def
	}

	last, err := action.NewGet(cfg).Run(rel.name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		last = nil
	case err != nil:
		return done, fmt.Errorf("reading release %s: %w", rel, err)
	}
	if prev, ok := last.(*releasev1.Release); ok && prev.Info != nil && prev.Info.Status.IsPending() {
		// A controller that died mid-action leaves the release pending and
		// Helm refuses to touch it; helm-controller unlocks it the same way.
		prev.Info.Status = "failed"
		prev.Info.Description = "release was pending when the controller restarted"
		if err := cfg.Releases.Update(prev); err != nil {
			return done, fmt.Errorf("unlocking pending release %s: %w", rel, err)
		}
	}
	var made any
	if last == nil {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace = rel.name, rel.namespace
		in.CreateNamespace, _, _ = unstructured.NestedBool(hr.Object, "spec", "install", "createNamespace")
		in.SkipCRDs = crds("install", "Create") == "Skip"
		in.WaitStrategy, in.Timeout = strategy("install"), timeout
		made, err = in.RunWithContext(ctx, ch, values)
	} else {
		done.reason = "Upgrade"
		if p := crds("upgrade", "Skip"); p != "Skip" {
			if err := r.applyCRDs(ctx, ch, p == "CreateReplace"); err != nil {
				return done, err
			}
		}
		up := action.NewUpgrade(cfg)
		up.Namespace, up.MaxHistory = rel.namespace, maxHistory
		up.WaitStrategy, up.Timeout = strategy("upgrade"), timeout
		// As helm-controller upgrades with Helm 4: server-side apply when
		// the last release used it, and then conflicts forced (a release
		// another Helm client installed, such as krops-pivot's cert-manager,
		// is owned by that client's field manager); resources without Helm's
		// annotations adopted unless spec.upgrade.disableTakeOwnership.
		prev, _ := last.(*releasev1.Release)
		ssa := prev != nil && prev.ApplyMethod == string(releasev1.ApplyMethodServerSideApply)
		up.ServerSideApply, up.ForceConflicts = strconv.FormatBool(ssa), ssa
		noTake, _, _ := unstructured.NestedBool(hr.Object, "spec", "upgrade", "disableTakeOwnership")
		up.TakeOwnership = !noTake
		made, err = up.RunWithContext(ctx, rel.name, ch, values)
	}
	if err != nil {
		return done, err
	}
	if m, ok := made.(*releasev1.Release); ok {
		done.version = m.Version
		if m.Info != nil {
			done.firstDeployed = m.Info.FirstDeployed
		}
	}
	return done, nil
}

// applyCRDs creates the chart's crds/ that are missing and, when replace is
// set, replaces those that differ (the CreateReplace policy): Helm's
// upgrade never touches crds/.
func (r *reconciler) applyCRDs(ctx context.Context, ch *chart.Chart, replace bool) error {
	for _, f := range ch.CRDObjects() {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(f.File.Data), 4096)
		for {
			var o unstructured.Unstructured
			if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("chart %s %s: %w", ch.Metadata.Name, f.Name, err)
			}
			if len(o.Object) == 0 {
				continue
			}
			ri := r.dyn.Resource(crdsGVR)
			if !replace {
				if _, err := ri.Create(ctx, &o, metav1.CreateOptions{FieldManager: "helm-controller"}); err != nil && !apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("creating CRD %s: %w", o.GetName(), err)
				}
				continue
			}
			body, err := o.MarshalJSON()
			if err != nil {
				return err
			}
			force := true
			if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "helm-controller", Force: &force}); err != nil {
				return fmt.Errorf("applying CRD %s: %w", o.GetName(), err)
			}
		}
	}
	return nil
}

// finalize uninstalls hr's release (unless it is suspended, as
// helm-controller leaves a suspended release alone) and deletes the
// HelmChart made for it.
func (r *reconciler) finalize(ctx context.Context, hr *unstructured.Unstructured) error {
	rel := releaseOf(hr)
	if suspended, _, _ := unstructured.NestedBool(hr.Object, "spec", "suspend"); !suspended {
		done, err := r.remote(ctx, hr, &rel)
		if err != nil {
			return err
		}
		defer done()
		cfg, err := r.helmConfig(rel)
		if err != nil {
			return err
		}
		if _, err := action.NewGet(cfg).Run(rel.name); err == nil {
			un := action.NewUninstall(cfg)
			un.WaitStrategy, un.Timeout = kube.StatusWatcherStrategy, 5*time.Minute
			if _, err := un.Run(rel.name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
				return fmt.Errorf("uninstalling release %s: %w", rel, err)
			}
			r.logger.Printf("helmrelease %s/%s: uninstalled release %s", hr.GetNamespace(), hr.GetName(), rel)
		} else if !errors.Is(err, driver.ErrReleaseNotFound) {
			return fmt.Errorf("reading release %s: %w", rel, err)
		}
	}
	if spec, ok, _ := unstructured.NestedMap(hr.Object, "spec", "chart", "spec"); ok {
		src, _ := spec["sourceRef"].(map[string]any)
		ns, _ := src["namespace"].(string)
		if ns == "" {
			ns = hr.GetNamespace()
		}
		err := r.dyn.Resource(helmChartsGVR).Namespace(ns).Delete(ctx, hr.GetNamespace()+"-"+hr.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting HelmChart %s/%s-%s: %w", ns, hr.GetNamespace(), hr.GetName(), err)
		}
	}
	return nil
}
