package cli

import (
	"os"

	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/tools/kit/config"
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
