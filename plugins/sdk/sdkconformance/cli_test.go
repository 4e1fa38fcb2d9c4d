//go:build conformance

package sdkconformance

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk"
)

// TestPluginFromEnvironment is the entry point of
// `task plugin:conformance PLUGIN=<path>`: it checks the binary in
// KROPS_CONFORMANCE_PLUGIN. KROPS_CONFORMANCE_CONFIG (JSON sent with
// Configure) and KROPS_CONFORMANCE_ENV (JSON object of declared variables)
// are optional.
func TestPluginFromEnvironment(t *testing.T) {
	bin := os.Getenv("KROPS_CONFORMANCE_PLUGIN")
	if bin == "" {
		t.Fatal("set KROPS_CONFORMANCE_PLUGIN (task plugin:conformance PLUGIN=<path>)")
	}
	o := Options{Config: sdk.Config{Raw: []byte(os.Getenv("KROPS_CONFORMANCE_CONFIG"))}}
	if env := os.Getenv("KROPS_CONFORMANCE_ENV"); env != "" {
		if err := json.Unmarshal([]byte(env), &o.Env); err != nil {
			t.Fatalf("KROPS_CONFORMANCE_ENV: %v", err)
		}
	}
	Run(t, bin, o)
}
