// Package access reaches the clusters an environment's Cluster API built
// and the apps on them: it writes their kubeconfigs for people, and
// forwards a local port to a Service's pod.
package access

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kropsdev/krops/tools/kit/capikubeconfig"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
)

var clustersGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}

// ErrNoInventory: no candidate cluster holds what was looked for.
var ErrNoInventory = errors.New("no Cluster API inventory found")

// Inventory is the cluster that holds the Cluster API objects: the
// management cluster once the pivot moved them, kind before.
type Inventory struct {
	Cluster   kubecfg.Ref
	Namespace string
	KC        kubernetes.Interface
	Dyn       dynamic.Interface
}

// Locate returns the first candidate that answers and holds want's
// evidence in namespace: the named Clusters' kubeconfig Secrets, or any
// Cluster when names is empty. Each candidate passed over is said why.
func Locate(ctx context.Context, candidates []kubecfg.Ref, namespace string, names ...string) (*Inventory, error) {
	var why []string
	for _, c := range candidates {
		inv, err := open(c, namespace)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		found, err := inv.holds(ctx, names)
		switch {
		case err != nil:
			why = append(why, fmt.Sprintf("%s: %v", c, err))
		case found:
			return inv, nil
		case len(names) == 0:
			why = append(why, fmt.Sprintf("%s: no Cluster in namespace %s", c, namespace))
		default:
			why = append(why, fmt.Sprintf("%s: no kubeconfig Secret %s/%s", c, namespace, capikubeconfig.SecretName(names[0])))
		}
	}
	return nil, fmt.Errorf("%w:\n  %s", ErrNoInventory, strings.Join(why, "\n  "))
}

func open(c kubecfg.Ref, namespace string) (*Inventory, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Inventory{Cluster: c, Namespace: namespace, KC: kc, Dyn: dyn}, nil
}

func (inv *Inventory) holds(ctx context.Context, names []string) (bool, error) {
	if len(names) == 0 {
		cs, err := inv.Clusters(ctx)
		return len(cs) > 0, err
	}
	_, err := inv.KC.CoreV1().Secrets(inv.Namespace).Get(ctx, capikubeconfig.SecretName(names[0]), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Clusters names the Cluster API Clusters in the inventory's namespace,
// sorted. A cluster that does not serve the Cluster kind holds none.
func (inv *Inventory) Clusters(ctx context.Context) ([]string, error) {
	l, err := inv.Dyn.Resource(clustersGVR).Namespace(inv.Namespace).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing Clusters in %s: %w", inv.Namespace, err)
	}
	var out []string
	for _, c := range l.Items {
		out = append(out, c.GetName())
	}
	sort.Strings(out)
	return out, nil
}

// Endpoint gives the address to reach a cluster at instead of the recorded
// one ("" keeps it); see pluginhost.Endpoints.
type Endpoint func(ctx context.Context, cluster string, kubeconfig []byte) (string, error)

// Kubeconfig is the kubeconfig of cluster for a person on this machine:
// the user Secret when the provider wrote one, one context named after the
// cluster, the provider's endpoint when it gives one. warn receives why a
// rewrite was not possible (the recorded endpoint is kept then).
func (inv *Inventory) Kubeconfig(ctx context.Context, cluster string, endpoint Endpoint, warn func(string)) (raw []byte, from string, err error) {
	raw, from, err = capikubeconfig.ReadForUser(ctx, inv.KC, inv.Namespace, cluster)
	if err != nil {
		return nil, "", err
	}
	server := ""
	if endpoint != nil {
		if server, err = endpoint(ctx, cluster, raw); err != nil {
			warn(fmt.Sprintf("keeping the endpoint Cluster API recorded for %s: the provider could not give one reachable from here: %v", cluster, err))
			server = ""
		}
	}
	raw, err = capikubeconfig.Named(raw, cluster, server)
	if err != nil {
		return nil, "", fmt.Errorf("the kubeconfig of Cluster %s (%s): %w", cluster, from, err)
	}
	return raw, from, nil
}
