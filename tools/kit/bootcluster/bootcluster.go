// Package bootcluster creates, reuses, checks and deletes the kind cluster
// that bootstraps an environment. The kind library, the container engine
// and the environment's provider sit behind small interfaces: the decisions
// (reuse, drift, recreate, health, kubeconfig, the toolbox network, hooks)
// are made here.
package bootcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/kindcfg"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// Kind is what krops needs of sigs.k8s.io/kind's cluster provider.
type Kind interface {
	List(ctx context.Context) ([]string, error)
	// Create makes the cluster from a rendered v1alpha4 configuration and
	// must not touch the user's kubeconfig.
	Create(ctx context.Context, name string, config []byte) error
	Delete(ctx context.Context, name string) error
	// KubeConfig returns the cluster's kubeconfig; internal is the address
	// inside the engine's kind network.
	KubeConfig(ctx context.Context, name string, internal bool) (string, error)
	// SyncNodeDir makes a directory of every node of the cluster hold what
	// d says, and returns how many nodes it wrote to.
	SyncNodeDir(ctx context.Context, name string, d NodeDir) (int, error)
}

// NodeDir is a directory krops keeps in every node.
type NodeDir struct {
	// Path is absolute, inside the node.
	Path string
	// Files are written, by path relative to Path.
	Files map[string]string
	// Manifest (a key of Files) records what krops wrote; Stale turns the
	// earlier manifest (empty when there is none) into the entries,
	// relative to Path, to remove first.
	Manifest string
	Stale    func(earlier string) []string
}

// ProviderKind is what the environment's provider adds to the kind
// cluster.
type ProviderKind struct {
	ContainerdPatches []string
	Mirrors           []kindcfg.Mirror
}

// Network is the engine's view of the kind network, used in the toolbox.
type Network interface {
	// Members lists the names and ids of the containers on the network.
	Members(ctx context.Context, network string) ([]string, error)
	Connect(ctx context.Context, network, container string) error
	Disconnect(ctx context.Context, network, container string) error
}

// Provider is the environment's plugin, as far as kind is concerned.
type Provider interface {
	// KindConfig returns the provider's containerd patches and registry
	// mirrors (none when it has nothing to add).
	KindConfig(ctx context.Context) (ProviderKind, error)
	// AfterKindCreate runs the provider's hook against the cluster (the
	// kubeconfig file and context just written) and returns what it did
	// and the manifests it asks to apply there.
	AfterKindCreate(ctx context.Context, kubeconfig, kubeContext string) (sdk.HookResult, error)
}

// KindNetwork is the engine network kind puts its nodes on.
const KindNetwork = "kind"

// DefaultHealthTimeout bounds the wait for every node to be Ready.
const DefaultHealthTimeout = budget.KindNodesReady

// Options describe one cluster.
type Options struct {
	Name string
	// Kubeconfig is where the cluster's credentials are written: the one
	// file and the context.
	Kubeconfig  kubecfg.Ref
	Environment string
	NodeImage   string
	EngineSock  string
	RunID       string
	// Toolbox: krops runs in a container that must join the kind network
	// and use the cluster's internal address.
	Toolbox bool
	// Self is this container's name or id on the engine (the toolbox).
	Self          string
	HealthTimeout time.Duration
	// Mirrors are the configuration's registry mirrors ([[mirrors]]),
	// written into every node beside the provider's.
	Mirrors []kindcfg.Mirror

	// PostCreateTask is the environment's post-kind-create-task, run as
	// `<Mise> -E <environment> run <task>` in RepoRoot.
	PostCreateTask string
	Mise           string
	RepoRoot       string
	Env            []string

	// BeforeCreate runs before a cluster is created, and before --recreate
	// deletes one; its error stops Up with nothing changed.
	BeforeCreate func(ctx context.Context) error

	Kind     Kind
	Network  Network
	Provider Provider
	Runner   proc.Runner
	Progress *ui.Progress
	Out      io.Writer
}

// ErrUnhealthy means an existing cluster is not usable as it is.
var ErrUnhealthy = errors.New("the kind cluster is not healthy")

// ErrDrift means an existing cluster was made for other settings.
var ErrDrift = errors.New("the kind cluster differs from what the environment needs")

// Up creates the cluster, or reuses it when it is healthy and matches, or
// rebuilds it with recreate. Then it writes the kubeconfig and runs the
// provider's hook and the post-create task.
func Up(ctx context.Context, o Options, recreate bool) error {
	var pk ProviderKind
	if err := o.Progress.Step(ctx, "reading the provider's kind configuration", func(ctx context.Context) (err error) {
		pk, err = o.Provider.KindConfig(ctx)
		return err
	}); err != nil {
		return err
	}
	want, raw, err := kindcfg.Render(kindcfg.Input{Name: o.Name, NodeImage: o.NodeImage, EngineSock: o.EngineSock, ContainerdPatches: pk.ContainerdPatches, RunID: o.RunID})
	if err != nil {
		return err
	}
	// Checked before anything is created: a bad mirror must not cost a
	// cluster.
	mirrors, err := kindcfg.MirrorFiles(append(append([]kindcfg.Mirror(nil), pk.Mirrors...), o.Mirrors...))
	if err != nil {
		return err
	}
	exists, err := o.exists(ctx)
	if err != nil {
		return err
	}
	if (!exists || recreate) && o.BeforeCreate != nil {
		if err := o.BeforeCreate(ctx); err != nil {
			return err
		}
	}
	if exists && recreate {
		if err := o.Progress.Step(ctx, "deleting kind cluster "+o.Name+" (--recreate)", func(ctx context.Context) error { return o.delete(ctx) }); err != nil {
			return err
		}
		exists = false
	}
	if !exists {
		if err := o.Progress.Step(ctx, "creating kind cluster "+o.Name+" ("+o.NodeImage+")", func(ctx context.Context) error {
			if err := o.Kind.Create(ctx, o.Name, raw); err != nil {
				return fmt.Errorf("creating kind cluster %s: %w", o.Name, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if o.Toolbox {
		if err := o.Progress.Step(ctx, "joining the "+KindNetwork+" network", func(ctx context.Context) error { return o.join(ctx) }); err != nil {
			return err
		}
	}
	kc, err := o.Kind.KubeConfig(ctx, o.Name, o.Toolbox)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig of kind cluster %s: %w", o.Name, err)
	}
	cl, err := newClients([]byte(kc))
	if err != nil {
		return err
	}
	timeout := o.HealthTimeout
	if timeout == 0 {
		timeout = DefaultHealthTimeout
	}
	if err := o.Progress.Wait(ctx, fmt.Sprintf("waiting for every node of %s to be Ready (up to %s)", o.Name, timeout), func(ctx context.Context) error {
		err := waitHealthy(ctx, cl, timeout)
		if err != nil && exists {
			return fmt.Errorf("%w: %s exists but %v; rebuild it with `krops-kind up %s --recreate`", ErrUnhealthy, o.Name, err, o.Environment)
		}
		return err
	}); err != nil {
		return err
	}
	if exists {
		if err := o.Progress.Step(ctx, "checking "+o.Name+" against the environment", func(ctx context.Context) error { return checkDrift(ctx, cl.kc, want, o) }); err != nil {
			return err
		}
	} else if err := recordConfig(ctx, cl.kc, raw, o.RunID); err != nil {
		return err
	}
	// Every Up writes them, so a reused cluster follows a changed mirror
	// (containerd reads the directory at each pull).
	if err := o.Progress.Step(ctx, fmt.Sprintf("writing %d registry mirror(s) to the nodes' %s", len(mirrors)-1, kindcfg.HostsDir), func(ctx context.Context) error {
		n, err := o.Kind.SyncNodeDir(ctx, o.Name, NodeDir{Path: kindcfg.HostsDir, Files: mirrors, Manifest: kindcfg.Manifest,
			Stale: func(earlier string) []string { return kindcfg.Stale(earlier, mirrors) }})
		if err != nil {
			return fmt.Errorf("writing the registry mirrors into the nodes of kind cluster %s: %w", o.Name, err)
		}
		if n == 0 {
			return fmt.Errorf("kind cluster %s has no node to write the registry mirrors to", o.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(pk.Mirrors) > 0 {
		// The provider's mirror is its local registry (local-host's).
		if err := o.Progress.Step(ctx, "recording the local registry in "+HostingNamespace+"/"+HostingName+" and "+RegistryConfigNS+"/"+RegistryConfig, func(ctx context.Context) error {
			return recordRegistry(ctx, cl.kc, pk.Mirrors[0])
		}); err != nil {
			return err
		}
	}
	if err := o.Progress.Step(ctx, "writing context "+o.Kubeconfig.Context+" to "+o.Kubeconfig.Path, func(context.Context) error {
		return kubecfg.Merge(o.Kubeconfig.Path, []byte(kc), o.Kubeconfig.Context)
	}); err != nil {
		return err
	}
	var hook sdk.HookResult
	if err := o.Progress.Step(ctx, "running the provider's after-kind-create hook", func(ctx context.Context) (err error) {
		hook, err = o.Provider.AfterKindCreate(ctx, o.Kubeconfig.Path, o.Kubeconfig.Context)
		for _, d := range hook.Messages {
			o.Progress.Infof("%s", d)
		}
		return err
	}); err != nil {
		return err
	}
	if len(hook.Manifests) > 0 {
		// What the provider's controllers read (cloud credentials, account
		// values): applied before Flux installs them; named, never shown.
		if err := o.Progress.Step(ctx, "applying what the provider supplies for its controllers", func(ctx context.Context) error {
			return applyProvided(ctx, cl.cfg, hook.Manifests, o.Progress)
		}); err != nil {
			return err
		}
	}
	if o.PostCreateTask != "" {
		return o.Progress.Step(ctx, "running post-kind-create-task "+o.PostCreateTask, func(ctx context.Context) error { return o.runTask(ctx) })
	}
	return nil
}

// Down deletes the cluster; one that does not exist is a success. deleted
// says whether there was one, so a summary claims only what happened.
func Down(ctx context.Context, o Options) (deleted bool, err error) {
	exists, err := o.exists(ctx)
	if err != nil {
		return false, err
	}
	if !exists {
		o.Progress.Infof("kind cluster %s does not exist: nothing to delete", o.Name)
		return false, kubecfg.Remove(o.Kubeconfig.Path, o.Kubeconfig.Context)
	}
	if err := o.Progress.Step(ctx, "deleting kind cluster "+o.Name, func(ctx context.Context) error { return o.delete(ctx) }); err != nil {
		return false, err
	}
	return true, kubecfg.Remove(o.Kubeconfig.Path, o.Kubeconfig.Context)
}

func (o Options) exists(ctx context.Context) (bool, error) {
	names, err := o.Kind.List(ctx)
	if err != nil {
		return false, fmt.Errorf("listing kind clusters: %w", err)
	}
	for _, n := range names {
		if n == o.Name {
			return true, nil
		}
	}
	return false, nil
}

// delete leaves the kind network first in the toolbox: the engine refuses
// to remove a network a container is still on.
func (o Options) delete(ctx context.Context) error {
	if o.Toolbox {
		member, err := o.member(ctx)
		if err != nil {
			return err
		}
		if member {
			if err := o.Network.Disconnect(ctx, KindNetwork, o.Self); err != nil {
				return fmt.Errorf("leaving the %s network: %w", KindNetwork, err)
			}
		}
	}
	if err := o.Kind.Delete(ctx, o.Name); err != nil {
		return fmt.Errorf("deleting kind cluster %s: %w", o.Name, err)
	}
	return nil
}

func (o Options) member(ctx context.Context) (bool, error) {
	if o.Self == "" {
		return false, errors.New("in the toolbox, but this container's name is unknown (no hostname)")
	}
	members, err := o.Network.Members(ctx, KindNetwork)
	if err != nil {
		return false, fmt.Errorf("inspecting the %s network: %w", KindNetwork, err)
	}
	for _, m := range members {
		// The engine names a container by id; its hostname is the short id.
		if m == o.Self || strings.HasPrefix(m, o.Self) {
			return true, nil
		}
	}
	return false, nil
}

func (o Options) join(ctx context.Context) error {
	member, err := o.member(ctx)
	if err != nil || member {
		return err
	}
	if err := o.Network.Connect(ctx, KindNetwork, o.Self); err != nil {
		return fmt.Errorf("joining the %s network: %w", KindNetwork, err)
	}
	return nil
}

// CheckTask says whether mise defines the environment's
// post-kind-create-task (nil when none is set), asking mise itself, which
// knows every file and layer that may define it.
func (o Options) CheckTask(ctx context.Context) error {
	if o.PostCreateTask == "" {
		return nil
	}
	res, err := o.Runner.Run(ctx, proc.Cmd{Path: o.mise(), Args: []string{"-E", o.Environment, "tasks", "info", o.PostCreateTask}, Dir: o.RepoRoot, Env: o.Env})
	if err != nil {
		return fmt.Errorf("post-kind-create-task %s: mise -E %s in %s does not define it (%s): define [tasks.%s] in mise.%s.toml, or remove the setting from [environments.%s]",
			o.PostCreateTask, o.Environment, o.RepoRoot, firstLine(strings.TrimSpace(string(res.Stderr)+" "+err.Error())), o.PostCreateTask, o.Environment, o.Environment)
	}
	return nil
}

func (o Options) mise() string {
	if o.Mise == "" {
		return "mise"
	}
	return o.Mise
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func (o Options) runTask(ctx context.Context) error {
	mise := o.mise()
	res, err := o.Runner.Run(ctx, proc.Cmd{Path: mise, Args: []string{"-E", o.Environment, "run", o.PostCreateTask}, Dir: o.RepoRoot, Env: o.Env})
	if err != nil {
		return fmt.Errorf("post-kind-create-task %s (mise -E %s run %s in %s) failed: %w\n%s", o.PostCreateTask, o.Environment, o.PostCreateTask, o.RepoRoot, err, strings.TrimSpace(string(res.Stdout)+string(res.Stderr)))
	}
	return nil
}

// Drift compares a recorded configuration with the wanted one.
func Drift(recorded []byte, want *v1alpha4.Cluster) ([]string, error) {
	have, err := kindcfg.Parse(recorded)
	if err != nil {
		return nil, err
	}
	return kindcfg.Drift(have, want), nil
}
