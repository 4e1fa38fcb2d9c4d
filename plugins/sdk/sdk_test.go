package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sdkconformance"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

func testPlugin(t *testing.T) string {
	return sdktest.Build(t, "./internal/testplugin", "testplugin")
}

func jsonCloud(t *testing.T) string {
	return sdktest.Build(t, "./examples/krops-provider-jsoncloud", "jsoncloud")
}

func load(t *testing.T, name, path string, o sdk.LoadOptions) (*sdk.Client, error) {
	t.Helper()
	o.Path = path
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	c, err := sdk.Load(context.Background(), name, o)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func withMode(mode string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "TESTPLUGIN_MODE=" + mode}
}

func TestVersionNegotiation(t *testing.T) {
	bin := testPlugin(t)
	c, err := load(t, "testplugin", bin, sdk.LoadOptions{BaseEnv: withMode("v1v2"), Versions: []int{1}})
	if err != nil {
		t.Fatalf("a v1 host must talk to a plugin offering v1 and v2: %v", err)
	}
	if v := c.Description().ProtocolVersion; v != 1 {
		t.Errorf("negotiated %d, want 1", v)
	}
	_, err = load(t, "testplugin", bin, sdk.LoadOptions{BaseEnv: withMode("v2only"), Versions: []int{1}})
	if err == nil || !strings.Contains(err.Error(), "testplugin") || !strings.Contains(err.Error(), "protocol") {
		t.Errorf("a v1 host against a v2-only plugin needs a clear error naming the plugin and protocol, got %v", err)
	}
}

func TestChecksumPin(t *testing.T) {
	bin := testPlugin(t)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	good := hex.EncodeToString(sum[:])
	if _, err := load(t, "testplugin", bin, sdk.LoadOptions{SHA256: good}); err != nil {
		t.Fatalf("the right pin must load: %v", err)
	}
	bad := strings.Repeat("0", 64)
	_, err = load(t, "testplugin", bin, sdk.LoadOptions{SHA256: bad})
	if err == nil || !strings.Contains(err.Error(), good) || !strings.Contains(err.Error(), bad) {
		t.Errorf("a mismatched pin must be refused with both hashes, got %v", err)
	}
}

func TestStdoutBeforeHandshakeIsAClearError(t *testing.T) {
	_, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{BaseEnv: withMode("stdout")})
	if err == nil || !strings.Contains(err.Error(), "testplugin") || !strings.Contains(err.Error(), "stdout") {
		t.Errorf("stdout pollution: %v", err)
	}
}

func TestPluginGetsOnlyDeclaredEnvironment(t *testing.T) {
	t.Setenv("KROPS_TEST_HOST_SECRET", "must-not-leak")
	c, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		switch k {
		case "TESTPLUGIN_DECLARED":
			return "declared-value", true
		case "KROPS_TEST_HOST_SECRET":
			return os.Getenv(k), true
		}
		return "", false
	}
	if err := c.Configure(context.Background(), sdk.Config{Environment: "e", Raw: []byte(`{}`)}, lookup); err != nil {
		t.Fatal(err)
	}
	checks, err := c.Preflight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, ch := range checks {
		seen[ch.Name] = ch.Message
	}
	if seen["TESTPLUGIN_DECLARED"] != "declared-value" {
		t.Errorf("the declared variable did not arrive: %v", seen)
	}
	if _, ok := seen["KROPS_TEST_HOST_SECRET"]; ok {
		t.Error("an undeclared host variable reached the plugin")
	}
}

func TestPluginLogsKeepTheirLevels(t *testing.T) {
	var logs sdktest.Buffer
	c, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{Stderr: &logs})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Configure(context.Background(), sdk.Config{Raw: []byte(`{}`)}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(logs.String(), "configured") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, "[WARN]  provider.testplugin") || !strings.Contains(out, "configured") {
		t.Errorf("plugin warning not relogged at WARN under the plugin's name: %q", out)
	}
	if strings.Contains(out, "configured in detail") {
		t.Errorf("a debug line passed an info-level host logger: %q", out)
	}
}

func TestUndeclaredCapabilityNamesPluginAndCapability(t *testing.T) {
	c, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TeardownPolicy(context.Background())
	var ce *sdk.CapabilityError
	if !errors.As(err, &ce) || ce.Plugin != "testplugin" || ce.Capability != sdk.CapTeardownPolicy {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "testplugin") || !strings.Contains(err.Error(), "teardown-policy") {
		t.Errorf("message %q", err)
	}
}

func TestStreamingCancellation(t *testing.T) {
	c, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	start := time.Now()
	err = c.Discover(ctx, func(e sdk.DiscoverEvent) error {
		n++
		if n == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n < 5 || time.Since(start) > 3*time.Second {
		t.Errorf("%d events in %v", n, time.Since(start))
	}
	// The plugin keeps serving after a cancelled stream.
	if _, err := c.Preflight(context.Background()); err != nil {
		t.Errorf("after cancellation: %v", err)
	}
}

func TestDiscoveryOrderAndRefusals(t *testing.T) {
	root := t.TempDir()
	place := func(dir string) string { return sdktest.Install(t, dir, "./internal/testplugin", "testplugin") }
	pluginDir := filepath.Join(root, "plugins")
	repoBin := filepath.Join(root, "repo", "bin")
	exeDir := filepath.Join(root, "exe")
	dataHome := filepath.Join(root, "data")
	pathDir := filepath.Join(root, "path")
	o := sdk.LoadOptions{PluginDir: pluginDir, RepoRoot: filepath.Join(root, "repo"), ExecutableDir: exeDir, DataHome: dataHome, SearchPath: pathDir}
	for _, step := range []struct{ dir, want string }{
		{pathDir, filepath.Join(pathDir, "krops-provider-testplugin")},
		{filepath.Join(dataHome, "krops", "plugins"), filepath.Join(dataHome, "krops", "plugins", "krops-provider-testplugin")},
		{exeDir, filepath.Join(exeDir, "krops-provider-testplugin")},
		{repoBin, filepath.Join(repoBin, "krops-provider-testplugin")},
		{pluginDir, filepath.Join(pluginDir, "krops-provider-testplugin")},
	} {
		place(step.dir)
		got, err := sdk.Find("testplugin", o)
		if err != nil || got != step.want {
			t.Errorf("after placing in %s: Find = %q, %v; want %q", step.dir, got, err, step.want)
		}
	}
	// World-writable plugin files are refused.
	if err := os.Chmod(filepath.Join(pluginDir, "krops-provider-testplugin"), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Find("testplugin", o); err == nil || !strings.Contains(err.Error(), "world-writable") {
		t.Errorf("world-writable: %v", err)
	}
	// A symlinked plugin directory is refused.
	link := filepath.Join(root, "linked")
	if err := os.Symlink(repoBin, link); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Find("testplugin", sdk.LoadOptions{PluginDir: link, SearchPath: "/nonexistent"}); err == nil || !strings.Contains(err.Error(), "symlink") || !errors.Is(err, sdk.ErrPluginRefused) {
		t.Errorf("symlinked dir: %v", err)
	}
	// A trailing slash does not get past the refusal.
	if _, err := sdk.Find("testplugin", sdk.LoadOptions{PluginDir: link + "/", SearchPath: "/nonexistent"}); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlinked dir with a trailing slash: %v", err)
	}
	// So is a directory below a symlinked parent, however deep.
	realParent := filepath.Join(root, "real")
	sdktest.Install(t, filepath.Join(realParent, "deep", "plugins"), "./internal/testplugin", "testplugin")
	if err := os.Symlink(realParent, filepath.Join(root, "parentlink")); err != nil {
		t.Fatal(err)
	}
	viaLink := filepath.Join(root, "parentlink", "deep", "plugins")
	if _, err := sdk.Find("testplugin", sdk.LoadOptions{PluginDir: viaLink, SearchPath: "/nonexistent"}); err == nil || !strings.Contains(err.Error(), "symlinked parent "+filepath.Join(root, "parentlink")) || !errors.Is(err, sdk.ErrPluginRefused) {
		t.Errorf("symlinked parent: %v", err)
	}
	// The real path of the same directory is fine.
	if _, err := sdk.Find("testplugin", sdk.LoadOptions{PluginDir: filepath.Join(realParent, "deep", "plugins"), SearchPath: "/nonexistent"}); err != nil {
		t.Errorf("the real path: %v", err)
	}
	// A world-writable plugin directory, or a world-writable parent without
	// the sticky bit, lets anyone place or swap plugins.
	plugins := filepath.Join(realParent, "deep", "plugins")
	for _, tc := range []struct {
		dir  string
		mode os.FileMode
		want string
	}{
		{plugins, 0o777, "is world-writable"},
		{filepath.Join(realParent, "deep"), 0o777, "world-writable without the sticky bit"},
	} {
		if err := os.Chmod(tc.dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := sdk.Find("testplugin", sdk.LoadOptions{PluginDir: plugins, SearchPath: "/nonexistent"}); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sdk.ErrPluginRefused) {
			t.Errorf("%s mode %v: %v", tc.dir, tc.mode, err)
		}
		if err := os.Chmod(tc.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// With the sticky bit (like /tmp), a world-writable parent is fine.
	if err := os.Chmod(filepath.Join(realParent, "deep"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Find("testplugin", sdk.LoadOptions{PluginDir: plugins, SearchPath: "/nonexistent"}); err != nil {
		t.Errorf("sticky world-writable parent: %v", err)
	}
	if _, err := sdk.Find("nosuch", o); err == nil || !strings.Contains(err.Error(), "krops-provider-nosuch") || !strings.Contains(err.Error(), "KROPS_PLUGIN_DIR") || !errors.Is(err, sdk.ErrPluginRefused) {
		t.Errorf("missing plugin: %v", err)
	}
	// A pinned path that does not exist names the key that pins it.
	if _, err := sdk.Find("testplugin", sdk.LoadOptions{Path: "bin/gone", RepoRoot: root}); err == nil || !strings.Contains(err.Error(), `[providers.testplugin] path = "bin/gone"`) || !errors.Is(err, sdk.ErrPluginRefused) {
		t.Errorf("missing pinned path: %v", err)
	}
}

// The example provider end to end: discovery scope, dry-run, dependency
// order, idempotent rerun.
func TestJSONCloudExample(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "cloud.json")
	writeState(t, statePath, `{"resources": [
		{"kind": "vpc", "id": "vpc-1", "region": "r1", "tags": {"krops.io/cluster": "mgmt"}, "depends_on": ["subnet-1", "nat-1"]},
		{"kind": "subnet", "id": "subnet-1", "region": "r1", "tags": {"krops.io/cluster": "mgmt"}, "depends_on": ["nat-1"]},
		{"kind": "nat", "id": "nat-1", "region": "r1", "tags": {"krops.io/cluster": "mgmt"}},
		{"kind": "bucket", "id": "b-work", "region": "r2", "tags": {"krops.io/cluster": "work"}},
		{"kind": "vpc", "id": "decoy", "region": "r1", "tags": {"krops.io/cluster": "someone-else"}},
		{"kind": "vpc", "id": "untagged", "region": "r1"}
	]}`)
	c, err := load(t, "jsoncloud", jsonCloud(t), sdk.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := sdk.Config{Environment: "demo", Raw: []byte(`{"environment": {"mgmt-cluster": "mgmt", "teardown": {"capi-workloads": ["work"]}}, "provider": {}}`)}
	if err := c.Configure(ctx, cfg, func(k string) (string, bool) { return statePath, k == "JSONCLOUD_STATE" }); err != nil {
		t.Fatal(err)
	}
	var found []sdk.Resource
	if err := c.Discover(ctx, func(e sdk.DiscoverEvent) error {
		if e.Resource != nil {
			found = append(found, *e.Resource)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(found); ids != "vpc-1,subnet-1,nat-1,b-work" {
		t.Fatalf("discovered %s", ids)
	}
	before, _ := os.ReadFile(statePath)
	var planned []string
	if err := c.Sweep(ctx, sdk.SweepRequest{DryRun: true, Scope: found}, func(e sdk.SweepEvent) error {
		planned = append(planned, string(e.State)+":"+e.Resource.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(statePath); !bytes.Equal(before, after) {
		t.Error("a dry run changed the cloud")
	}
	if len(planned) != 4 || !strings.HasPrefix(planned[0], "planned:") {
		t.Errorf("dry run events %v", planned)
	}
	var deleted []string
	if err := c.Sweep(ctx, sdk.SweepRequest{Scope: found}, func(e sdk.SweepEvent) error {
		if e.State == sdk.SweepDeleted {
			deleted = append(deleted, e.Resource.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// b-work depends on nothing and may go at any point; the chain must
	// go in dependency order.
	chain := slices.DeleteFunc(slices.Clone(deleted), func(id string) bool { return id == "b-work" })
	if got := strings.Join(chain, ","); got != "nat-1,subnet-1,vpc-1" || len(deleted) != 4 {
		t.Errorf("deletion order %s: dependencies must go first", strings.Join(deleted, ","))
	}
	var st struct{ Resources []struct{ ID string } }
	b, _ := os.ReadFile(statePath)
	_ = json.Unmarshal(b, &st)
	if len(st.Resources) != 2 || st.Resources[0].ID != "decoy" || st.Resources[1].ID != "untagged" {
		t.Errorf("left in the cloud: %+v (only the decoys may remain)", st.Resources)
	}
	var second []string
	if err := c.Sweep(ctx, sdk.SweepRequest{Scope: found}, func(e sdk.SweepEvent) error {
		second = append(second, string(e.State))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(second, ",") != "skipped,skipped,skipped,skipped" {
		t.Errorf("second sweep %v, want everything skipped as already gone", second)
	}
}

// A host whose context ends mid-sweep stops the plugin rather than cutting
// the stream: every deletion the plugin announced reaches the host, those
// still on the wire when the context ended too, and so do the events the
// plugin sends as it stops. The plugin serves the next call.
func TestInterruptedSweepLosesNoEvent(t *testing.T) {
	c, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var scope []sdk.Resource
	for i := range 50 {
		scope = append(scope, sdk.Resource{Kind: "thing", ID: fmt.Sprintf("thing-%d", i)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	count := map[sdk.SweepState]int{}
	err = c.Sweep(ctx, sdk.SweepRequest{Scope: scope}, func(e sdk.SweepEvent) error {
		count[e.State]++
		if count[sdk.SweepDeleting] == 1 {
			cancel() // the other 49 announcements are in flight or about to be
		}
		return nil
	})
	if err == nil {
		t.Fatal("an interrupted sweep returned no error")
	}
	if count[sdk.SweepDeleting] != 50 || count[sdk.SweepFailed] != 50 {
		t.Errorf("saw %d deletions announced and %d reported unconfirmed, want 50 and 50 (events were lost to the interrupt)", count[sdk.SweepDeleting], count[sdk.SweepFailed])
	}
	if _, err := c.Preflight(context.Background()); err != nil {
		t.Errorf("the plugin did not survive the interrupt: %v", err)
	}
}

func TestConformanceOfTheExampleAndTheTestPlugin(t *testing.T) {
	statePath := filepath.Join(t.TempDir(), "cloud.json")
	writeState(t, statePath, `{"resources": [{"kind": "vpc", "id": "v", "tags": {"krops.io/cluster": "m"}}]}`)
	t.Run("jsoncloud", func(t *testing.T) {
		sdkconformance.Run(t, jsonCloud(t), sdkconformance.Options{
			Config: sdk.Config{Raw: []byte(`{"environment": {"mgmt-cluster": "m"}, "provider": {}}`)},
			Env:    map[string]string{"JSONCLOUD_STATE": statePath},
		})
	})
	t.Run("testplugin", func(t *testing.T) {
		sdkconformance.Run(t, testPlugin(t), sdkconformance.Options{})
	})
}

func writeState(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func idsOf(rs []sdk.Resource) string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return strings.Join(ids, ",")
}

// A developer starts a plugin under a debugger with KROPS_PROVIDER_DEBUG=1
// and points the host at it with KROPS_REATTACH_PROVIDERS.
func TestReattachToADebuggedPlugin(t *testing.T) {
	cmd := exec.Command(jsonCloud(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), sdk.DebugEnv + "=1"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var reattach string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sdk.ReattachEnv+"="); ok {
			reattach = v
			break
		}
	}
	if reattach == "" {
		t.Fatal("the debug-mode plugin printed no reattach line")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	c, err := sdk.Load(context.Background(), "jsoncloud", sdk.LoadOptions{Reattach: reattach, Stderr: io.Discard, SearchPath: "/nonexistent"})
	if err != nil {
		t.Fatalf("reattach with %s: %v", reattach, err)
	}
	if d := c.Description(); d.Name != "jsoncloud" || c.PID() != cmd.Process.Pid {
		t.Errorf("attached to %+v pid %d, want the debugged process %d", d, c.PID(), cmd.Process.Pid)
	}
	if _, err := sdk.Load(context.Background(), "jsoncloud", sdk.LoadOptions{Reattach: "{not json", SearchPath: "/nonexistent"}); err == nil || !strings.Contains(err.Error(), sdk.ReattachEnv) {
		t.Errorf("bad reattach JSON: %v", err)
	}
}
