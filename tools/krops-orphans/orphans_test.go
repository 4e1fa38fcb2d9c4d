package main_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The end-to-end tests run the real krops-orphans binary, which loads the
// real plugin subprocesses: the example jsoncloud provider (a fake cloud in
// a JSON file, see docs/plugins.md) and the docker provider.

var bootstrapTOML = testenv.BootstrapTOML(testenv.Env{Name: "demo", Provider: "jsoncloud",
	Tables: "[environments.demo.teardown]\ncapi-workloads = [\"demo-workload\"]"}, testenv.LocalHost())

// The scan happens at 2026-11-30T12:00:00Z (--now).
const cloud = `{"account": "demo-account", "resources": [
 {"kind": "vpc", "id": "vpc-old", "region": "eu-north-1", "created_at": "2026-11-29T12:00:00Z",
  "tags": {"krops.io/cluster": "demo-management", "krops.io/run-id": "demo-2026-11-29T11:00:00Z", "krops.io/expires-at": "2026-11-30T11:00:00Z"}},
 {"kind": "vpc", "id": "vpc-new", "region": "eu-west-1", "created_at": "2026-11-30T10:00:00Z",
  "tags": {"krops.io/cluster": "demo-workload", "krops.io/run-id": "demo-2026-11-30T09:00:00Z", "krops.io/expires-at": "never"}},
 {"kind": "subnet", "id": "subnet-unknown-age", "region": "eu-north-1", "tags": {"krops.io/cluster": "demo-management"}},
 {"kind": "bucket", "id": "bucket-down", "region": "eu-north-1", "tags": {"krops.io/cluster": "demo-workload"}},
 {"kind": "vpc", "id": "decoy-other-cluster", "region": "eu-north-1", "created_at": "2026-01-01T00:00:00Z", "tags": {"krops.io/cluster": "someone-else"}},
 {"kind": "vpc", "id": "decoy-untagged", "region": "eu-north-1", "created_at": "2026-01-01T00:00:00Z"}
]}`

type fixture struct {
	dir, bin, pluginDir, state string
}

func setup(t *testing.T, cloudJSON string) fixture {
	t.Helper()
	testenv.Integration(t)
	dir := t.TempDir()
	f := fixture{dir: dir, pluginDir: filepath.Join(dir, "plugins"), state: filepath.Join(dir, "cloud.json")}
	if err := os.MkdirAll(f.pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ pkg, name string }{
		{"github.com/kropsdev/krops/plugins/sdk/examples/krops-provider-jsoncloud", "jsoncloud"},
		{"github.com/kropsdev/krops/plugins/docker", "docker"},
	} {
		sdktest.Install(t, f.pluginDir, p.pkg, p.name)
	}
	f.bin = testenv.BuildBinary(t, ".", "krops-orphans")
	for name, body := range map[string]string{"bootstrap.toml": bootstrapTOML, "cloud.json": cloudJSON} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f fixture) run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	r := testenv.RunBinary(t, f.dir, append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.dir, "KROPS_PLUGIN_DIR=" + f.pluginDir, "JSONCLOUD_STATE=" + f.state}, env...), f.bin, args...)
	return r.Stdout, r.Stderr, r.Code
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestMarkdownReportGolden(t *testing.T) {
	f := setup(t, cloud)
	summary := filepath.Join(f.dir, "summary.md")
	if err := os.WriteFile(summary, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(f.dir, "report.json")
	out, errOut, code := f.run(t, []string{"GITHUB_STEP_SUMMARY=" + summary, "ORPHAN_REPORT_JSON=report.json"}, "--now", "2026-11-30T12:00:00Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "report.md", out)
	s, _ := os.ReadFile(summary)
	if string(s) != "earlier step\n"+out {
		t.Errorf("the step summary must get the same report appended:\n%s", s)
	}
	j, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatalf("ORPHAN_REPORT_JSON relative to the working directory: %v", err)
	}
	golden(t, "report.json", string(j))
}

func TestJSONOutputAndMinimumAge(t *testing.T) {
	f := setup(t, cloud)
	out, errOut, code := f.run(t, []string{"ORPHAN_MIN_AGE_HOURS=48"}, "--now", "2026-11-30T12:00:00Z", "--output", "json", "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Schema      string
		OrphanCount int `json:"orphan_count"`
		RecentCount int `json:"recent_count"`
		Findings    []struct {
			ID       string
			IsOrphan bool     `json:"is_orphan"`
			AgeHours *float64 `json:"age_hours"`
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	// 24 h old is recent at 48 h; unknown age stays an orphan.
	if r.Schema != "krops.io/orphan-report/v1" || r.OrphanCount != 2 || r.RecentCount != 2 {
		t.Errorf("report %+v", r)
	}
	for _, f := range r.Findings {
		if f.ID == "subnet-unknown-age" && (f.AgeHours != nil || !f.IsOrphan) {
			t.Errorf("unknown age: %+v", f)
		}
	}
}

func TestSinceRunAndExpiry(t *testing.T) {
	f := setup(t, cloud)
	out, _, code := f.run(t, nil, "--now", "2026-11-30T12:00:00Z", "--since-run", "demo-2026-11-29T11:00:00Z")
	if code != 0 {
		t.Fatal(code)
	}
	if !strings.Contains(out, "| vpc | eu-north-1 | vpc-old | demo-management | 24.0 | orphan, expired |") || strings.Contains(out, "vpc-new") {
		t.Errorf("report for one run:\n%s", out)
	}
}

func TestFailedQueryIsReportedWithExitCode3(t *testing.T) {
	f := setup(t, strings.Replace(cloud, `"resources"`, `"failing_kinds": ["bucket"], "resources"`, 1))
	out, errOut, code := f.run(t, nil, "--now", "2026-11-30T12:00:00Z")
	if code != 3 || !strings.Contains(errOut, "report is incomplete") {
		t.Errorf("exit %d (%s), want 3 when a query failed: what it covers is unknown", code, errOut)
	}
	if !strings.Contains(out, "- bucket in all regions: listing bucket failed") || !strings.Contains(out, "vpc-old") || strings.Contains(out, "bucket-down") {
		t.Errorf("the report must list the error and everything else:\n%s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	f := setup(t, cloud)
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"local-host"}, "provider docker, which cannot discover"},
		{nil, []string{"nope"}, `unknown environment "nope"`},
		{[]string{"ORPHAN_MIN_AGE_HOURS=six"}, nil, "ORPHAN_MIN_AGE_HOURS"},
		{nil, []string{"--output", "yaml"}, "--output"},
		{nil, []string{"--now", "yesterday"}, "--now"},
		{nil, []string{"demo", "extra"}, "at most one environment"},
		// Checked before the scan, not after it.
		{[]string{"ORPHAN_REPORT_JSON=" + t.TempDir()}, nil, "is not a regular file"},
		{[]string{"ORPHAN_REPORT_JSON=" + filepath.Join(t.TempDir(), "no", "report.json")}, nil, "does not exist"},
	}
	for _, tc := range cases {
		_, errOut, code := f.run(t, tc.env, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 and %q", tc.env, tc.args, code, errOut, tc.want)
		}
	}
}

// TestMain fails the package if a process a test started (a plugin, an API
// server, a controller) outlives the tests.
func TestMain(m *testing.M) { sdktest.Main(m) }
