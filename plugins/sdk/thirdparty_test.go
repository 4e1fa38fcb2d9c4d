package sdk_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A provider written outside this repository: a module of its own, outside
// the workspace (GOWORK=off), whose go.mod requires only the SDK. The one
// replace stands for the published SDK version. It must build with the
// SDK's public packages alone and pass the conformance suite.
func TestAProviderInAModuleOfItsOwnConforms(t *testing.T) {
	sdkDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	for _, f := range []string{"main.go", "conformance_test.go"} {
		b, err := os.ReadFile(filepath.Join("testdata", "thirdparty", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod := "module example.com/krops-provider-acme\n\ngo 1.26.0\n\nrequire github.com/kropsdev/krops/plugins/sdk v0.1.0\n\n" +
		"// Stands for the published version.\nreplace github.com/kropsdev/krops/plugins/sdk => " + sdkDir + "\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, args := range [][]string{{"mod", "tidy"}, {"vet", "./..."}, {"test", "-count=1", "-v", "-run", "TestConformance", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"+raceFlag)
		if out, err = cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v in the third-party module: %v\n%s", args, err, out)
		}
	}
	for _, want := range []string{"--- PASS: TestConformance/describe", "--- PASS: TestConformance/capability_honesty", "--- PASS: TestConformance/exits_when_its_host_dies"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the conformance run lacks %q:\n%s", want, out)
		}
	}
}
