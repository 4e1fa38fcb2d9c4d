package e2e_test

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kropsdev/krops/tools/testenv"
)

// gcKinds are the kinds whose owner references the stand-in garbage
// collector tidies: the ones Cluster API's topology controller creates
// with a temporary "shim" Secret as a second owner.
var gcKinds = []schema.GroupVersionKind{
	{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta2", Kind: "DevCluster"},
}

// standInGarbageCollector is a STAND-IN for the garbage collector of
// kube-controller-manager, which envtest does not run: an owner reference
// to an object that no longer exists is removed while other owners remain,
// as the real one does. Without it the shim owner Cluster API deletes stays
// referenced, and clusterctl leaves the control plane on kind (the pivot
// refuses that; TestPivotRefusesToLeaveAnObjectBehind in krops-pivot).
func standInGarbageCollector(ctx context.Context, c *testenv.Cluster) {
	for ctx.Err() == nil {
		for _, gvk := range gcKinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.Client.List(ctx, list); err != nil {
				continue
			}
			for i := range list.Items {
				dropDanglingOwners(ctx, c, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func dropDanglingOwners(ctx context.Context, c *testenv.Cluster, u *unstructured.Unstructured) {
	refs := u.GetOwnerReferences()
	var keep []metav1.OwnerReference
	for _, ref := range refs {
		owner := &unstructured.Unstructured{}
		owner.SetAPIVersion(ref.APIVersion)
		owner.SetKind(ref.Kind)
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: ref.Name}, owner)
		switch {
		case apierrors.IsNotFound(err), err == nil && owner.GetUID() != ref.UID:
			// dangling
		default:
			keep = append(keep, ref)
		}
	}
	if len(keep) == len(refs) || len(keep) == 0 {
		return
	}
	u.SetOwnerReferences(keep)
	_ = c.Client.Update(ctx, u)
}
