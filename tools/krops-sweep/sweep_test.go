package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// The tests run the real krops-sweep binary with the real aws and docker
// plugin subprocesses, against moto through a fault proxy.

var localHost = "\n" + testenv.LocalHost().TOML()

type fixture struct {
	dir, bin string
	env      []string
	proxy    *testenv.FaultProxy
	fp       *awstest.Footprint
}

func setup(t *testing.T) fixture {
	t.Helper()
	testenv.Integration(t)
	f := fixture{dir: t.TempDir(), bin: builds.Binary(t, ".", "krops-sweep")}
	plugins := filepath.Join(f.dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"aws", "docker"} {
		sdktest.Install(t, plugins, "github.com/kropsdev/krops/plugins/"+name, name)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "bootstrap.toml"), []byte(awstest.BootstrapTOML+localHost), 0o644); err != nil {
		t.Fatal(err)
	}
	m := testenv.Moto(t, testenv.MotoOptions{KeepEnv: true})
	f.fp = awstest.Build(t, m.URL, awstest.Options{ObjectVersions: 3})
	f.proxy = testenv.NewFaultProxy(t, m.URL)
	f.env = append([]string{"PATH=" + sdktest.PathWithoutEngines(t, ""), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + f.dir, "KROPS_PLUGIN_DIR=" + plugins, "KROPS_AWS_POLL_INTERVAL=0"}, m.Environ(f.proxy.URL)...)
	return f
}

func (f fixture) run(t *testing.T, extraEnv []string, args ...string) testenv.Result {
	t.Helper()
	return testenv.RunBinary(t, f.dir, append(append([]string{}, f.env...), extraEnv...), f.bin, args...)
}

func TestDryRunThenSweepThenNoOp(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	f := setup(t)
	r := f.run(t, nil, "cloud", "aws", "--dry-run", "--config", "bootstrap.toml")
	if r.Code != 0 {
		t.Fatalf("dry run exit %d: %s\n%s", r.Code, r.Stderr, r.Stdout)
	}
	f.proxy.AssertNoMutation(t)
	if !strings.Contains(r.Stdout, "Plan (deletion order") || !strings.Contains(r.Stdout, "nothing was changed") ||
		!strings.Contains(r.Stdout, "✔ account 123456789012, regions eu-north-1, eu-west-1") {
		t.Errorf("dry run output:\n%s", r.Stdout)
	}
	// No allow-list in this configuration: said before anything is deleted.
	if !strings.Contains(r.Stdout, "environments.aws.allowed-accounts is not set: this sweep acts on account 123456789012") {
		t.Errorf("no warning about the missing allow-list:\n%s", r.Stdout)
	}
	allowed := strings.Replace(awstest.BootstrapTOML, "provider = \"aws\"\n", "provider = \"aws\"\nallowed-accounts = [\"123456789012\"]\n", 1)
	if err := os.WriteFile(filepath.Join(f.dir, "allowed.toml"), []byte(allowed), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.run(t, nil, "cloud", "aws", "--dry-run", "--config", "allowed.toml"); r.Code != 0 || strings.Contains(r.Stdout, "allowed-accounts is not set") {
		t.Errorf("with the account allowed: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A teardown checks credentials and the account, not bootstrap quotas.
	if strings.Contains(r.Stdout, "Elastic IPs") || strings.Contains(r.Stdout, "VPCs in") {
		t.Errorf("a sweep printed bootstrap quota checks:\n%s", r.Stdout)
	}
	for _, sus := range f.fp.Suspects {
		kind, id, _ := strings.Cut(sus, " ")
		if !strings.Contains(r.Stdout, "- not touched (suspect, not ours by evidence): "+kind+" "+id+" (global)") {
			t.Errorf("suspect %s not listed as untouched:\n%s", sus, r.Stdout)
		}
	}
	if got := strings.Count(r.Stdout, "\n  "); got < len(f.fp.Owned) {
		t.Errorf("plan lists %d steps, want %d:\n%s", got, len(f.fp.Owned), r.Stdout)
	}

	r = f.run(t, nil, "cloud", "aws")
	if r.Code != 0 {
		t.Fatalf("sweep exit %d: %s\n%s", r.Code, r.Stderr, r.Stdout)
	}
	want := "Summary: " + itoa(len(f.fp.Owned)) + " deleted, 0 skipped, 0 left"
	if !strings.Contains(r.Stdout, want) {
		t.Errorf("want %q in:\n%s", want, r.Stdout)
	}
	if !strings.Contains(r.Stdout, "emptied of") {
		t.Errorf("bucket progress missing:\n%s", r.Stdout)
	}
	// Nobody else touched the account: nothing was "already gone", and
	// the plugin's process lifecycle is not news without -v.
	if strings.Contains(r.Stdout, "already gone") {
		t.Errorf("resources this run deleted were reported already gone:\n%s", r.Stdout)
	}
	if strings.Contains(r.Stderr, "plugin process exited") || strings.Contains(r.Stderr, "starting plugin") {
		t.Errorf("plugin lifecycle logs without -v:\n%s", r.Stderr)
	}

	// AWS_ONLY=1 with the plain command is the same path; now a no-op.
	r = f.run(t, []string{"AWS_ONLY=1"}, "aws")
	if r.Code != 0 || !strings.Contains(r.Stdout, "nothing to sweep") {
		t.Errorf("second sweep: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestRefusalsAndExitCodes(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	f := setup(t)
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"provider without sweep", nil, []string{"cloud", "local-host"}, 2, "provider docker, which cannot sweep"},
		{"bad summary format", nil, []string{"aws", "--output", "yaml"}, 2, `--output "yaml": want text or json`},
		{"plugin not found", []string{"KROPS_PLUGIN_DIR=" + t.TempDir()}, []string{"cloud", "aws"}, 2, "provider plugin aws not found"},
		{"unknown environment", nil, []string{"cloud", "gcp"}, 2, `unknown environment "gcp"`},
		{"account outside allowed-accounts", []string{"BOOTSTRAP_CONFIG=refused.toml"}, []string{"cloud", "aws"}, 2,
			"AWS account 123456789012 is not in environments.aws.allowed-accounts [999999999999, 111111111111]: nothing was read or changed"},
		{"endpoint unreachable", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:1"}, []string{"cloud", "aws"}, 3, "nothing was deleted"},
		{"credentials refused", []string{"AWS_ENDPOINT_URL=" + f.proxy.URL + "/deny"}, []string{"cloud", "aws"}, 3, "could not read the AWS account"},
	}
	refused := strings.Replace(awstest.BootstrapTOML, "provider = \"aws\"\n", "provider = \"aws\"\nallowed-accounts = [\"999999999999\", \"111111111111\"]\n", 1)
	if err := os.WriteFile(filepath.Join(f.dir, "refused.toml"), []byte(refused), 0o644); err != nil {
		t.Fatal(err)
	}
	f.proxy.Add(testenv.Rule{Path: "^/deny", Status: 403, Code: "InvalidClientTokenId"})
	for _, tc := range cases {
		r := f.run(t, tc.env, tc.args...)
		if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.Code, r.Stderr, tc.code, tc.want)
		}
	}
	f.proxy.AssertNoMutation(t)
}

func TestFailedDiscoveryStopsBeforeDeleting(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	f := setup(t)
	f.proxy.Add(testenv.Rule{Action: "DescribeSubnets", Status: 403, Code: "UnauthorizedOperation"})
	r := f.run(t, nil, "cloud", "aws")
	if r.Code != 3 || !strings.Contains(r.Stderr, "nothing was deleted") || !strings.Contains(r.Stderr, "subnet in eu-north-1") {
		t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	f.proxy.AssertNoMutation(t)
}

func TestWhatCannotBeDeletedIsReportedWithExit1(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	f := setup(t)
	f.proxy.Add(testenv.Rule{Method: "DELETE", Path: "^/krops-123456789012-eu-west-1-workload-data$", Status: 403, Code: "AccessDenied"})
	r := f.run(t, nil, "cloud", "aws", "--max-idle-passes", "2")
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "left: s3-bucket krops-123456789012-eu-west-1-workload-data (eu-west-1): ") || !strings.Contains(r.Stdout, "1 left") {
		t.Errorf("summary must name what is left and why:\n%s", r.Stdout)
	}
}

// A sweep interrupted mid-deletion by SIGINT or SIGTERM reports what it
// deleted and what was in flight, claims nothing it did not see finish, and
// a rerun finishes the job.
func TestInterruptedSweepThenRerun(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			f := setup(t)
			// The first subnet deletion hangs until the sweep gives up on it.
			f.proxy.Add(testenv.Rule{Action: "DeleteSubnet", Times: 1, Hang: true})
			cmd := exec.Command(f.bin, "cloud", "aws")
			cmd.Dir, cmd.Env = f.dir, f.env
			var out, errOut sdktest.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			hung := ""
			for deadline := time.Now().Add(2 * time.Minute); hung == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				for _, r := range f.proxy.Requests() {
					if r.Injected == "hang" {
						hung = r.Params.Get("SubnetId")
					}
				}
			}
			if hung == "" {
				_ = cmd.Process.Kill()
				t.Fatalf("no subnet deletion was reached:\n%s", out.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if err == nil || code != 130 {
				t.Fatalf("exit %d after %v, want 130 (interrupted):\n%s\n%s", code, sig, out.String(), errOut.String())
			}
			stdout := out.String()
			if !strings.Contains(stdout, "Interrupted: ") || !strings.Contains(stdout, "in flight: subnet "+hung) {
				t.Errorf("the interrupted summary must name the subnet in flight:\n%s", stdout)
			}
			if strings.Contains(stdout, "✔ deleted subnet "+hung) || strings.Contains(stdout, "Summary: ") {
				t.Errorf("an unfinished deletion was reported done:\n%s", stdout)
			}
			if !strings.Contains(errOut.String(), "rerun `krops-sweep cloud aws`") {
				t.Errorf("stderr must say how to finish:\n%s", errOut.String())
			}
			r := f.run(t, nil, "cloud", "aws")
			if r.Code != 0 || !strings.Contains(r.Stdout, "0 left") {
				t.Fatalf("rerun: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
			if r = f.run(t, nil, "cloud", "aws"); r.Code != 0 || !strings.Contains(r.Stdout, "nothing to sweep") {
				t.Errorf("after the rerun: exit %d\n%s", r.Code, r.Stdout)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A management context whose cluster accepts connections and never
// answers (a VPN drop to EKS), and no kind: the management cluster's CAPA
// and Flux may still run, so the full teardown is unknown state (exit 3)
// and deletes nothing in the cloud; only `krops-sweep cloud` (AWS_ONLY=1)
// sweeps without a host.
func TestTeardownWithASilentManagementClusterDeletesNothing(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	f := setup(t)
	mgmt := filepath.Join(f.dir, "mgmt.yaml")
	if err := testenv.WriteKubeconfig(&rest.Config{Host: "https://" + testenv.SilentEndpoint(t)}, "krops-aws-mgmt", mgmt); err != nil {
		t.Fatal(err)
	}
	r := f.run(t, []string{"KUBECONFIG=" + filepath.Join(f.dir, "no-kind.yaml"), "MGMT_KUBECONFIG=" + mgmt}, "aws", "--query-timeout", "3s")
	if r.Code != 3 || !strings.Contains(r.Stderr, "reaching the management cluster behind context krops-aws-mgmt") || !strings.Contains(r.Stdout+r.Stderr, "krops-sweep cloud aws") {
		t.Fatalf("silent management cluster: exit %d, want 3\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	f.proxy.AssertNoMutation(t)
}

// An AWS endpoint that accepts connections and never answers (a proxy
// whose upstream is gone) is unknown state within a minute, naming the
// endpoint, instead of a hang until CLUSTER_DELETE_TIMEOUT.
func TestSilentAWSEndpointIsUnknownStateWithinAMinute(t *testing.T) {
	t.Parallel() // its own API servers, moto, engine and directories
	f := setup(t)
	endpoint := "http://" + testenv.SilentEndpoint(t)
	start := time.Now()
	r := f.run(t, []string{"AWS_ENDPOINT_URL=" + endpoint}, "cloud", "aws")
	took := time.Since(start)
	if r.Code != 3 || !strings.Contains(r.Stderr, "the AWS endpoint "+endpoint+" did not answer") || !strings.Contains(r.Stderr, "nothing was deleted") {
		t.Errorf("silent endpoint: exit %d, want 3 naming %s\n%s", r.Code, endpoint, r.Stderr)
	}
	if took > time.Minute {
		t.Errorf("silent endpoint: the verdict took %s, want under a minute", took.Round(time.Second))
	}
	f.proxy.AssertNoMutation(t)
}
