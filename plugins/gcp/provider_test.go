package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/gcp/internal/gcp"
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

func TestLoginCheckReadsTheActiveConfiguration(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"CLOUDSDK_CONFIG": dir}
	if c := gcp.LoginCheck(env); c.OK || c.Remedy == "" {
		t.Errorf("no configuration: %+v", c)
	}
	if err := os.MkdirAll(filepath.Join(dir, "configurations"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("active_config", "work\n")
	write("configurations/config_work", "[core]\nproject = p\n")
	if c := gcp.LoginCheck(env); c.OK || !strings.Contains(c.Message, "no account") {
		t.Errorf("no account: %+v", c)
	}
	write("configurations/config_work", "[core]\naccount = me@example.com\nproject = p\n")
	if c := gcp.LoginCheck(env); !c.OK || !strings.Contains(c.Message, "me@example.com") {
		t.Errorf("logged in: %+v", c)
	}
}

func TestConformanceAndHook(t *testing.T) {
	config := sdk.Config{Environment: "gcp", Raw: []byte(`{"environment": {"post-kind-create-task": "wif-federate", "teardown": {"manual": "1. gcloud container clusters delete c"}}}`), RepoRoot: t.TempDir()}
	bin := sdktest.Build(t, ".", "gcp")
	sdkconformance.Run(t, bin, sdkconformance.Options{Config: config})

	// STAND-IN mise: the real wif-federate task needs a GCP project.
	mise := sdktest.NewRecorder(t, "mise")
	c, err := sdk.Load(context.Background(), "gcp", sdk.LoadOptions{Path: bin, BaseEnv: []string{"PATH=" + mise.Dir + ":/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Configure(context.Background(), config, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Hook(context.Background(), sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate}); err != nil {
		t.Fatal(err)
	}
	if calls := mise.Calls(); len(calls) != 1 || calls[0] != config.RepoRoot+"|-E gcp run wif-federate" {
		t.Errorf("mise calls %v", calls)
	}
}
