// Package capikubeconfig reads the kubeconfig Cluster API writes for every
// Cluster it provisions: the Secret <cluster>-kubeconfig in the Cluster's
// namespace, key "value". Its presence is the one readiness signal that
// means the same thing for every infrastructure provider.
package capikubeconfig

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kropsdev/krops/tools/kit/kubewait"
)

// Key is the Secret's data key holding the kubeconfig.
const Key = "value"

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// SecretName is the Secret Cluster API writes for cluster.
func SecretName(cluster string) string { return cluster + "-kubeconfig" }

// Target waits for the Secret to exist (kubewait).
func Target(namespace, cluster string) kubewait.Target {
	return kubewait.Target{Resource: secrets, Kind: "Secret", Namespace: namespace, Name: SecretName(cluster), Exists: true}
}

// Read returns the kubeconfig of cluster, as Cluster API wrote it.
func Read(ctx context.Context, kc kubernetes.Interface, namespace, cluster string) ([]byte, error) {
	s, err := kc.CoreV1().Secrets(namespace).Get(ctx, SecretName(cluster), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s of Cluster %s: %w", namespace, SecretName(cluster), cluster, err)
	}
	data := s.Data[Key]
	if len(data) == 0 {
		return nil, fmt.Errorf("kubeconfig Secret %s/%s of Cluster %s has no %q key", namespace, SecretName(cluster), cluster, Key)
	}
	return data, nil
}

// RESTConfig builds a client configuration from a kubeconfig Cluster API
// wrote (its current context). A non-empty server replaces the recorded
// endpoint: a provider's rewrite when the recorded one is reachable only
// from inside the provider's network.
func RESTConfig(kubeconfig []byte, server string) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the Cluster API kubeconfig: %w", err)
	}
	if server != "" {
		cfg.Host = server
	}
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}
