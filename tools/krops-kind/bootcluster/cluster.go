package bootcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/kropsdev/krops/tools/krops-kind/kindcfg"
)

// Record of how krops created the cluster, read back on reuse to detect
// drift.
const (
	RecordNamespace = "kube-system"
	RecordName      = "krops-kind"
	recordKey       = "config.yaml"
	fieldManager    = "krops"
)

// requestTimeout bounds each API call, so a server that accepts
// connections and never answers cannot hold a wait past its deadline.
const requestTimeout = 10 * time.Second

func newClient(kubeconfig []byte) (kubernetes.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kind cluster's kubeconfig: %w", err)
	}
	cfg.Timeout = requestTimeout
	return kubernetes.NewForConfig(cfg)
}

// waitHealthy watches the nodes until there is at least one and every one
// is Ready. On timeout it names what it was waiting for.
func waitHealthy(ctx context.Context, c kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "the API server has not answered"
	for {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("not healthy after %s: %s", timeout, last)
			}
			last = "the API server does not answer: " + err.Error()
			// The API server may still be starting: look again shortly.
			select {
			case <-ctx.Done():
				return fmt.Errorf("not healthy after %s: %s", timeout, last)
			case <-time.After(time.Second):
			}
			continue
		}
		nodes := map[string]corev1.Node{}
		for _, n := range list.Items {
			nodes[n.Name] = n
		}
		if ok, why := allReady(nodes); ok {
			return nil
		} else {
			last = why
		}
		w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue
		}
		if done := watchReady(ctx, w, nodes, &last); done {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("not healthy after %s: %s", timeout, last)
		}
	}
}

// watchReady follows node events until all are Ready (true) or the watch
// ends (false).
func watchReady(ctx context.Context, w watch.Interface, nodes map[string]corev1.Node, last *string) bool {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, open := <-w.ResultChan():
			if !open {
				return false
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(nodes, n.Name)
			} else {
				nodes[n.Name] = *n
			}
			ready, why := allReady(nodes)
			*last = why
			if ready {
				return true
			}
		}
	}
}

func allReady(nodes map[string]corev1.Node) (bool, string) {
	if len(nodes) == 0 {
		return false, "no node has registered yet"
	}
	var notReady []string
	for name, n := range nodes {
		if st, msg := readiness(n); st != corev1.ConditionTrue {
			notReady = append(notReady, fmt.Sprintf("node %s is not Ready (%s)", name, msg))
		}
	}
	sort.Strings(notReady)
	if len(notReady) > 0 {
		return false, strings.Join(notReady, "; ")
	}
	return true, ""
}

func readiness(n corev1.Node) (corev1.ConditionStatus, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			msg := string(c.Status)
			if c.Reason != "" {
				msg += ", " + c.Reason
			}
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return c.Status, msg
		}
	}
	return corev1.ConditionUnknown, "no Ready condition yet"
}

// recordConfig stores the configuration the cluster was created with.
func recordConfig(ctx context.Context, c kubernetes.Interface, raw []byte, runID string) error {
	cm := applycorev1.ConfigMap(RecordName, RecordNamespace).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "krops"}).
		WithData(map[string]string{recordKey: string(raw), "run-id": runID})
	if _, err := c.CoreV1().ConfigMaps(RecordNamespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("recording the kind configuration in ConfigMap %s/%s: %w", RecordNamespace, RecordName, err)
	}
	return nil
}

// checkDrift compares the recorded configuration with the wanted one. A
// cluster without a record was not made by krops-kind (or by an older one),
// so what it runs is unknown: that is drift too.
func checkDrift(ctx context.Context, c kubernetes.Interface, want *v1alpha4.Cluster, o Options) error {
	cm, err := c.CoreV1().ConfigMaps(RecordNamespace).Get(ctx, RecordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s has no ConfigMap %s/%s, so krops cannot tell its node image, mounts or registry mirror; rebuild it with `krops-kind up %s --recreate`",
			ErrDrift, o.Name, RecordNamespace, RecordName, o.Environment)
	}
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s/%s: %w", RecordNamespace, RecordName, err)
	}
	diffs, err := Drift([]byte(cm.Data[recordKey]), want)
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s was created with %s; rebuild it with `krops-kind up %s --recreate`",
			ErrDrift, o.Name, strings.Join(diffs, "; "), o.Environment)
	}
	return nil
}

// NodeStatus is one node as Status reports it.
type NodeStatus struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
}

// Status is what `krops-kind status` reports.
type Status struct {
	Name       string       `json:"name"`
	Context    string       `json:"context"`
	Exists     bool         `json:"exists"`
	Healthy    bool         `json:"healthy"`
	Problem    string       `json:"problem,omitempty"`
	Nodes      []NodeStatus `json:"nodes"`
	NodeImage  string       `json:"node_image,omitempty"`
	RunID      string       `json:"run_id,omitempty"`
	Kubeconfig string       `json:"kubeconfig"`
}

// Inspect reports the cluster without changing anything.
func Inspect(ctx context.Context, o Options, timeout time.Duration) (Status, error) {
	st := Status{Name: o.Name, Context: o.Context, Kubeconfig: o.Kubeconfig, Nodes: []NodeStatus{}}
	exists, err := o.exists(ctx)
	if err != nil || !exists {
		return st, err
	}
	st.Exists = true
	kc, err := o.Kind.KubeConfig(ctx, o.Name, o.Toolbox)
	if err != nil {
		st.Problem = "reading its kubeconfig: " + err.Error()
		return st, nil
	}
	c, err := newClient([]byte(kc))
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		st.Problem = "the API server does not answer: " + err.Error()
		return st, nil
	}
	nodes := map[string]corev1.Node{}
	for _, n := range list.Items {
		nodes[n.Name] = n
		s, _ := readiness(n)
		st.Nodes = append(st.Nodes, NodeStatus{Name: n.Name, Ready: s == corev1.ConditionTrue})
	}
	st.Healthy, st.Problem = allReady(nodes)
	if cm, err := c.CoreV1().ConfigMaps(RecordNamespace).Get(ctx, RecordName, metav1.GetOptions{}); err == nil {
		st.RunID = cm.Data["run-id"]
		if rec, err := kindcfg.Parse([]byte(cm.Data[recordKey])); err == nil && len(rec.Nodes) > 0 {
			st.NodeImage = rec.Nodes[0].Image
		}
	} else if !apierrors.IsNotFound(err) && st.Problem == "" {
		st.Problem = "reading ConfigMap " + RecordNamespace + "/" + RecordName + ": " + err.Error()
	}
	return st, nil
}
