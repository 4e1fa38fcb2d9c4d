package main_test

import (
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

func TestConformance(t *testing.T) {
	config := sdk.Config{Environment: "gcp", Raw: []byte(`{"environment": {"teardown": {"manual": "1. gcloud container clusters delete c"}}}`), RepoRoot: t.TempDir()}
	sdkconformance.Run(t, sdktest.Build(t, ".", "gcp"), sdkconformance.Options{Config: config})
}
