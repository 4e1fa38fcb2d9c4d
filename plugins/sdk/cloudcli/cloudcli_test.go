package cloudcli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// standInMise is a STAND-IN for mise: the real task would federate a cloud
// identity, which needs a cloud account.
type standInMise struct {
	cmds []proc.Cmd
	fail bool
}

func (m *standInMise) Run(_ context.Context, c proc.Cmd) (proc.Result, error) {
	m.cmds = append(m.cmds, c)
	if m.fail {
		res := proc.Result{ExitCode: 1, Stderr: []byte("token s3cr3t-token rejected")}
		return res, &proc.Error{Cmd: c, Result: res, Err: errors.New("exit status 1")}
	}
	return proc.Result{Stdout: []byte("federated with s3cr3t-token\n")}, nil
}

func spec() Spec {
	return Spec{Name: "cloudx", Settings: []Setting{{Env: "CLOUDX_ACCOUNT", Remedy: "set it"}, {Env: "CLOUDX_REGION", Default: "north"}}, ExtraEnv: []string{"CLOUDX_TOKEN"}}
}

func configured(t *testing.T, runner proc.Runner, env map[string]string, repo string) *Provider {
	p := New(spec(), "1.0.0", runner)
	raw := `{"environment": {"post-kind-create-task": "federate", "teardown": {"manual": "1. do this\n2. then that\n"}}}`
	if err := p.Configure(context.Background(), sdk.Config{Environment: "cloudx", Raw: []byte(raw), Env: env, RepoRoot: repo}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHookRunsTheMiseTaskWithArgvInTheRepositoryRoot(t *testing.T) {
	m := &standInMise{}
	repo := t.TempDir()
	p := configured(t, m, map[string]string{"CLOUDX_ACCOUNT": "acc", "CLOUDX_TOKEN": "s3cr3t-token"}, repo)
	msgs, err := p.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate, Kubeconfig: "/k/kind.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.cmds) != 1 {
		t.Fatalf("calls %v", m.cmds)
	}
	c := m.cmds[0]
	if c.Path != "mise" || strings.Join(c.Args, " ") != "-E cloudx run federate" || c.Dir != repo {
		t.Errorf("ran %s %v in %s", c.Path, c.Args, c.Dir)
	}
	for _, want := range []string{"CLOUDX_ACCOUNT=acc", "CLOUDX_REGION=north", "KUBECONFIG=/k/kind.yaml"} {
		if !slices.Contains(c.Env, want) {
			t.Errorf("env lacks %s: %v", want, c.Env)
		}
	}
	if strings.Contains(strings.Join(msgs, "\n"), "s3cr3t-token") {
		t.Errorf("a token leaked into messages: %v", msgs)
	}
	m.fail = true
	_, err = p.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-token") || !strings.Contains(err.Error(), "federate") {
		t.Errorf("failed task: %v", err)
	}
	if _, err := p.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseBeforeMove}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Errorf("an unknown phase must be an invalid argument: %v", err)
	}
}

func TestPreflightReportsEveryProblemTogether(t *testing.T) {
	repo := t.TempDir()
	p := configured(t, &standInMise{}, nil, repo)
	p.spec.LoginCheck = func(map[string]string) sdk.Check {
		return sdk.Check{Name: "login", OK: false, Message: "not logged in", Remedy: "log in"}
	}
	checks, err := p.Preflight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sdk.Check{}
	for _, c := range checks {
		got[c.Name] = c
	}
	if got["CLOUDX_ACCOUNT"].OK || got["CLOUDX_ACCOUNT"].Remedy != "set it" {
		t.Errorf("missing setting: %+v", got["CLOUDX_ACCOUNT"])
	}
	if !got["CLOUDX_REGION"].OK || got["CLOUDX_REGION"].Message != "north" {
		t.Errorf("defaulted setting: %+v", got["CLOUDX_REGION"])
	}
	if got["login"].OK || got["mise task federate"].OK {
		t.Errorf("login and task checks: %+v", checks)
	}
	if err := os.WriteFile(filepath.Join(repo, "mise.cloudx.toml"), []byte("[tasks.federate]\nrun = \"true\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checks, _ = p.Preflight(context.Background())
	for _, c := range checks {
		if c.Name == "mise task federate" && !c.OK {
			t.Errorf("task check with the layer present: %+v", c)
		}
	}
}

func TestTeardownIsManualWithTheConfiguredSteps(t *testing.T) {
	p := configured(t, &standInMise{}, nil, t.TempDir())
	pol, err := p.TeardownPolicy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pol.HostRemoval != sdk.RemoveManually || pol.CloudOnlySweepAllowed || pol.Manual != "1. do this\n2. then that" {
		t.Errorf("policy %+v", pol)
	}
	d, _ := p.Describe(context.Background())
	if d.Has(sdk.CapDiscover) || d.Has(sdk.CapSweep) {
		t.Error("a CLI-driven cloud must not claim discover or sweep")
	}
}
