package testenv

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// capiProviderKinds are the Cluster API operator's provider kinds, with the
// prefix clusterctl's inventory gives each type's entries.
var capiProviderKinds = []struct{ kind, prefix string }{
	{"CoreProvider", ""}, {"BootstrapProvider", "bootstrap-"}, {"ControlPlaneProvider", "control-plane-"},
	{"InfrastructureProvider", "infrastructure-"}, {"AddonProvider", "addon-"},
}

// StandInCAPIOperator is a STAND-IN for the Cluster API operator, which
// runs providers as pods and cannot run here: until ctx ends, every
// provider object on c (CoreProvider, InfrastructureProvider, ...) becomes
// Ready and gets its clusterctl inventory entry, as the operator writes
// once the provider's controllers run. skip, when set, names inventory
// entries it must not write (a provider that did not install).
func StandInCAPIOperator(ctx context.Context, c *Cluster, skip func(inventory string) bool) {
	for ctx.Err() == nil {
		for _, pk := range capiProviderKinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: "operator.cluster.x-k8s.io", Version: "v1alpha2", Kind: pk.kind + "List"})
			if err := c.Client.List(ctx, list); err != nil {
				continue
			}
			for i := range list.Items {
				u := &list.Items[i]
				if st, _, _ := Condition(u, "Ready"); st != "True" {
					_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "StandIn",
						"message": "stand-in operator", "observedGeneration": u.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
					_ = c.Client.Status().Update(ctx, u)
				}
				if name := pk.prefix + u.GetName(); skip == nil || !skip(name) {
					_ = CreateProviderInventory(ctx, c, name, u.GetNamespace(), pk.kind)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CreateProviderInventory writes clusterctl's inventory entry name (such as
// bootstrap-kubeadm) of type typ (BootstrapProvider) in namespace, at
// v1.14.2, creating the namespace when missing; an existing entry is kept.
// It is what clusterctl's move reads on both sides.
func CreateProviderInventory(ctx context.Context, c *Cluster, name, namespace, typ string) error {
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	providerName := name
	for _, pk := range capiProviderKinds {
		if pk.prefix != "" {
			providerName = strings.TrimPrefix(providerName, pk.prefix)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
		"metadata":     map[string]any{"name": name, "namespace": namespace},
		"providerName": providerName, "type": typ, "version": "v1.14.2",
	}}
	if err := c.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
