// Command krops-access reaches what an environment built: it writes the
// kubeconfig of every cluster Cluster API provisioned, and forwards a local
// port to an app on a workload cluster (Podinfo by default).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
	"github.com/kropsdev/krops/tools/kit/pluginhost"
	"github.com/kropsdev/krops/tools/krops-access/internal/access"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	return cli.Run(context.Background(), newApp(), args, pluginhost.RunOptions())
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	return cli.New(cli.Options{
		Name:  "krops-access",
		Usage: "write the clusters' kubeconfigs; forward a local port to Podinfo on the workload cluster",
		Description: `The Cluster API inventory is read where it lives: the management cluster (bootstrap.mgmt-context in
MGMT_KUBECONFIG) once the pivot moved it, else the kind cluster (bootstrap.kind-context in KUBECONFIG). Each
cluster's kubeconfig comes from the Secret Cluster API wrote for it (<cluster>-user-kubeconfig when the provider
writes one, as CAPA does for EKS: its token refreshes; else <cluster>-kubeconfig). Outside the toolbox, the
environment's provider plugin gives the endpoint reachable from this machine (for local-host, CAPD's load balancer
published on 127.0.0.1); a cluster whose endpoint it cannot give keeps the recorded one, with a warning.

Exit codes: 0 done; 1 a failure (no inventory, cluster, Service or Ready pod: the message says which); 2 bad
input; 130 port-forward stopped by Ctrl-C.

ENV is the environment (KROPS_PROFILE wins when set; default: bootstrap.default-environment).`,
		Version: version,
		Knobs:   []string{"KROPS_PROFILE", "BOOTSTRAP_CONFIG", "KROPS_KIND_CLUSTER", "BOOTSTRAP_KUBECONTEXT", "KUBECONFIG", "MGMT_KUBECONFIG", "KROPS_TOOLBOX", "KROPS_PLUGIN_DIR"},
		Commands: []*ucli.Command{
			{
				Name: "kubeconfigs", ArgsUsage: "[ENV]", Action: kubeconfigs,
				Usage: "write .kube/<cluster>.kubeconfig (0600, one context named after the cluster) for every Cluster API cluster, and say which answer",
				Flags: []ucli.Flag{&ucli.StringFlag{Name: "dir", Value: ".kube", Usage: "directory to write them to (made 0700)"}},
			},
			{
				Name: "mgmt-kubeconfig", ArgsUsage: "[ENV]", Action: mgmtKubeconfig,
				Usage: "write the management cluster's kubeconfig into MGMT_KUBECONFIG again (context bootstrap.mgmt-context), from the Secret Cluster API keeps current; the user Secret (EKS: a token that refreshes) when there is one",
			},
			{
				Name: "port-forward", ArgsUsage: "[ENV]", Action: portForward,
				Usage: "forward 127.0.0.1:9898 to a Ready Podinfo pod on the workload cluster until Ctrl-C",
				Flags: []ucli.Flag{
					&ucli.StringFlag{Name: "cluster", Usage: "the Cluster API cluster (default: the environment's first [seed] workload)"},
					&ucli.StringFlag{Name: "namespace", Value: "podinfo", Usage: "the Service's namespace"},
					&ucli.StringFlag{Name: "service", Value: "podinfo", Usage: "the Service to reach"},
					&ucli.IntFlag{Name: "service-port", Usage: "the Service's port (default: its only one, else the one named http)"},
					&ucli.StringFlag{Name: "address", Value: "127.0.0.1", Usage: "local address to listen on"},
					&ucli.IntFlag{Name: "local-port", Value: 9898, Usage: "local port (0: the Service port)"},
				},
			},
		},
	})
}

// setup loads the environment and the candidates for the inventory.
func setup(c *ucli.Context) (*cli.Selected, []kubecfg.Ref, *pluginhost.Endpoints, error) {
	sel, err := cli.SelectEnvironment(c)
	if err != nil {
		return nil, nil, nil, err
	}
	kind, err := sel.Kind()
	if err != nil {
		return nil, nil, nil, err
	}
	endpoints := pluginhost.NewEndpoints(pluginhost.Options{Config: sel.Config, Environment: sel.Environment, Lookup: sel.Lookup, Stderr: c.App.ErrWriter, Verbose: c.Bool("verbose")}, sel.Knobs.Toolbox)
	return sel, []kubecfg.Ref{sel.Mgmt(), kind}, endpoints, nil
}

func kubeconfigs(c *ucli.Context) error {
	sel, candidates, endpoints, err := setup(c)
	if err != nil {
		return err
	}
	defer endpoints.Close()
	prog := cli.Printer(c, c.App.ErrWriter)
	inv, err := access.Locate(c.Context, candidates, sel.Config.Bootstrap.MgmtNamespace)
	if err != nil {
		return err
	}
	prog.Infof("Cluster API inventory: %s", inv.Cluster)
	dir := c.String("dir")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(sel.Config.Root, dir)
	}
	written, err := access.Kubeconfigs(c.Context, access.KubeconfigsOptions{Inventory: inv, Dir: dir, Endpoint: endpoints.Server, Progress: prog})
	for _, w := range written {
		state := "answers"
		if !w.Answers {
			state = "does not answer yet"
		}
		prog.Successf("%s (from Secret %s; %s)", w.Path, w.From, state)
		fmt.Fprintf(c.App.Writer, "%s\t%s\n", w.Cluster, w.Path)
	}
	if err != nil {
		return err
	}
	if len(written) == 0 {
		return fmt.Errorf("no Cluster in %s has a kubeconfig yet (Cluster API writes one when the control plane is up)", inv.Cluster)
	}
	return nil
}

func mgmtKubeconfig(c *ucli.Context) error {
	sel, candidates, endpoints, err := setup(c)
	if err != nil {
		return err
	}
	defer endpoints.Close()
	prog := cli.Printer(c, c.App.ErrWriter)
	name := sel.Environment.MgmtCluster
	inv, err := access.Locate(c.Context, candidates, sel.Config.Bootstrap.MgmtNamespace, name)
	if err != nil {
		return fmt.Errorf("management cluster %s: %w", name, err)
	}
	raw, from, err := inv.Kubeconfig(c.Context, name, endpoints.Server, func(w string) { prog.Warnf("%s", w) })
	if err != nil {
		return err
	}
	target := sel.Mgmt()
	if err := kubecfg.Merge(target.Path, raw, target.Context); err != nil {
		return fmt.Errorf("writing %s: %w", target, err)
	}
	state := "answers"
	if cfg, err := target.RESTConfig(); err != nil || kubecfg.Answers(cfg) != nil {
		state = "does not answer yet"
	}
	prog.Successf("%s from Secret %s on %s (%s)", target, from, inv.Cluster, state)
	return nil
}

func portForward(c *ucli.Context) error {
	sel, candidates, endpoints, err := setup(c)
	if err != nil {
		return err
	}
	defer endpoints.Close()
	cluster := c.String("cluster")
	if cluster == "" {
		if len(sel.Environment.Seed.Workloads) == 0 {
			return cli.Usagef("environment %s names no workload cluster ([environments.%s.seed] workloads): give --cluster", sel.Environment.Name, sel.Environment.Name)
		}
		cluster = sel.Environment.Seed.Workloads[0]
	}
	if p := c.Int("local-port"); p < 0 || p > 65535 {
		return cli.Usagef("--local-port %d is not a port (0 to 65535)", p)
	}
	prog := cli.Printer(c, c.App.ErrWriter)
	inv, err := access.Locate(c.Context, candidates, sel.Config.Bootstrap.MgmtNamespace, cluster)
	if err != nil {
		return fmt.Errorf("workload cluster %s: %w", cluster, err)
	}
	err = access.Forward(c.Context, access.ForwardOptions{
		Inventory: inv, Cluster: cluster, Namespace: c.String("namespace"), Service: c.String("service"), ServicePort: c.Int("service-port"),
		Address: c.String("address"), LocalPort: c.Int("local-port"), Endpoint: endpoints.Server, Progress: prog,
		Ready: func(url string) { fmt.Fprintln(c.App.Writer, url) },
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
