package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Uses STAND-INS for the Flux source-controller, the CAPI control plane
// provider and kubelets: none can run without Docker here.
func TestStandInsWriteWhatControllersWouldWithDelay(t *testing.T) {
	c := APIServer(t, ClusterOptions{CRDs: []CRDSet{FluxSource}})
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}
	stop := StandInReady{Client: c.Client, GVK: gvk, Condition: "Ready", Delay: 300 * time.Millisecond}.Start(ctx)
	defer stop()

	repo := &unstructured.Unstructured{}
	repo.SetGroupVersionKind(gvk)
	repo.SetNamespace("default")
	repo.SetName("krops")
	repo.Object["spec"] = map[string]any{"url": "oci://127.0.0.1:5000/krops", "interval": "1m"}
	created := time.Now()
	if err := c.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	var readyAt time.Time
	for time.Since(created) < 10*time.Second {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(gvk)
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(repo), got); err != nil {
			t.Fatal(err)
		}
		if s, _ := ConditionStatus(got, "Ready"); s == "True" {
			readyAt = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if readyAt.IsZero() {
		t.Fatal("the stand-in never marked the OCIRepository Ready")
	}
	if d := readyAt.Sub(created); d < 300*time.Millisecond {
		t.Errorf("Ready after %v: the stand-in must honour its delay", d)
	}

	if err := StandInKubeconfigSecret(ctx, c.Client, "default", "local-management", []byte("kubeconfig"), 0); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "local-management-kubeconfig"}, sec); err != nil || string(sec.Data["value"]) != "kubeconfig" {
		t.Errorf("kubeconfig Secret: %v %v", err, sec.Data)
	}
	if err := StandInNodes(ctx, c.Client, "node", 2); err != nil {
		t.Fatal(err)
	}
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil || len(nodes.Items) != 2 || nodes.Items[0].Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("nodes: %v %+v", err, nodes.Items)
	}
}
