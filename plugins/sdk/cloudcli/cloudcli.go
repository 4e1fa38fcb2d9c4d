// Package cloudcli builds providers for clouds that krops drives through the
// cloud's own CLI rather than an SDK of its own (azure, gcp): read-only
// preflight checks of settings and CLI login state, and a manual teardown
// policy. Such providers declare no discover or sweep until they implement
// them for real. An environment's post-kind-create-task is not theirs to
// run: krops-kind runs it, for every provider, once.
package cloudcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Setting is a variable the cloud needs.
type Setting struct {
	Env string
	// Default applies when the variable is unset; empty means required.
	Default string
	// Remedy says how to set it.
	Remedy string
}

// Spec describes one cloud.
type Spec struct {
	Name     string
	Settings []Setting
	// LoginCheck inspects the CLI's state files (read-only) given the
	// variables; it returns a failed check when the user is not logged in.
	LoginCheck func(env map[string]string) sdk.Check
	// ExtraEnv are further variables LoginCheck reads.
	ExtraEnv []string
}

// Provider implements sdk.Provider for a Spec.
type Provider struct {
	sdk.Unimplemented
	spec    Spec
	version string
	env     map[string]string
	envName string
	manual  string
}

// New returns the provider.
func New(spec Spec, version string) *Provider {
	return &Provider{spec: spec, version: version}
}

// Describe declares preflight and the policy.
func (p *Provider) Describe(context.Context) (sdk.Description, error) {
	var env []string
	for _, s := range p.spec.Settings {
		env = append(env, s.Env)
	}
	env = append(env, p.spec.ExtraEnv...)
	return sdk.Description{
		Name: p.spec.Name, Version: p.version,
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapTeardownPolicy},
		ConfigKeys:   []string{"environments.*.teardown.manual"},
		Env:          env,
	}, nil
}

type fileConfig struct {
	Environment struct {
		Teardown struct {
			Manual string `json:"manual"`
		} `json:"teardown"`
	} `json:"environment"`
}

// Configure reads the environment's manual teardown text.
func (p *Provider) Configure(_ context.Context, cfg sdk.Config) error {
	var fc fileConfig
	if err := cfg.Decode(&fc); err != nil {
		return err
	}
	p.env = map[string]string{}
	for k, v := range cfg.Env {
		p.env[k] = v
	}
	for _, s := range p.spec.Settings {
		if p.env[s.Env] == "" && s.Default != "" {
			p.env[s.Env] = s.Default
		}
	}
	p.envName = cfg.Environment
	p.manual = strings.TrimSpace(fc.Environment.Teardown.Manual)
	return nil
}

// Preflight checks every setting and the CLI login, all reported together.
func (p *Provider) Preflight(context.Context) ([]sdk.Check, error) {
	var checks []sdk.Check
	for _, s := range p.spec.Settings {
		if v := p.env[s.Env]; v != "" {
			checks = append(checks, sdk.Check{Name: s.Env, OK: true, Message: v})
		} else {
			checks = append(checks, sdk.Check{Name: s.Env, OK: false, Message: s.Env + " is not set", Remedy: s.Remedy})
		}
	}
	if p.spec.LoginCheck != nil {
		checks = append(checks, p.spec.LoginCheck(p.env))
	}
	return checks, nil
}

// TeardownPolicy is manual: the text from bootstrap.toml lists the steps.
func (p *Provider) TeardownPolicy(context.Context) (sdk.TeardownPolicy, error) {
	manual := p.manual
	if manual == "" {
		manual = fmt.Sprintf("krops cannot tear down %s environments automatically yet, and bootstrap.toml gives no [environments.%s.teardown] manual text: delete the workload clusters and their cloud resources with the %s console or CLI.", p.spec.Name, p.envName, p.spec.Name)
	}
	return sdk.TeardownPolicy{HostRemoval: sdk.RemoveManually, Manual: manual, CloudOnlySweepAllowed: false}, nil
}
