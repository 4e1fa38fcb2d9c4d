// Package testenv gives tests real components: kube-apiserver + etcd with real
// CRDs, moto for AWS, an OCI registry, a fault-injecting proxy, and the
// external programs of the chain. Where a component cannot run here, the
// stand-ins are named as such.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// InCI reports whether the tests run in CI, where a missing test dependency
// is a failure, never a skip. CI systems disagree on the value: GitHub,
// GitLab, CircleCI and Travis set CI=true, others 1, True or their own name
// (Woodpecker), so any value but an explicit no counts. Azure Pipelines
// (TF_BUILD) and Jenkins (JENKINS_URL) do not set CI at all.
func InCI() bool { return inCI(os.Getenv) }

func inCI(getenv func(string) string) bool {
	switch v := strings.ToLower(strings.TrimSpace(getenv("CI"))); v {
	case "", "0", "false", "no", "off":
	default:
		return true
	}
	return getenv("TF_BUILD") != "" || getenv("JENKINS_URL") != ""
}

// Missing stops a test whose dependency is absent: it fails under CI and
// skips locally with how to get the dependency.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is missing and the tests run in CI (CI=%q): %s", what, os.Getenv("CI"), how)
	}
	t.Skipf("%s is missing (%s); skipping. In CI (CI=true) this fails.", what, how)
}

// MissingTestbin stops a test whose tools/testbin program (kube-apiserver,
// Flux, ...) is absent. When tools/scripts/test.sh is still building them,
// it names a file in KROPS_TESTBIN_DEFER: the test's package directory and
// top-level test name are recorded there, tab-separated, and the test
// skips; the script runs each recorded test again once the builds are done,
// without the variable, so a test that still finds nothing then fails in
// CI. Only the recorded tests run again, not their packages whole: the
// rest of a package passed already. Otherwise it is Missing.
func MissingTestbin(t testing.TB, what, how string) {
	t.Helper()
	if file := os.Getenv("KROPS_TESTBIN_DEFER"); file != "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatalf("recording a deferred test: %v", err)
		}
		top, _, _ := strings.Cut(t.Name(), "/")
		if err := appendLine(file, dir+"\t"+top); err != nil {
			t.Fatalf("recording a deferred test in KROPS_TESTBIN_DEFER=%s: %v", file, err)
		}
		t.Skipf("%s is still being built: tools/scripts/test.sh runs this test again once it is", what)
	}
	Missing(t, what, how)
}

// appendLine appends line to file in one write, which O_APPEND keeps whole
// when test binaries of several packages record at once.
func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Integration skips t under `go test -short` (task test:unit): it needs a
// real component and the unit run is meant to be fast. Full runs (task test,
// CI) never pass -short.
func Integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs in `task test`, not in `task test:unit`")
	}
}

// Program finds an external program: the path in envVar when set, else name
// on PATH. It calls Missing when neither exists.
func Program(t testing.TB, envVar, name, how string) string {
	t.Helper()
	Integration(t)
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", envVar, p, err)
		}
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, how)
	}
	return p
}

// NeedTestbin stops t (MissingTestbin) unless every tools/testbin program is
// built: kube-apiserver and etcd, the Flux controllers, the Flux Operator
// and Cluster API. A test that starts them later, from a goroutine that
// answers another process (a stand-in's request), checks here first, so a
// missing one stops the test before anything waits on it.
func NeedTestbin(t testing.TB) {
	t.Helper()
	Integration(t)
	for _, p := range []struct{ key, what, how string }{
		{"KUBEBUILDER_ASSETS", "kube-apiserver and etcd", HowToGetAPIServer},
		{"KROPS_FLUX_BIN", "the Flux controllers", HowToGetFlux},
		{"KROPS_FLUX_OPERATOR_BIN", "the Flux Operator", HowToGetFluxOperator},
		{"KROPS_CAPI_BIN", "the Cluster API manager", HowToGetClusterAPI},
	} {
		if Testbin(p.key) == "" {
			MissingTestbin(t, p.what+" ("+p.key+")", p.how)
		}
	}
}
