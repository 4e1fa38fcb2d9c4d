// Package azure is the azure provider's cloud specification: the settings
// it needs and how it tells whether the Azure CLI is logged in.
package azure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/cloudcli"
)

// Spec is the azure provider.
func Spec() cloudcli.Spec {
	return cloudcli.Spec{
		Name: "azure",
		Settings: []cloudcli.Setting{
			{Env: "AZURE_SUBSCRIPTION_ID", Remedy: "export AZURE_SUBSCRIPTION_ID=<subscription id> (az account show --query id -o tsv)"},
			{Env: "AZURE_LOCATION", Default: "swedencentral", Remedy: "export AZURE_LOCATION=<region>"},
		},
		LoginCheck: LoginCheck,
		ExtraEnv:   []string{"AZURE_CONFIG_DIR", "AZURE_TENANT_ID"},
	}
}

// LoginCheck reads the Azure CLI's profile (read-only): `az login` records
// the subscriptions it can use in <AZURE_CONFIG_DIR>/azureProfile.json.
func LoginCheck(env map[string]string) sdk.Check {
	dir := env["AZURE_CONFIG_DIR"]
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".azure")
	}
	path := filepath.Join(dir, "azureProfile.json")
	check := sdk.Check{Name: "az login", Remedy: "az login, then az account set --subscription <id> (AZURE_CONFIG_DIR selects the profile directory)"}
	b, err := os.ReadFile(path)
	if err != nil {
		check.Message = fmt.Sprintf("no Azure CLI profile: %v", err)
		return check
	}
	var profile struct {
		Subscriptions []struct {
			ID string `json:"id"`
		} `json:"subscriptions"`
	}
	// The CLI writes the file with a UTF-8 byte order mark.
	if err := json.Unmarshal(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), &profile); err != nil {
		check.Message = fmt.Sprintf("%s is not valid JSON: %v", path, err)
		return check
	}
	want := env["AZURE_SUBSCRIPTION_ID"]
	for _, s := range profile.Subscriptions {
		if want == "" || s.ID == want {
			check.OK = true
			check.Message = "logged in; subscription " + s.ID + " available"
			check.Remedy = ""
			return check
		}
	}
	check.Message = fmt.Sprintf("the Azure CLI profile in %s has no subscription %q", dir, want)
	return check
}
