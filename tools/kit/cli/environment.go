package cli

import (
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/kit/kubecfg"
)

// Selected is what every environment-scoped command starts from: the
// configuration, the parsed knobs, the chosen environment, and the lookup
// that produced them (flags over environment variables).
type Selected struct {
	Config      *config.Config
	Knobs       *config.Knobs
	Environment *config.Environment
	Lookup      config.Lookup
}

// SelectEnvironment loads bootstrap.toml and the knobs and picks the
// environment from KROPS_PROFILE or the command's one optional argument.
// Every problem is a usage error (exit 2).
func SelectEnvironment(c *ucli.Context) (*Selected, error) {
	if c.NArg() > 1 {
		return nil, Usagef("at most one environment argument, got %v", c.Args().Slice())
	}
	lookup := Lookup(c)
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	conf, err := config.Load(config.LoadOptions{Lookup: lookup, WorkDir: wd})
	if err != nil {
		return nil, UsageError(err)
	}
	home, _ := os.UserHomeDir()
	knobs, err := config.ParseKnobs(config.KnobOptions{Lookup: lookup, WorkDir: wd, Home: home})
	if err != nil {
		return nil, UsageError(err)
	}
	env, err := conf.SelectEnvironment(knobs.Profile, c.Args().First())
	if err != nil {
		return nil, UsageError(err)
	}
	if err := knobs.ForEnvironment(env.Name); err != nil {
		return nil, UsageError(err)
	}
	return &Selected{Config: conf, Knobs: knobs, Environment: env, Lookup: lookup}, nil
}

// Kind is the kind cluster as every tool reaches it: KUBECONFIG resolved
// to the one file krops writes (default ~/.kube/config; a list is refused,
// exit 2) and the environment's kind context.
func (s *Selected) Kind() (kubecfg.Ref, error) {
	home, _ := os.UserHomeDir()
	path, err := kubecfg.Path(s.Knobs.Kubeconfig, home)
	if err != nil {
		return kubecfg.Ref{}, UsageError(err)
	}
	return kubecfg.Ref{Path: path, Context: s.Config.Bootstrap.KindContext}, nil
}

// Mgmt is the management cluster: MGMT_KUBECONFIG (one file per
// environment by default) and the environment's mgmt-context.
func (s *Selected) Mgmt() kubecfg.Ref {
	return kubecfg.Ref{Path: s.Knobs.MgmtKubeconfig, Context: s.Config.Bootstrap.MgmtContext}
}
