// Package gcp is the gcp provider's cloud specification: the settings it
// needs and how it tells whether gcloud is logged in.
package gcp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/cloudcli"
)

// Spec is the gcp provider.
func Spec() cloudcli.Spec {
	return cloudcli.Spec{
		Name: "gcp",
		Settings: []cloudcli.Setting{
			{Env: "GCP_PROJECT", Remedy: "export GCP_PROJECT=<project id> (gcloud config get-value project)"},
			{Env: "GCP_REGION", Default: "europe-north1", Remedy: "export GCP_REGION=<region>"},
		},
		LoginCheck: LoginCheck,
		ExtraEnv:   []string{"CLOUDSDK_CONFIG"},
	}
}

// LoginCheck reads gcloud's configuration (read-only): the active
// configuration must name an account, as `gcloud auth login` leaves it.
func LoginCheck(env map[string]string) sdk.Check {
	dir := env["CLOUDSDK_CONFIG"]
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".config", "gcloud")
	}
	check := sdk.Check{Name: "gcloud login", Remedy: "gcloud auth login (CLOUDSDK_CONFIG selects the configuration directory)"}
	active := "default"
	if b, err := os.ReadFile(filepath.Join(dir, "active_config")); err == nil && strings.TrimSpace(string(b)) != "" {
		active = strings.TrimSpace(string(b))
	}
	path := filepath.Join(dir, "configurations", "config_"+active)
	b, err := os.ReadFile(path)
	if err != nil {
		check.Message = fmt.Sprintf("no gcloud configuration %q: %v", active, err)
		return check
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "account" && strings.TrimSpace(v) != "" {
			check.OK = true
			check.Message = "logged in as " + strings.TrimSpace(v) + " (configuration " + active + ")"
			check.Remedy = ""
			return check
		}
	}
	check.Message = fmt.Sprintf("gcloud configuration %s names no account", path)
	return check
}
