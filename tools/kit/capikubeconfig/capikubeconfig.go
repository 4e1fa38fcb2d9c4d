// Package capikubeconfig reads the kubeconfig Cluster API writes for every
// Cluster it provisions: the Secret <cluster>-kubeconfig in the Cluster's
// namespace, key "value". Its presence is the one readiness signal that
// means the same thing for every infrastructure provider.
package capikubeconfig

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kropsdev/krops/tools/kit/budget"
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
	cfg.Timeout = budget.APIRequest
	return cfg, nil
}

// UserSecretName is the Secret some providers write beside SecretName for
// people rather than controllers: CAPA's for EKS authenticates through
// `aws eks get-token`, so it does not expire the way the token in
// SecretName does.
func UserSecretName(cluster string) string { return cluster + "-user-kubeconfig" }

// ReadForUser returns the kubeconfig a person should use for cluster: the
// user Secret when the provider wrote one, else SecretName's. from names
// the Secret it came from.
func ReadForUser(ctx context.Context, kc kubernetes.Interface, namespace, cluster string) (raw []byte, from string, err error) {
	s, err := kc.CoreV1().Secrets(namespace).Get(ctx, UserSecretName(cluster), metav1.GetOptions{})
	switch {
	case err == nil && len(s.Data[Key]) > 0:
		return s.Data[Key], namespace + "/" + UserSecretName(cluster), nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, "", fmt.Errorf("kubeconfig Secret %s/%s of Cluster %s: %w", namespace, UserSecretName(cluster), cluster, err)
	}
	raw, err = Read(ctx, kc, namespace, cluster)
	return raw, namespace + "/" + SecretName(cluster), err
}

// Named rewrites a Cluster API kubeconfig to hold one cluster, user and
// context, all named name, the current context, at server when it is not
// empty.
func Named(kubeconfig []byte, name, server string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the Cluster API kubeconfig: %w", err)
	}
	cur, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("the Cluster API kubeconfig has no current context %q", cfg.CurrentContext)
	}
	cl, user := cfg.Clusters[cur.Cluster], cfg.AuthInfos[cur.AuthInfo]
	if cl == nil || user == nil {
		return nil, fmt.Errorf("context %q of the Cluster API kubeconfig names a missing cluster or user", cfg.CurrentContext)
	}
	if server != "" {
		cl.Server = server
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = cl
	out.AuthInfos[name] = user
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: cur.Namespace}
	out.CurrentContext = name
	return clientcmd.Write(*out)
}
