package testenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The helpers below are STAND-INS for controllers the harness does not run
// as processes: the Cluster API operator and infrastructure providers other
// than CAPD's in-memory backend (they need container images, Docker or a
// cloud), kubelets and kube-controller-manager. Flux, the Flux Operator and
// the Cluster API stack do run for real (flux.go, clusterapi.go). The
// helpers write what the missing controllers would write (status
// conditions, kubeconfig Secrets, Node objects) with a delay, so the tools
// under test meet real API servers with realistic timing. A test using them
// must say so in its name or comment.

// SetCondition upserts cond into obj's status.conditions through the status
// subresource, the way a controller reports progress.
func SetCondition(ctx context.Context, c client.Client, obj *unstructured.Unstructured, cond metav1.Condition) error {
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.Now()
	}
	if cond.Reason == "" {
		cond.Reason = "StandIn"
	}
	return retryConflict(ctx, func() error {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return err
		}
		raw, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		var conds []metav1.Condition
		for _, r := range raw {
			var mc metav1.Condition
			if m, ok := r.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &mc) == nil {
				conds = append(conds, mc)
			}
		}
		meta.SetStatusCondition(&conds, cond)
		out := make([]any, 0, len(conds))
		for _, mc := range conds {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&mc)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		if err := unstructured.SetNestedSlice(cur.Object, out, "status", "conditions"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(cur.Object, cur.GetGeneration(), "status", "observedGeneration"); err != nil {
			return err
		}
		if err := c.Status().Update(ctx, cur); err != nil {
			return fmt.Errorf("updating status of %s %s: %w", cur.GetKind(), client.ObjectKeyFromObject(cur), err)
		}
		return nil
	})
}

// ConditionStatus returns the status of condition typ on obj.
func ConditionStatus(obj *unstructured.Unstructured, typ string) (string, bool) {
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s, true
		}
	}
	return "", false
}

func retryConflict(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !apierrors.IsConflict(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StandInReady marks every object of GVK (in any namespace) with condition
// Type=True once it has existed for Delay, until ctx ends. It is a STAND-IN
// for the controller that owns the kind.
type StandInReady struct {
	Client    client.Client
	GVK       schema.GroupVersionKind
	Condition string
	Delay     time.Duration
	// Poll is how often objects are listed; default 50 ms.
	Poll time.Duration
}

// Run blocks until ctx ends; start it in a goroutine.
func (s StandInReady) Run(ctx context.Context) error {
	poll := s.Poll
	if poll == 0 {
		poll = 50 * time.Millisecond
	}
	firstSeen := map[string]time.Time{}
	done := map[string]bool{}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(s.GVK.GroupVersion().WithKind(s.GVK.Kind + "List"))
	for {
		if err := s.Client.List(ctx, list); err == nil {
			now := time.Now()
			for i := range list.Items {
				o := &list.Items[i]
				key := string(o.GetUID())
				if done[key] {
					continue
				}
				if _, ok := firstSeen[key]; !ok {
					firstSeen[key] = now
				}
				if now.Sub(firstSeen[key]) < s.Delay {
					continue
				}
				cond := metav1.Condition{Type: s.Condition, Status: metav1.ConditionTrue, Reason: "StandIn", Message: "set by a test stand-in controller"}
				if err := SetCondition(ctx, s.Client, o, cond); err == nil {
					done[key] = true
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// Start runs s in the background until the returned stop is called.
func (s StandInReady) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.Run(ctx) }()
	return func() { cancel(); wg.Wait() }
}

// StandInKubeconfigSecret writes the Secret CAPI creates for a workload
// cluster (`<cluster>-kubeconfig`, key `value`), pointing at target, after
// delay. A STAND-IN for the CAPI control plane provider.
func StandInKubeconfigSecret(ctx context.Context, c client.Client, namespace, cluster string, kubeconfig []byte, delay time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(delay):
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster + "-kubeconfig", Namespace: namespace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cluster},
		},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig},
	}
	if err := c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating kubeconfig Secret %s/%s: %w", namespace, sec.Name, err)
	}
	return nil
}

// StandInNodes creates n Ready Node objects, as kubelets joining would.
// A STAND-IN: no kubelet runs here.
func StandInNodes(ctx context.Context, c client.Client, prefix string, n int) error {
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Node %s: %w", node.Name, err)
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "StandIn", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if err := c.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("marking Node %s Ready: %w", node.Name, err)
		}
	}
	return nil
}
