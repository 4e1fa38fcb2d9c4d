// Package cloudcli builds providers for clouds that krops drives through the
// cloud's own CLI and mise tasks rather than an SDK of its own (azure, gcp):
// read-only preflight checks of settings and CLI login state, a hook that
// runs the environment's post-kind-create mise task, and a manual teardown
// policy. Such providers declare no discover or sweep until they implement
// them for real.
package cloudcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/proc"
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
	// ExtraEnv are further variables the mise task needs (forwarded to it).
	ExtraEnv []string
}

// Provider implements sdk.Provider for a Spec.
type Provider struct {
	sdk.Unimplemented
	spec     Spec
	version  string
	runner   proc.Runner
	env      map[string]string
	envName  string
	repoRoot string
	task     string
	manual   string
}

// New returns the provider; runner nil means real processes.
func New(spec Spec, version string, runner proc.Runner) *Provider {
	if runner == nil {
		runner = proc.Exec{}
	}
	return &Provider{spec: spec, version: version, runner: runner}
}

// Describe declares preflight, the after-kind-create hook and the policy.
func (p *Provider) Describe(context.Context) (sdk.Description, error) {
	env := []string{"MISE_ENV_FILE", "MISE_AUTO_INSTALL"}
	for _, s := range p.spec.Settings {
		env = append(env, s.Env)
	}
	env = append(env, p.spec.ExtraEnv...)
	return sdk.Description{
		Name: p.spec.Name, Version: p.version,
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapHooks, sdk.CapTeardownPolicy},
		Phases:       []sdk.Phase{sdk.PhaseAfterKindCreate},
		ConfigKeys:   []string{"post-kind-create-task", "teardown.manual"},
		Env:          env,
	}, nil
}

type fileConfig struct {
	Environment struct {
		PostKindCreateTask string `json:"post-kind-create-task"`
		Teardown           struct {
			Manual string `json:"manual"`
		} `json:"teardown"`
	} `json:"environment"`
}

// Configure reads the environment's task and manual text.
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
	p.repoRoot = cfg.RepoRoot
	p.task = fc.Environment.PostKindCreateTask
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
	if p.task != "" && p.repoRoot != "" {
		layer := filepath.Join(p.repoRoot, "mise."+p.envName+".toml")
		if _, err := os.Stat(layer); err != nil {
			checks = append(checks, sdk.Check{Name: "mise task " + p.task, OK: false,
				Message: layer + " does not exist", Remedy: "add the environment layer with a [tasks." + p.task + "] table"})
		} else {
			checks = append(checks, sdk.Check{Name: "mise task " + p.task, OK: true, Message: "defined in " + layer})
		}
	}
	return checks, nil
}

// Hook runs `mise -E <env> run <task>` in the repository root after kind is
// created (federating the cloud identity with the new cluster).
func (p *Provider) Hook(ctx context.Context, req sdk.HookRequest) ([]string, error) {
	if req.Phase != sdk.PhaseAfterKindCreate {
		return nil, fmt.Errorf("%w: provider %s has no %s hook", sdk.ErrInvalidArgument, p.spec.Name, req.Phase)
	}
	if p.task == "" {
		return []string{"no post-kind-create-task configured"}, nil
	}
	if p.repoRoot == "" {
		return nil, errors.New("the host sent no repository root; the mise task must run there")
	}
	env := proc.Inherit("PATH", "HOME", "TMPDIR", "USER")
	for k, v := range p.env {
		env = append(env, k+"="+v)
	}
	if req.Kubeconfig != "" {
		env = append(env, "KUBECONFIG="+req.Kubeconfig)
	}
	var secrets []string
	for k, v := range p.env {
		if strings.Contains(k, "SECRET") || strings.Contains(k, "TOKEN") || strings.Contains(k, "PASSWORD") {
			secrets = append(secrets, v)
		}
	}
	res, err := p.runner.Run(ctx, proc.Cmd{Path: "mise", Args: []string{"-E", p.envName, "run", p.task}, Env: env, Dir: p.repoRoot, Secrets: secrets})
	if err != nil {
		return nil, fmt.Errorf("post-kind-create task %s: %w", p.task, err)
	}
	msgs := []string{fmt.Sprintf("ran mise -E %s run %s", p.envName, p.task)}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if l != "" {
			msgs = append(msgs, proc.Redact(l, secrets))
		}
	}
	return msgs, nil
}

// TeardownPolicy is manual: the text from bootstrap.toml lists the steps.
func (p *Provider) TeardownPolicy(context.Context) (sdk.TeardownPolicy, error) {
	manual := p.manual
	if manual == "" {
		manual = fmt.Sprintf("krops cannot tear down %s environments automatically yet, and bootstrap.toml gives no [environments.%s.teardown] manual text: delete the workload clusters and their cloud resources with the %s console or CLI.", p.spec.Name, p.envName, p.spec.Name)
	}
	return sdk.TeardownPolicy{HostRemoval: sdk.RemoveManually, Manual: manual, CloudOnlySweepAllowed: false}, nil
}
