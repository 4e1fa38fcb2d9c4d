package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/azure/internal/azure"
	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

const config = `{"environment": {"teardown": {"manual": "1. az group delete --name rg --yes"}}}`

func TestLoginCheckReadsTheCLIProfile(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AZURE_CONFIG_DIR": dir, "AZURE_SUBSCRIPTION_ID": "sub-1"}
	if c := azure.LoginCheck(env); c.OK || c.Remedy == "" {
		t.Errorf("no profile: %+v", c)
	}
	profile := "\xef\xbb\xbf" + `{"subscriptions": [{"id": "sub-0"}, {"id": "sub-1"}]}`
	if err := os.WriteFile(filepath.Join(dir, "azureProfile.json"), []byte(profile), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := azure.LoginCheck(env); !c.OK {
		t.Errorf("logged in: %+v", c)
	}
	env["AZURE_SUBSCRIPTION_ID"] = "sub-9"
	if c := azure.LoginCheck(env); c.OK || !strings.Contains(c.Message, "sub-9") {
		t.Errorf("wrong subscription: %+v", c)
	}
}

// Through the real plugin process: the teardown is manual, with the
// configured steps.
func TestTeardownPolicyIsManual(t *testing.T) {
	c, err := sdk.Load(context.Background(), "azure", sdk.LoadOptions{Path: sdktest.Build(t, ".", "azure")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Configure(ctx, sdk.Config{Environment: "azure", Raw: []byte(config), RepoRoot: t.TempDir()}, func(k string) (string, bool) {
		return "sub-1", k == "AZURE_SUBSCRIPTION_ID"
	}); err != nil {
		t.Fatal(err)
	}
	pol, err := c.TeardownPolicy(ctx)
	if err != nil || pol.HostRemoval != sdk.RemoveManually || !strings.Contains(pol.Manual, "az group delete") {
		t.Errorf("policy %+v %v", pol, err)
	}
}

func TestConformance(t *testing.T) {
	sdkconformance.Run(t, sdktest.Build(t, ".", "azure"), sdkconformance.Options{Config: sdk.Config{Raw: []byte(config), RepoRoot: t.TempDir()}})
}
