// Command krops-kind manages the kind cluster that bootstraps an environment:
// create or reuse it (up), delete it (down), report it (status) and check
// that it can be made (preflight). A host lock per cluster name keeps two
// runs from working on the same cluster.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/tools/kit/bootcluster"
	"github.com/kropsdev/krops/tools/kit/budget"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kindcfg"
	"github.com/kropsdev/krops/tools/kit/kindsetup"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/lock"
	"github.com/kropsdev/krops/tools/kit/pivoted"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/kit/ui"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

var knobs = []string{
	"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KROPS_KIND_NODE_IMAGE", "CONTAINER_ENGINE", "ENGINE_SOCK",
	"KROPS_TOOLBOX", "KUBECONFIG", "KROPS_RUN_ID", "KROPS_PLUGIN_DIR",
}

func run(args []string) int {
	// Every exit path kills the plugins this process started.
	return cli.Run(context.Background(), newApp(), args, pluginhost.RunOptions())
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	app := cli.New(cli.Options{
		Name:      "krops-kind",
		Usage:     "the kind cluster that bootstraps an environment",
		ArgsUsage: "<command> [ENV]",
		Description: `krops-kind up creates the environment's kind cluster (or reuses it when it is healthy and was made for the
same settings), writes its context into KUBECONFIG, then runs the provider's after-kind-create hook and the
environment's post-kind-create-task. krops-kind down deletes it. Each command also runs alone, for recovery.

The cluster is named by bootstrap.kind-cluster (KROPS_KIND_CLUSTER overrides; krops-<env> by default); its context
is kind-<name> unless BOOTSTRAP_KUBECONTEXT is set. The node image is the kindest/node entry pinned in
airgap/images.txt, or KROPS_KIND_NODE_IMAGE (a mirror's copy, or an image built locally). The engine is
CONTAINER_ENGINE, else docker, else podman; its socket (ENGINE_SOCK overrides) is mounted into the node at
/var/run/docker.sock for CAPD.

A lock per cluster name (under $XDG_STATE_HOME/krops/locks) refuses a second up or down on the same name while a
live process holds it (exit 2, naming the holder's run id, pid and command); a lock whose process died is taken
over with a warning.

Before it creates a cluster (or --recreate deletes one), up reads the management cluster's context
(bootstrap.mgmt-context in MGMT_KUBECONFIG). When that cluster answers and carries a run's metadata, an earlier
pivot lives there, and a new kind cluster would run a second Cluster API that builds the same Clusters again: up
refuses (exit 2). When the context is there but the cluster does not answer, up stops (exit 3): tear it down once
it is back, or delete the context if it is gone for good. Teardown removes the context with the cluster.
docs/kind.md has the details.`,
		Version: version,
		Knobs:   knobs,
		Commands: []*ucli.Command{
			{Name: "up", Usage: "create or reuse the kind cluster; refuses to create one next to a management cluster an earlier pivot lives in", ArgsUsage: "[ENV]", Action: up,
				Flags: []ucli.Flag{&ucli.BoolFlag{Name: "recreate", Usage: "delete the cluster first when it exists, then create it"}}},
			{Name: "down", Usage: "delete the kind cluster (one that does not exist is a success)", ArgsUsage: "[ENV]", Action: down},
			{Name: "status", Usage: "report the kind cluster: exists, healthy, nodes, node image, kubeconfig, engine, lock holder", ArgsUsage: "[ENV]", Action: status,
				Flags: []ucli.Flag{&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"}}},
			{Name: "preflight", Usage: "check the engine, its socket, KUBECONFIG, the node image, the provider's preflight and that no earlier pivot lives in the management cluster; changes nothing", ArgsUsage: "[ENV]", Action: preflight},
		},
	})
	return app
}

// setup is what every command reads.
type setup struct {
	*kindsetup.Setup
	sel  *cli.Selected
	opts bootcluster.Options
	prog *ui.Progress
}

func load(c *ucli.Context) (*setup, error) {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return nil, err
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	ks, err := kindsetup.Load(c.Context, sel, prog, c.App.Writer)
	if err != nil {
		return nil, err
	}
	return &setup{Setup: ks, sel: sel, opts: ks.Options, prog: prog}, nil
}

// hold takes the cluster's host lock; a live holder is a refusal (exit 2).
func (s *setup) hold(c *ucli.Context) (*lock.Lock, error) {
	return kindsetup.Hold(s.opts.Name, s.opts.RunID, s.prog)
}

func (s *setup) loadProvider(c *ucli.Context) (*sdk.Client, error) {
	return pluginhost.Load(c.Context, pluginhost.Options{Config: s.sel.Config, Environment: s.sel.Environment, Lookup: s.sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")})
}

// locked loads the setup, takes the cluster's lock and checks the engine:
// what up and down both need before they change anything.
func locked(c *ucli.Context) (*setup, *lock.Lock, error) {
	s, err := load(c)
	if err != nil {
		return nil, nil, err
	}
	l, err := s.hold(c)
	if err != nil {
		return nil, nil, err
	}
	if err := s.EngineNeeded(); err != nil {
		l.Release()
		return nil, nil, err
	}
	for _, w := range s.Engine.Warnings {
		s.prog.Warnf("%s", w)
	}
	return s, l, nil
}

func up(c *ucli.Context) error {
	s, l, err := locked(c)
	if err != nil {
		return err
	}
	defer l.Release()
	pc, err := s.loadProvider(c)
	if err != nil {
		return err
	}
	defer pc.Close()
	s.opts.Provider = pluginProvider{c: pc}
	s.opts.BeforeCreate = func(ctx context.Context) error {
		o := s.mgmt()
		f, err := pivoted.Look(ctx, o)
		if err != nil {
			return cli.UsageError(err)
		}
		if f.State == pivoted.NotYet {
			s.prog.Warnf("the management cluster behind context %s in %s answers without run metadata: a pivot into it may have stopped before its move", o.Cluster.Context, o.Cluster.Path)
		}
		return f.CreateKindGuard(s.sel.Environment.Name, o)
	}
	err = bootcluster.Up(c.Context, s.opts, c.Bool("recreate"))
	if errors.Is(err, bootcluster.ErrDrift) {
		// A refusal: the cluster is kept as it is until the user asks for
		// --recreate (found by the real-engine lane: this exited 1).
		return cli.UsageError(err)
	}
	return err
}

// mgmt names the environment's management cluster, whose run metadata says
// whether an earlier pivot lives there.
func (s *setup) mgmt() pivoted.Options {
	return pivoted.Options{Cluster: s.sel.Mgmt(), FluxNamespace: s.sel.Config.Bootstrap.FluxNamespace}
}

func down(c *ucli.Context) error {
	s, l, err := locked(c)
	if err != nil {
		return err
	}
	defer l.Release()
	_, err = bootcluster.Down(c.Context, s.opts)
	return err
}

// statusReport is bootcluster.Status plus what only the host knows.
type statusReport struct {
	bootcluster.Status
	Engine     string       `json:"engine"`
	EngineSock string       `json:"engine_socket,omitempty"`
	EngineErr  string       `json:"engine_error,omitempty"`
	Lock       *lock.Holder `json:"lock_holder"`
}

func status(c *ucli.Context) error {
	out := c.String("output")
	if out != "text" && out != "json" {
		return cli.Usagef("--output %q is not valid: want text or json", out)
	}
	s, err := load(c)
	if err != nil {
		return err
	}
	r := statusReport{Status: bootcluster.Status{Name: s.opts.Name, Context: s.opts.Kubeconfig.Context, Kubeconfig: s.opts.Kubeconfig.Path, Nodes: []bootcluster.NodeStatus{}}}
	if h, held, err := lock.Status(lock.Options{Name: "kind-" + s.opts.Name}); err == nil && held {
		r.Lock = &h
	}
	if s.EngineErr != nil {
		r.EngineErr = s.EngineErr.Error()
	} else {
		r.Engine, r.EngineSock = s.Engine.Name, s.Engine.Sock
		if r.Status, err = bootcluster.Inspect(c.Context, s.opts, budget.Probe); err != nil {
			return err
		}
	}
	w := c.App.Writer
	if out == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "kind cluster %s (context %s)\n", r.Name, r.Context)
	if r.EngineErr != "" {
		fmt.Fprintf(w, "  engine: none answers: %s\n", r.EngineErr)
	} else {
		fmt.Fprintf(w, "  engine: %s (socket %s)\n", r.Engine, r.EngineSock)
		fmt.Fprintf(w, "  exists: %t\n", r.Exists)
	}
	if r.Exists {
		fmt.Fprintf(w, "  healthy: %t", r.Healthy)
		if r.Problem != "" {
			fmt.Fprintf(w, " (%s)", r.Problem)
		}
		fmt.Fprintln(w)
		for _, n := range r.Nodes {
			fmt.Fprintf(w, "  node %s: ready=%t\n", n.Name, n.Ready)
		}
		fmt.Fprintf(w, "  node image: %s\n  created by run: %s\n", orUnknown(r.NodeImage), orUnknown(r.RunID))
	}
	fmt.Fprintf(w, "  kubeconfig: %s\n", r.Kubeconfig)
	if r.Lock != nil {
		fmt.Fprintf(w, "  locked by: %s\n", r.Lock)
	} else {
		fmt.Fprintln(w, "  locked by: nobody")
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// preflight checks everything up needs and changes nothing. Every problem
// is reported together.
func preflight(c *ucli.Context) error {
	s, err := load(c)
	if err != nil {
		return err
	}
	var failed []string
	unknown := false
	reported := map[string]bool{}
	out := cli.Printer(c, c.App.Writer)
	check := func(name string, err error, ok string) {
		// The provider may check the same thing (the docker provider checks
		// the engine too): say it once.
		if reported[name] {
			return
		}
		reported[name] = true
		if err != nil {
			failed = append(failed, name)
			out.Failuref("%s: %v", name, err)
			return
		}
		out.Successf("%s: %s", name, ok)
	}
	if s.EngineErr != nil {
		check("container engine", s.EngineNeeded(), "")
	} else {
		check("container engine", nil, s.Engine.Name+", socket "+s.Engine.Sock)
		for _, w := range s.Engine.Warnings {
			fmt.Fprintf(c.App.Writer, "! %s\n", w)
		}
	}
	check("KUBECONFIG", kubecfg.Writable(s.opts.Kubeconfig.Path), s.opts.Kubeconfig.Path)
	check("node image", nil, s.opts.NodeImage+" ("+s.NodeImageFrom+")")
	if t := s.opts.PostCreateTask; t != "" {
		check("post-kind-create-task", s.opts.CheckTask(c.Context), t+" (mise -E "+s.sel.Environment.Name+" run "+t+")")
	}
	mo := s.mgmt()
	switch f, err := pivoted.Look(c.Context, mo); {
	case err != nil:
		check("earlier pivot", err, "")
	case f.State == pivoted.None:
		check("earlier pivot", nil, "none (no context "+mo.Cluster.Context+" in "+mo.Cluster.Path+")")
	case f.State == pivoted.NotYet:
		check("earlier pivot", nil, "none finished (the management cluster behind "+mo.Cluster.Context+" answers without run metadata)")
	default:
		unknown = unknown || f.State == pivoted.Unknown
		check("earlier pivot", f.CreateKindGuard(s.sel.Environment.Name, mo), "")
	}
	pc, err := s.loadProvider(c)
	if err != nil {
		check("provider "+s.sel.Environment.Provider, err, "")
	} else {
		defer pc.Close()
		if pc.Description().Has(sdk.CapPreflight) {
			checks, err := pc.Preflight(c.Context)
			if err != nil {
				check("provider "+pc.Name+" preflight", err, "")
			}
			for _, ch := range checks {
				var cerr error
				if !ch.OK {
					cerr = errors.New(ch.Message + remedy(ch.Remedy))
				}
				check(ch.Name, cerr, ch.Message)
			}
		}
	}
	if len(failed) > 0 {
		err := fmt.Errorf("preflight failed (%d of its checks): nothing was changed", len(failed))
		if unknown {
			return cli.UnknownStateError(err)
		}
		return cli.UsageError(err)
	}
	return nil
}

func remedy(r string) string {
	if r == "" {
		return ""
	}
	return "; fix: " + r
}

// pluginProvider is bootcluster.Provider on the environment's plugin,
// calling only what it declares.
type pluginProvider struct{ c *sdk.Client }

func (p pluginProvider) KindConfig(ctx context.Context) (bootcluster.ProviderKind, error) {
	if !p.c.Description().Has(sdk.CapKindConfig) {
		return bootcluster.ProviderKind{}, nil
	}
	kc, err := p.c.KindConfig(ctx)
	if err != nil {
		return bootcluster.ProviderKind{}, err
	}
	pk := bootcluster.ProviderKind{ContainerdPatches: kc.ContainerdConfigPatches}
	for _, m := range kc.RegistryMirrors {
		pk.Mirrors = append(pk.Mirrors, kindcfg.Mirror{Registry: m.Registry, Endpoints: m.Endpoints, Source: "provider " + p.c.Name})
	}
	return pk, nil
}

func (p pluginProvider) AfterKindCreate(ctx context.Context, kubeconfig, kubeContext string) (sdk.HookResult, error) {
	d := p.c.Description()
	if !d.Has(sdk.CapHooks) {
		return sdk.HookResult{}, nil
	}
	for _, ph := range d.Phases {
		if ph == sdk.PhaseAfterKindCreate {
			return p.c.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate, Kubeconfig: kubeconfig, Context: kubeContext})
		}
	}
	return sdk.HookResult{}, nil
}
