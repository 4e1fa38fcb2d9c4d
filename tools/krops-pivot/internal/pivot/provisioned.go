package pivot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kropsdev/krops/tools/kit/kubewait"
)

var machinesGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}

// waitProvisioned waits until clusterctl would start the move: every
// Cluster in the namespace has its infrastructure provisioned and its
// control plane initialized, and every Machine has its node. The kubeconfig
// Secret and the management cluster's nodes come well before that (a
// worker, or the whole workload cluster, is still provisioning), and a move
// refused for it would end the run with clusterctl's list of objects.
func (r *run) waitProvisioned(ctx context.Context) error {
	p := r.o.Progress
	return p.Wait(ctx, fmt.Sprintf("every Cluster in %s provisioned, as the move needs (up to %s)", r.o.Namespace, r.o.ReadyTimeout), func(ctx context.Context) error {
		report := kubewait.Changes(r.infof)
		// What blocks, as last seen: a Cluster not listed yet until then.
		pending := []kubewait.State{{Target: kubewait.Target{Kind: "Cluster", Namespace: r.o.Namespace}, Message: "not listed yet"}}
		sets := []kubewait.Set{{Resource: clustersGVR, Namespace: r.o.Namespace}, {Resource: machinesGVR, Namespace: r.o.Namespace}}
		err := kubewait.Until(ctx, kubewait.Options{Client: r.src.dyn, Timeout: r.o.ReadyTimeout, Silence: r.o.QueryTimeout}, sets, func(snap kubewait.Snapshot) (bool, error) {
			var total int
			pending, total = notProvisioned(r.o.Namespace, snap[0], snap[1])
			if len(pending) > 0 {
				report(fmt.Sprintf("%d of %d provisioned; waiting for %s", total-len(pending), total, pending[0].String()))
			}
			return len(pending) == 0, nil
		})
		var noAnswer *kubewait.NoAnswerError
		switch {
		case errors.As(err, new(*kubewait.SilentError)):
			return kindSilent(err, pending[0].String())
		case errors.As(err, &noAnswer):
			return fmt.Errorf("listing Clusters and Machines in %s on kind: %w", r.o.Namespace, noAnswer)
		case errors.Is(err, kubewait.ErrInterrupted):
			return fmt.Errorf("%w: %s", kubewait.ErrInterrupted, pending[0].String())
		case errors.Is(err, kubewait.ErrTimeout):
			return &kubewait.TimeoutError{Timeout: r.o.ReadyTimeout, Blocking: pending}
		}
		return err
	})
}

// notProvisioned lists, in a stable order, the Clusters and Machines that
// clusterctl's move would refuse, and how many there are in all.
func notProvisioned(ns string, clusters, machines []*unstructured.Unstructured) (pending []kubewait.State, total int) {
	waiting := func(kind, name, why string) kubewait.State {
		return kubewait.State{Target: kubewait.Target{Kind: kind, Namespace: ns, Name: name}, Found: true, Message: why}
	}
	for _, c := range clusters {
		if why := clusterNotProvisioned(c); why != "" {
			pending = append(pending, waiting("Cluster", c.GetName(), why))
		}
	}
	for _, m := range machines {
		if name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name"); name == "" {
			pending = append(pending, waiting("Machine", m.GetName(), "no node yet"))
		}
	}
	slices.SortFunc(pending, func(a, b kubewait.State) int { return strings.Compare(a.String(), b.String()) })
	return pending, len(clusters) + len(machines)
}

// clusterNotProvisioned is clusterctl v1.14's check of one Cluster, as a
// reason ("" when it would move).
func clusterNotProvisioned(c *unstructured.Unstructured) string {
	if ok, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned"); !ok {
		return "infrastructure not provisioned yet"
	}
	initialized := false
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, raw := range conds {
		if m, ok := raw.(map[string]any); ok && m["type"] == "ControlPlaneInitialized" {
			initialized = m["status"] == "True"
		}
	}
	_, hasCP, _ := unstructured.NestedMap(c.Object, "spec", "controlPlaneRef")
	cpDone, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "controlPlaneInitialized")
	if !initialized || (hasCP && !cpDone) {
		return "control plane not initialized yet"
	}
	return ""
}

// leftBehind lists what the Clusters on kind are made of (each Cluster's
// control plane and infrastructure objects, and every Machine) that the
// move's object graph does not hold. clusterctl moves an object only once
// all its owners are placed, so one whose owner reference points at an
// object that no longer exists (a dangling reference the garbage collector
// has not removed yet) is silently left on kind, and deleting kind would
// lose it.
func leftBehind(ctx context.Context, dyn dynamic.Interface, ns string, plan []string) ([]string, error) {
	inPlan := map[string]bool{}
	for _, p := range plan {
		inPlan[p] = true
	}
	clusters, err := dyn.Resource(clustersGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Clusters in %s on kind: %w", ns, err)
	}
	machines, err := dyn.Resource(machinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Machines in %s on kind: %w", ns, err)
	}
	var want []string
	for _, c := range clusters.Items {
		for _, ref := range []string{"controlPlaneRef", "infrastructureRef"} {
			kind, _, _ := unstructured.NestedString(c.Object, "spec", ref, "kind")
			name, _, _ := unstructured.NestedString(c.Object, "spec", ref, "name")
			if kind != "" && name != "" {
				want = append(want, kind+" "+ns+"/"+name)
			}
		}
	}
	for _, m := range machines.Items {
		want = append(want, "Machine "+ns+"/"+m.GetName())
	}
	var missing []string
	for _, w := range want {
		if !inPlan[w] {
			missing = append(missing, w)
		}
	}
	slices.Sort(missing)
	return missing, nil
}
