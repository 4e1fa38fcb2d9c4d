package bootcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/kindcfg"
	"github.com/kropsdev/krops/tools/kit/kubeapply"
	"github.com/kropsdev/krops/tools/kit/kubewait"
	"github.com/kropsdev/krops/tools/kit/ui"
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
const requestTimeout = budget.Probe

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// clients are the typed and dynamic clients of one cluster.
type clients struct {
	kc  kubernetes.Interface
	dyn dynamic.Interface
	cfg *rest.Config
}

func newClients(kubeconfig []byte) (clients, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return clients{}, fmt.Errorf("reading the kind cluster's kubeconfig: %w", err)
	}
	cfg.Timeout = requestTimeout
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	return clients{kc: kc, dyn: dyn, cfg: cfg}, nil
}

// applyProvided server-side applies a provider's manifests; they may hold
// secrets, so only the objects' names are printed, in errors too.
func applyProvided(ctx context.Context, cfg *rest.Config, manifests [][]byte, p *ui.Progress) error {
	ap, err := kubeapply.New(cfg, fieldManager)
	if err != nil {
		return err
	}
	for i, m := range manifests {
		objs, err := kubeapply.Decode(m, fmt.Sprintf("the provider's manifest #%d", i+1))
		if err != nil {
			// Decode's error may quote the document: name it only.
			return fmt.Errorf("the provider's manifest #%d is not valid YAML for Kubernetes objects (content not shown)", i+1)
		}
		done, err := ap.ApplySensitive(ctx, objs)
		if err != nil {
			return err
		}
		for _, d := range done {
			p.Infof("applied %s", d)
		}
	}
	return nil
}

// waitHealthy watches the nodes until there is at least one and every one
// is Ready. On timeout it names what it was waiting for.
func waitHealthy(ctx context.Context, c clients, timeout time.Duration) error {
	err := kubewait.NodesReady(ctx, kubewait.Options{Client: c.dyn, Timeout: timeout})
	var noAnswer *kubewait.NoAnswerError
	var notReady *kubewait.NodesTimeoutError
	switch {
	case errors.As(err, &noAnswer):
		return fmt.Errorf("not healthy after %s: %v", timeout, noAnswer)
	case errors.As(err, &notReady):
		return fmt.Errorf("not healthy after %s: %s", timeout, notReady.Last)
	}
	return err
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
	st := Status{Name: o.Name, Context: o.Kubeconfig.Context, Kubeconfig: o.Kubeconfig.Path, Nodes: []NodeStatus{}}
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
	c, err := newClients([]byte(kc))
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list, err := c.dyn.Resource(nodesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		st.Problem = "the API server does not answer: " + err.Error()
		return st, nil
	}
	var nodes []*unstructured.Unstructured
	for i := range list.Items {
		n := &list.Items[i]
		nodes = append(nodes, n)
		st.Nodes = append(st.Nodes, NodeStatus{Name: n.GetName(), Ready: kubewait.SummarizeNodes([]*unstructured.Unstructured{n}).Done()})
	}
	if sum := kubewait.SummarizeNodes(nodes); sum.Done() {
		st.Healthy = true
	} else {
		st.Problem = sum.String()
	}
	if cm, err := c.kc.CoreV1().ConfigMaps(RecordNamespace).Get(ctx, RecordName, metav1.GetOptions{}); err == nil {
		st.RunID = cm.Data["run-id"]
		if rec, err := kindcfg.Parse([]byte(cm.Data[recordKey])); err == nil && len(rec.Nodes) > 0 {
			st.NodeImage = rec.Nodes[0].Image
		}
	} else if !apierrors.IsNotFound(err) && st.Problem == "" {
		st.Problem = "reading ConfigMap " + RecordNamespace + "/" + RecordName + ": " + err.Error()
	}
	return st, nil
}

// The ConfigMaps that tell tools where the cluster's local registry is:
// the local-registry-hosting convention kind documents (KEP-1755, read by
// Tilt, Skaffold and others) and the name the original lifecycle wrote.
const (
	HostingNamespace = "kube-public"
	HostingName      = "local-registry-hosting"
	RegistryConfigNS = "kube-system"
	RegistryConfig   = "local-registry-config"
)

// recordRegistry writes both ConfigMaps for the provider's registry
// mirror m: the host reaches the registry at m.Registry, the nodes'
// container runtime and the pods at its in-network endpoint.
func recordRegistry(ctx context.Context, c kubernetes.Interface, m kindcfg.Mirror) error {
	if len(m.Endpoints) == 0 {
		return nil
	}
	inNetwork := m.Endpoints[0]
	if u, err := url.Parse(inNetwork); err == nil && u.Host != "" {
		inNetwork = u.Host
	}
	hosting := fmt.Sprintf("host: %q\nhostFromContainerRuntime: %q\nhostFromClusterNetwork: %q\nhelp: %q\n",
		m.Registry, inNetwork, inNetwork, "https://kind.sigs.k8s.io/docs/user/local-registry/")
	labels := map[string]string{"app.kubernetes.io/managed-by": "krops"}
	for _, cm := range []*applycorev1.ConfigMapApplyConfiguration{
		applycorev1.ConfigMap(HostingName, HostingNamespace).WithLabels(labels).WithData(map[string]string{"localRegistryHosting.v1": hosting}),
		applycorev1.ConfigMap(RegistryConfig, RegistryConfigNS).WithLabels(labels).WithData(map[string]string{"registry-url": inNetwork}),
	} {
		if _, err := c.CoreV1().ConfigMaps(*cm.Namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("writing ConfigMap %s/%s (where the local registry is): %w", *cm.Namespace, *cm.Name, err)
		}
	}
	return nil
}
