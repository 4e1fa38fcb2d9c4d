package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

const config = `{"environment": {"sync-path": "mgmt/local-talos", "mgmt-cluster": "local-talos-management"}}`

const template = `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: TinkerbellMachineTemplate
metadata:
  name: cp
spec:
  template:
    spec:
      hardwareAffinity:
        required:
        - labelSelector:
            matchLabels:
              krops.io/role: control-plane
`

func hardware(mac string) string {
	return `apiVersion: tinkerbell.org/v1alpha1
kind: Hardware
metadata:
  name: node-1
  labels:
    krops.io/role: control-plane
spec:
  interfaces:
  - dhcp:
      mac: "` + mac + `"
`
}

func repoWith(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	dir := filepath.Join(root, "mgmt/local-talos/clusters/local-talos-management")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func preflight(t *testing.T, repo string) map[string]sdk.Check {
	t.Helper()
	c, err := sdk.Load(context.Background(), "talos", sdk.LoadOptions{Path: sdktest.Build(t, ".", "talos")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Configure(context.Background(), sdk.Config{Raw: []byte(config), RepoRoot: repo}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	checks, err := c.Preflight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sdk.Check{}
	for _, ch := range checks {
		out[ch.Name] = ch
	}
	return out
}

func TestPreflightChecksTheHardwareReference(t *testing.T) {
	ok := preflight(t, repoWith(t, map[string]string{"machines.yaml": template, "hardware.yaml": hardware("52:54:00:12:34:56")}))
	if c := ok["Hardware node-1"]; !c.OK {
		t.Errorf("configured hardware: %+v", c)
	}
	if c := ok["TinkerbellMachineTemplate cp hardware krops.io/role=control-plane"]; !c.OK || !strings.Contains(c.Message, "node-1") {
		t.Errorf("reference: %+v", ok)
	}

	placeholder := preflight(t, repoWith(t, map[string]string{"all.yaml": template + "---\n" + hardware("<MAC of the first machine>")}))
	if c := placeholder["Hardware node-1"]; c.OK || c.Remedy == "" {
		t.Errorf("placeholder MAC must fail: %+v", c)
	}

	missing := preflight(t, repoWith(t, map[string]string{"machines.yaml": template}))
	if c := missing["TinkerbellMachineTemplate cp hardware krops.io/role=control-plane"]; c.OK || !strings.Contains(c.Remedy, "krops.io/role=control-plane") {
		t.Errorf("dangling reference must fail: %+v", missing)
	}

	none := preflight(t, t.TempDir())
	if c := none["management cluster manifests"]; c.OK || !strings.Contains(c.Remedy, "local-talos-management") {
		t.Errorf("missing manifests: %+v", none)
	}
}

func TestTeardownReleasesHardwareAndRefusesCloudSweeps(t *testing.T) {
	bin := sdktest.Build(t, ".", "talos")
	c, err := sdk.Load(context.Background(), "talos", sdk.LoadOptions{Path: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.TeardownPolicy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !p.DeleteAllClusters || p.CloudOnlySweepAllowed || p.HostRemoval != sdk.RemoveByDeletingCluster || len(p.Notices) != 1 || !strings.Contains(p.Notices[0], "not wiped") {
		t.Errorf("policy %+v", p)
	}
	sdkconformance.Run(t, bin, sdkconformance.Options{Config: sdk.Config{Raw: []byte(config), RepoRoot: t.TempDir()}})
}
