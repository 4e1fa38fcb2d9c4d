// Package kindlib is bootcluster.Kind on sigs.k8s.io/kind's cluster
// provider, for Docker or Podman. It needs a running engine, so tests use a
// stand-in; `krops-kind up` then `down` on a machine with Docker is its
// whole exercise.
package kindlib

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/log"
)

// Kind drives kind for one engine.
type Kind struct {
	p *cluster.Provider
}

// New returns Kind for engine "docker" or "podman".
func New(engine string, logger log.Logger) (*Kind, error) {
	var opt cluster.ProviderOption
	switch engine {
	case "docker":
		opt = cluster.ProviderWithDocker()
	case "podman":
		opt = cluster.ProviderWithPodman()
	default:
		return nil, fmt.Errorf("kind: engine %q is not docker or podman", engine)
	}
	if logger == nil {
		logger = log.NoopLogger{}
	}
	return &Kind{p: cluster.NewProvider(opt, cluster.ProviderWithLogger(logger))}, nil
}

// List names the kind clusters.
func (k *Kind) List() ([]string, error) { return k.p.List() }

// Create makes the cluster. kind always writes a kubeconfig; it gets a
// scratch file, so the user's file changes only through kubecfg.Merge.
func (k *Kind) Create(name string, config []byte) error {
	scratch, err := scratchKubeconfig()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(scratch))
	return k.p.Create(name,
		cluster.CreateWithRawConfig(config),
		cluster.CreateWithKubeconfigPath(scratch),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	)
}

// Delete removes the cluster (its scratch kubeconfig entry goes with it).
func (k *Kind) Delete(name string) error {
	scratch, err := scratchKubeconfig()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(scratch))
	return k.p.Delete(name, scratch)
}

// KubeConfig returns the cluster's kubeconfig.
func (k *Kind) KubeConfig(name string, internal bool) (string, error) {
	return k.p.KubeConfig(name, internal)
}

func scratchKubeconfig() (string, error) {
	dir, err := os.MkdirTemp("", "krops-kind-")
	if err != nil {
		return "", fmt.Errorf("scratch kubeconfig: %w", err)
	}
	return filepath.Join(dir, "kubeconfig"), nil
}
