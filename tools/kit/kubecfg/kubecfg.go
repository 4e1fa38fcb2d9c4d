// Package kubecfg resolves the one kubeconfig file krops uses (KUBECONFIG,
// never a list) and writes a cluster's credentials into it: mode 0600,
// every existing context kept, and the current context left alone (krops binds every call to an explicit
// context, so it never needs to switch the user's).
package kubecfg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kropsdev/krops/tools/kit/budget"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Path resolves KUBECONFIG: one file (default ~/.kube/config), never a
// list, since krops must know which file it writes.
func Path(kubeconfig, home string) (string, error) {
	switch {
	case strings.Contains(kubeconfig, string(os.PathListSeparator)):
		return "", fmt.Errorf("KUBECONFIG=%q is a list of files: krops writes the kind cluster's credentials into one file; set KUBECONFIG to a single path", kubeconfig)
	case kubeconfig != "":
		return kubeconfig, nil
	case home == "":
		return "", errors.New("KUBECONFIG is unset and there is no home directory: set KUBECONFIG to a file path")
	}
	return filepath.Join(home, ".kube", "config"), nil
}

// Writable checks, without writing, that path can be created or updated.
func Writable(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("KUBECONFIG %s is a directory: point it at a file", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("KUBECONFIG %s is not writable: %w", path, err)
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("KUBECONFIG %s: %s is not a directory", path, dir)
			}
			probe, err := os.CreateTemp(dir, ".krops-probe-*")
			if err != nil {
				return fmt.Errorf("KUBECONFIG %s cannot be created in %s: %w", path, dir, err)
			}
			probe.Close()
			return os.Remove(probe.Name())
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("KUBECONFIG %s: no existing parent directory", path)
		}
		dir = parent
	}
}

// Merge adds the single cluster of kindConfig to the file at path under
// context (its cluster and user get the same name), replacing an older
// entry of that name and keeping everything else.
func Merge(path string, kindConfig []byte, context string) error {
	src, err := clientcmd.Load(kindConfig)
	if err != nil {
		return fmt.Errorf("reading the kind cluster's kubeconfig: %w", err)
	}
	kctx, ok := src.Contexts[src.CurrentContext]
	if !ok {
		return fmt.Errorf("the kind cluster's kubeconfig has no current context")
	}
	dst, err := load(path)
	if err != nil {
		return err
	}
	dst.Clusters[context] = src.Clusters[kctx.Cluster]
	dst.AuthInfos[context] = src.AuthInfos[kctx.AuthInfo]
	dst.Contexts[context] = &clientcmdapi.Context{Cluster: context, AuthInfo: context}
	if dst.CurrentContext == "" {
		dst.CurrentContext = context
	}
	return write(path, dst)
}

// Remove deletes context and its cluster and user of the same name; a file
// or context that does not exist is not an error.
func Remove(path, context string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dst, err := load(path)
	if err != nil {
		return err
	}
	if _, ok := dst.Contexts[context]; !ok {
		return nil
	}
	delete(dst.Contexts, context)
	delete(dst.Clusters, context)
	delete(dst.AuthInfos, context)
	if dst.CurrentContext == context {
		dst.CurrentContext = ""
	}
	return write(path, dst)
}

func load(path string) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading KUBECONFIG %s: %w", path, err)
	}
	return cfg, nil
}

// write replaces the file atomically, 0600: it holds a client key.
func write(path string, cfg *clientcmdapi.Config) error {
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding KUBECONFIG %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing KUBECONFIG %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("writing KUBECONFIG %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing KUBECONFIG %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing KUBECONFIG %s: %w", path, err)
	}
	return nil
}

// RESTConfig loads the client configuration of context in the kubeconfig
// file at path: both named explicitly, never the caller's current context.
// timeout bounds each request.
func RESTConfig(path, context string, timeout time.Duration) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s, context %s: %w", path, context, err)
	}
	cfg.Timeout = timeout
	return cfg, nil
}

// ProbeTimeout is how long a cluster has to answer before a tool decides
// it is not there.
const ProbeTimeout = budget.Probe

// Answers asks the API server behind cfg for its version within
// ProbeTimeout.
func Answers(cfg *rest.Config) error {
	probe := rest.CopyConfig(cfg)
	probe.Timeout = ProbeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return err
	}
	_, err = dc.ServerVersion()
	return err
}

// HasContext reports whether the kubeconfig file at path names context; a
// file that does not exist has none.
func HasContext(path, context string) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	cfg, err := load(path)
	if err != nil {
		return false, err
	}
	_, ok := cfg.Contexts[context]
	return ok, nil
}

// Ref is one cluster as krops reaches it: a kubeconfig file and a context
// in it, always both, so no call falls back to a current context.
type Ref struct {
	Path, Context string
}

func (r Ref) String() string { return "context " + r.Context + " in " + r.Path }

// RESTConfig loads r's client configuration, each request bounded by
// budget.APIRequest.
func (r Ref) RESTConfig() (*rest.Config, error) {
	return RESTConfig(r.Path, r.Context, budget.APIRequest)
}
