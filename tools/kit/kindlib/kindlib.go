// Package kindlib is bootcluster.Kind on sigs.k8s.io/kind's cluster
// provider, for Docker or Podman. It needs a running engine, so tests use a
// stand-in; `krops-kind up` then `down` on a machine with Docker is its
// whole exercise.
//
// kind runs the engine CLI itself, without a context (its exec package has
// no way in), so a wedged engine would hold a call for ever and a signal to
// krops alone would leave kind's docker running. Each call therefore runs
// beside a watcher: a query returns when its context ends and the engine
// commands kind started are stopped; every call registers those commands
// with the run's process groups, so a forced exit ends them too.
package kindlib

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	"sigs.k8s.io/kind/pkg/log"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/plugins/sdk/procfs"
	"github.com/kropsdev/krops/tools/kit/bootcluster"
)

// Kind drives kind for one engine.
type Kind struct {
	p      *cluster.Provider
	engine string
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
	return &Kind{p: cluster.NewProvider(opt, cluster.ProviderWithLogger(logger)), engine: engine}, nil
}

// List names the kind clusters.
func (k *Kind) List(ctx context.Context) ([]string, error) {
	return query(ctx, k, "listing kind clusters", k.p.List)
}

// Create makes the cluster. kind always writes a kubeconfig; it gets a
// scratch file, so the user's file changes only through kubecfg.Merge.
// A creation runs to its end on the first interrupt (kind removes a
// cluster whose creation failed, and cut short it could not); a forced
// exit stops it.
func (k *Kind) Create(ctx context.Context, name string, config []byte) error {
	scratch, err := scratchKubeconfig()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(scratch))
	defer proc.OnKill(ctx, func() { k.stopChildren(syscall.SIGKILL) })()
	return k.p.Create(name,
		cluster.CreateWithRawConfig(config),
		cluster.CreateWithKubeconfigPath(scratch),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	)
}

// Delete removes the cluster (its scratch kubeconfig entry goes with it).
// Like Create, it runs to its end on the first interrupt.
func (k *Kind) Delete(ctx context.Context, name string) error {
	scratch, err := scratchKubeconfig()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(scratch))
	defer proc.OnKill(ctx, func() { k.stopChildren(syscall.SIGKILL) })()
	return k.p.Delete(name, scratch)
}

// KubeConfig returns the cluster's kubeconfig.
func (k *Kind) KubeConfig(ctx context.Context, name string, internal bool) (string, error) {
	return query(ctx, k, "reading the kubeconfig of kind cluster "+name, func() (string, error) { return k.p.KubeConfig(name, internal) })
}

// SyncNodeDir writes d into every node of the cluster except kind's load
// balancer, through kind's own node commands (an exec in the node, on any
// engine kind drives). The manifest goes last, so an interrupted sync
// leaves the earlier record naming everything a later sync must clean.
func (k *Kind) SyncNodeDir(ctx context.Context, name string, d bootcluster.NodeDir) (int, error) {
	ns, err := query(ctx, k, "listing the nodes of kind cluster "+name, func() ([]nodes.Node, error) { return k.p.ListInternalNodes(name) })
	if err != nil {
		return 0, err
	}
	rels := make([]string, 0, len(d.Files))
	for rel := range d.Files {
		if rel != d.Manifest {
			rels = append(rels, rel)
		}
	}
	slices.Sort(rels)
	rels = append(rels, d.Manifest)
	for _, n := range ns {
		_, err := query(ctx, k, "writing "+d.Path+" in node "+n.String(), func() (struct{}, error) {
			var earlier bytes.Buffer
			// A node without the manifest has nothing of krops's yet.
			_ = n.Command("cat", path.Join(d.Path, d.Manifest)).SetStdout(&earlier).Run()
			for _, rel := range d.Stale(earlier.String()) {
				target, err := inside(d.Path, rel)
				if err != nil {
					return struct{}{}, err
				}
				if err := n.Command("rm", "-rf", "--", target).Run(); err != nil {
					return struct{}{}, fmt.Errorf("removing %s: %w", target, err)
				}
			}
			for _, rel := range rels {
				target, err := inside(d.Path, rel)
				if err != nil {
					return struct{}{}, err
				}
				if err := nodeutils.WriteFile(n, target, d.Files[rel]); err != nil {
					return struct{}{}, fmt.Errorf("writing %s: %w", target, err)
				}
			}
			return struct{}{}, nil
		})
		if err != nil {
			return 0, err
		}
	}
	return len(ns), nil
}

// inside joins rel to dir and refuses a result outside dir.
func inside(dir, rel string) (string, error) {
	p := path.Join(dir, rel)
	if rel == "" || !strings.HasPrefix(p, dir+"/") {
		return "", fmt.Errorf("%q is not a path inside %s", rel, dir)
	}
	return p, nil
}

// query runs a kind call that returns when ctx ends (a read, or a write
// a repeat makes whole): whatever
// engine command it was waiting on is stopped, and the call's goroutine
// finishes on its own once that command is gone.
func query[T any](ctx context.Context, k *Kind, what string, call func() (T, error)) (T, error) {
	defer proc.OnKill(ctx, func() { k.stopChildren(syscall.SIGKILL) })()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		k.stopChildren(syscall.SIGTERM)
		var zero T
		return zero, fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// stopChildren signals this process's children that run the engine CLI:
// the commands kind started. Other children (plugins, owned groups) are
// not the engine's name and are left to their own handling.
func (k *Kind) stopChildren(sig syscall.Signal) {
	for _, pid := range procfs.Children(os.Getpid()) {
		if procfs.Comm(pid) == k.engine {
			_ = syscall.Kill(pid, sig)
		}
	}
}

func scratchKubeconfig() (string, error) {
	dir, err := os.MkdirTemp("", "krops-kind-")
	if err != nil {
		return "", fmt.Errorf("scratch kubeconfig: %w", err)
	}
	return filepath.Join(dir, "kubeconfig"), nil
}
