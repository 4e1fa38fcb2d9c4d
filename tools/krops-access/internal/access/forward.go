package access

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/kropsdev/krops/tools/kit/ui"
)

// ForwardOptions say what to forward where.
type ForwardOptions struct {
	Inventory *Inventory
	// Cluster is the Cluster API Cluster the Service runs on.
	Cluster            string
	Namespace, Service string
	// ServicePort is the Service's port to reach (0: its only port).
	ServicePort int
	// Address and LocalPort are where this machine listens (LocalPort 0:
	// the Service port).
	Address   string
	LocalPort int
	Endpoint  Endpoint
	Progress  *ui.Progress
	// Ready, when set, receives the local URL once the forward listens.
	Ready func(url string)
	// Out receives the forwarder's own messages (a connection handled).
	Out io.Writer
}

// Target is the pod and port a Service resolved to.
type Target struct {
	Pod  string
	Port int
}

// Forward forwards o.Address:o.LocalPort to a Ready pod behind the Service
// until ctx ends, with client-go's port-forward (what kubectl port-forward
// uses). A missing cluster, Service or Ready pod is an error that says
// which.
func Forward(ctx context.Context, o ForwardOptions) error {
	raw, _, err := o.Inventory.Kubeconfig(ctx, o.Cluster, o.Endpoint, func(w string) { o.Progress.Warnf("%s", w) })
	if err != nil {
		return fmt.Errorf("workload cluster %s: %w", o.Cluster, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	target, port, err := Resolve(ctx, kc, o.Namespace, o.Service, o.ServicePort)
	if err != nil {
		return fmt.Errorf("on cluster %s (%s): %w", o.Cluster, cfg.Host, err)
	}
	local := o.LocalPort
	if local == 0 {
		local = port
	}
	return forward(ctx, cfg, kc, o, target, local)
}

// Resolve finds a Ready pod behind the Service and the pod port its
// servicePort (0: the only one) targets.
func Resolve(ctx context.Context, kc kubernetes.Interface, ns, name string, servicePort int) (Target, int, error) {
	svc, err := kc.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Target{}, 0, fmt.Errorf("no Service %s/%s: is the app deployed there yet (its Flux Kustomization Ready)?", ns, name)
	}
	if err != nil {
		return Target{}, 0, fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
	}
	sp, err := pickPort(svc, servicePort)
	if err != nil {
		return Target{}, 0, err
	}
	if len(svc.Spec.Selector) == 0 {
		return Target{}, 0, fmt.Errorf("service %s/%s selects no pods (no selector)", ns, name)
	}
	pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return Target{}, 0, fmt.Errorf("listing the pods of Service %s/%s: %w", ns, name, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	var seen []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && ready(p) {
			port, err := podPort(p, sp.TargetPort, sp.Port)
			if err != nil {
				return Target{}, 0, err
			}
			return Target{Pod: p.Name, Port: port}, int(sp.Port), nil
		}
		seen = append(seen, p.Name+" "+string(p.Status.Phase))
	}
	if len(seen) == 0 {
		return Target{}, 0, fmt.Errorf("service %s/%s has no pods", ns, name)
	}
	return Target{}, 0, fmt.Errorf("service %s/%s has no Ready pod (%s): see `kubectl -n %s describe pod`", ns, name, strings.Join(seen, ", "), ns)
}

// pickPort: the port asked for; without one, the Service's only port, or
// the one named http (Podinfo's chart also serves gRPC on its Service).
func pickPort(svc *corev1.Service, want int) (corev1.ServicePort, error) {
	var have []string
	for _, p := range svc.Spec.Ports {
		if want == 0 && len(svc.Spec.Ports) == 1 || int(p.Port) == want {
			return p, nil
		}
		have = append(have, strconv.Itoa(int(p.Port)))
	}
	if want == 0 {
		for _, p := range svc.Spec.Ports {
			if p.Name == "http" {
				return p, nil
			}
		}
		return corev1.ServicePort{}, fmt.Errorf("service %s/%s has ports %s and none is named http: name one with --service-port", svc.Namespace, svc.Name, strings.Join(have, ", "))
	}
	return corev1.ServicePort{}, fmt.Errorf("service %s/%s has no port %d (it has %s)", svc.Namespace, svc.Name, want, strings.Join(have, ", "))
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podPort resolves a Service's targetPort (a number, a container port's
// name, or unset: the Service port) on the pod.
func podPort(p *corev1.Pod, target intstr.IntOrString, servicePort int32) (int, error) {
	switch {
	case target.Type == intstr.Int && target.IntVal != 0:
		return int(target.IntVal), nil
	case target.Type == intstr.String && target.StrVal != "":
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == target.StrVal {
					return int(cp.ContainerPort), nil
				}
			}
		}
		return 0, fmt.Errorf("pod %s/%s has no container port named %q (the Service's targetPort)", p.Namespace, p.Name, target.StrVal)
	}
	return int(servicePort), nil
}

func forward(ctx context.Context, cfg *rest.Config, kc kubernetes.Interface, o ForwardOptions, t Target, local int) error {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return err
	}
	url := kc.CoreV1().RESTClient().Post().Resource("pods").Namespace(o.Namespace).Name(t.Pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	// API servers that have turned SPDY off speak the same over websockets.
	if ws, err := portforward.NewSPDYOverWebsocketDialer(url, cfg); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool { return true })
	}
	stop, readyCh := make(chan struct{}), make(chan struct{})
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	pf, err := portforward.NewOnAddresses(dialer, []string{o.Address}, []string{fmt.Sprintf("%d:%d", local, t.Port)}, stop, readyCh, out, out)
	if err != nil {
		return fmt.Errorf("forwarding %s:%d: %w", o.Address, local, err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case err := <-done:
		return fmt.Errorf("forwarding %s:%d to pod %s/%s port %d on cluster %s: %w", o.Address, local, o.Namespace, t.Pod, t.Port, o.Cluster, err)
	case <-readyCh:
	case <-ctx.Done():
		close(stop)
		<-done
		return ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err == nil && len(ports) == 1 {
		local = int(ports[0].Local)
	}
	addr := fmt.Sprintf("http://%s:%d", o.Address, local)
	if strings.Contains(o.Address, ":") {
		addr = fmt.Sprintf("http://[%s]:%d", o.Address, local)
	}
	o.Progress.Successf("forwarding %s to pod %s/%s port %d (Service %s) on cluster %s; Ctrl-C stops", addr, o.Namespace, t.Pod, t.Port, o.Service, o.Cluster)
	if o.Ready != nil {
		o.Ready(addr)
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the forward to pod %s/%s ended: %w", o.Namespace, t.Pod, err)
		}
		return fmt.Errorf("the forward to pod %s/%s ended (the pod went away?): run it again", o.Namespace, t.Pod)
	case <-ctx.Done():
		close(stop)
		<-done
		return nil
	}
}
