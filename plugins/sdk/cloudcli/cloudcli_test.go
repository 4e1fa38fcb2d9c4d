package cloudcli

import (
	"context"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk"
)

func spec() Spec {
	return Spec{Name: "cloudx", Settings: []Setting{{Env: "CLOUDX_ACCOUNT", Remedy: "set it"}, {Env: "CLOUDX_REGION", Default: "north"}}, ExtraEnv: []string{"CLOUDX_TOKEN"}}
}

func configured(t *testing.T, env map[string]string) *Provider {
	p := New(spec(), "1.0.0")
	raw := `{"environment": {"teardown": {"manual": "1. do this\n2. then that\n"}}}`
	if err := p.Configure(context.Background(), sdk.Config{Environment: "cloudx", Raw: []byte(raw), Env: env, RepoRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPreflightReportsEveryProblemTogether(t *testing.T) {
	p := configured(t, nil)
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
	if got["login"].OK {
		t.Errorf("login check: %+v", checks)
	}
}

func TestTeardownIsManualWithTheConfiguredSteps(t *testing.T) {
	p := configured(t, nil)
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
	// krops-kind runs post-kind-create-task for every provider; a hook
	// here would run it a second time.
	if d.Has(sdk.CapHooks) {
		t.Error("a CLI-driven cloud must not declare hooks")
	}
}
