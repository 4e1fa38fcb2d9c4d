// Package kindsetup reads what every use of the kind bootstrap cluster
// needs (bootstrap.toml, the knobs, the node image, the container engine)
// into bootcluster's options, and takes the cluster's host lock. krops-kind
// and krops-pivot (which deletes kind at its end) share it.
package kindsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk/engine"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/bootcluster"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/enginenet"
	"github.com/kropsdev/krops/tools/kit/kindcfg"
	"github.com/kropsdev/krops/tools/kit/lock"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// Setup is the kind cluster's options and the engine that runs it.
type Setup struct {
	Options bootcluster.Options
	// Engine is nil when no engine answered; EngineErr says why.
	Engine    *engine.Engine
	EngineErr error
	// NodeImageFrom says where Options.NodeImage came from.
	NodeImageFrom string
}

// Load builds the setup for the selected environment.
func Load(ctx context.Context, sel *cli.Selected, prog *ui.Progress, out io.Writer) (*Setup, error) {
	kind, err := sel.Kind()
	if err != nil {
		return nil, err
	}
	// A mirror's copy or a locally built image replaces the pin; the
	// cluster records it, so switching back is drift (--recreate).
	nodeImage, nodeImageFrom := sel.Knobs.NodeImage, "KROPS_KIND_NODE_IMAGE"
	if nodeImage == "" {
		if nodeImage, err = pinnedNodeImage(sel); err != nil {
			return nil, cli.UsageError(err)
		}
		nodeImageFrom = "pinned in airgap/images.txt"
	}
	var mirrors []kindcfg.Mirror
	for i, m := range sel.Config.Mirrors {
		mirrors = append(mirrors, kindcfg.Mirror{Registry: m.Registry, Endpoints: m.Endpoints,
			Source: fmt.Sprintf("%s [[mirrors]] entry %d", sel.Config.Path, i+1)})
	}
	if _, err := kindcfg.MirrorFiles(mirrors); err != nil {
		return nil, cli.UsageError(err)
	}
	s := &Setup{NodeImageFrom: nodeImageFrom}
	ctxHost, _ := os.LookupEnv("CONTAINER_HOST")
	// Engine CLIs run in process groups of their own, so an interrupt
	// ends a wrapper's children too (and a forced exit kills them).
	runner := proc.Exec{OwnGroup: true}
	s.Engine, s.EngineErr = engine.Detect(ctx, engine.Options{
		Engine: sel.Knobs.ContainerEngine, Sock: sel.Knobs.EngineSock, Toolbox: sel.Knobs.Toolbox, ContainerHost: ctxHost,
		Env: os.Environ(), Runner: runner, Waiting: func(m string) { prog.Infof("%s", m) },
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	self, _ := os.Hostname()
	s.Options = bootcluster.Options{
		Name: sel.Config.Bootstrap.KindCluster, Kubeconfig: kind, Environment: sel.Environment.Name,
		NodeImage: nodeImage, RunID: sel.Knobs.RunID, Toolbox: sel.Knobs.Toolbox, Self: self,
		PostCreateTask: sel.Environment.PostKindCreateTask, Mise: os.Getenv("KROPS_MISE_BIN"), RepoRoot: sel.Config.Root, Env: os.Environ(),
		Mirrors: mirrors, Runner: runner, Progress: prog, Out: out,
	}
	if s.Engine != nil {
		// kind's library runs the engine's CLI with this process's
		// environment, so what detection decided (CONTAINER_HOST in the
		// toolbox, KIND_EXPERIMENTAL_PROVIDER for podman) must be in it.
		for _, kv := range s.Engine.Env {
			if k, v, ok := strings.Cut(kv, "="); ok && (k == "CONTAINER_HOST" || k == "KIND_EXPERIMENTAL_PROVIDER") {
				if err := os.Setenv(k, v); err != nil {
					return nil, err
				}
			}
		}
		s.Options.EngineSock = s.Engine.Sock
		s.Options.Network = enginenet.Network{Run: s.Engine.Run}
		k, err := newKind(s.Engine.Name)
		if err != nil {
			return nil, err
		}
		s.Options.Kind = k
	}
	return s, nil
}

// pinnedNodeImage is the kindest/node image airgap/images.txt pins.
func pinnedNodeImage(sel *cli.Selected) (string, error) {
	images, err := sel.Config.RepoFile("airgap/images.txt", "airgap/images.txt")
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(images)
	if err != nil {
		return "", fmt.Errorf("reading the image inventory: %w", err)
	}
	return kindcfg.NodeImage(raw, images)
}

// EngineNeeded turns a failed detection into the error a user can act on.
func (s *Setup) EngineNeeded() error {
	if errors.Is(s.EngineErr, engine.ErrTimeout) {
		// An engine that exists and does not answer may run the cluster:
		// what is there is unknown, not absent.
		return cli.UnknownStateError(s.EngineErr)
	}
	if s.EngineErr != nil {
		return cli.UsageError(fmt.Errorf("%w (and ENGINE_SOCK for a socket other than the engine's default)", s.EngineErr))
	}
	return nil
}

// LockName is the host lock of the kind cluster named cluster: bootstrap,
// pivot and teardown of it take the same one.
func LockName(cluster string) string { return "kind-" + cluster }

// Hold takes the cluster's host lock; a live holder is a refusal (exit 2).
func Hold(cluster, runID string, prog *ui.Progress) (*lock.Lock, error) {
	l, err := lock.Acquire(lock.Options{Name: LockName(cluster), Holder: lock.Holder{RunID: runID}})
	var held *lock.HeldError
	var dir *lock.DirError
	if errors.As(err, &held) || errors.As(err, &dir) {
		return nil, cli.UsageError(err)
	}
	if err != nil {
		return nil, err
	}
	if l.Previous != nil {
		prog.Warnf("took over the lock of kind cluster %s from a run that is no longer running (%s)", cluster, l.Previous)
	}
	return l, nil
}
