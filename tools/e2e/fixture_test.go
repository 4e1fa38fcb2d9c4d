package e2e_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/testenv"
)

// The harness's fixture (testenv.BootstrapTOML) is a valid bootstrap.toml: the loader and its
// validation accept it, and it says what it was built from.
func TestBootstrapTOMLLoads(t *testing.T) {
	lh := testenv.LocalHost()
	lh.Tables = "[environments.local-host.teardown]\ncapi-workloads = [\"local-workload\"]"
	demo := testenv.Env{Name: "demo", Provider: "jsoncloud", Keys: []string{`pivot-manifests = ["p.yaml"]`}}
	path := filepath.Join(t.TempDir(), "bootstrap.toml")
	if err := os.WriteFile(path, []byte(testenv.BootstrapTOML(lh, demo)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(config.LoadOptions{Path: path})
	if err != nil {
		t.Fatalf("%v\n%s", err, testenv.BootstrapTOML(lh, demo))
	}
	if c.Bootstrap.DefaultEnvironment != "local-host" {
		t.Errorf("default %q", c.Bootstrap.DefaultEnvironment)
	}
	e := c.Environments["local-host"]
	if e.Provider != "docker" || e.MgmtCluster != "local-management" || len(e.Teardown.CAPIWorkloads) != 1 {
		t.Errorf("local-host: %+v", e)
	}
	if d := c.Environments["demo"]; d.MgmtCluster != "demo-management" || len(d.PivotManifests) != 1 {
		t.Errorf("demo: %+v", d)
	}
}
