package seed

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/kubecfg"
)

// OCIRepositories are Flux's OCIRepository resource.
var OCIRepositories = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}

// ReconcileAnnotation is the annotation Flux's controllers reconcile on
// when its value changes (what `flux reconcile` sets).
const ReconcileAnnotation = "reconcile.fluxcd.io/requestedAt"

// RequestReconcile asks Flux on the cluster to fetch the OCIRepository
// ns/name now instead of at its interval; the value it set is returned, to
// compare with the status's lastHandledReconcileAt.
func RequestReconcile(ctx context.Context, cluster kubecfg.Ref, ns, name string, now time.Time) (string, error) {
	cfg, err := cluster.RESTConfig()
	if err != nil {
		return "", err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	at := now.UTC().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, ReconcileAnnotation, at)
	if _, err := dyn.Resource(OCIRepositories).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return "", fmt.Errorf("requesting a reconcile of OCIRepository %s/%s on %s: %w", ns, name, cluster, err)
	}
	return at, nil
}
