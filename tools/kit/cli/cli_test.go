package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/kropsdev/krops/tools/kit/config"
)

const cfg = `
[bootstrap]
default-environment = "one"
kind-cluster = "from-file"
[charts]
flux-operator = "0.61.0"
cert-manager = "1.21.2"
capi-operator = "0.29.0"
[environments.one]
provider = "docker"
sync = "oci"
sync-path = "mgmt/one"
mgmt-cluster = "m"
mgmt-ready-timeout = "15m"
infra-provider-namespace = "capd-system"
infra-provider-name = "docker"
provider-manifests = ["p.yaml"]
`

type seen struct {
	cluster string
	port    uint16
	token   string
}

func testApp(t *testing.T, out, errOut *bytes.Buffer, got *seen, action func(*ucli.Context) error) *ucli.App {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "bootstrap.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if action == nil {
		action = func(c *ucli.Context) error {
			lookup := Lookup(c)
			conf, err := config.Load(config.LoadOptions{Path: path, Lookup: lookup})
			if err != nil {
				return UsageError(err)
			}
			k, err := config.ParseKnobs(config.KnobOptions{Lookup: lookup, WorkDir: dir, Home: dir})
			if err != nil {
				return UsageError(err)
			}
			*got = seen{cluster: conf.Bootstrap.KindCluster, port: k.RegistryPort, token: k.GitHubToken.Reveal()}
			return nil
		}
	}
	return New(Options{
		Name: "krops-test", Usage: "exercise the shared conventions", Version: "1.2.3",
		Knobs:  []string{"KROPS_KIND_CLUSTER", "REGISTRY_PORT", "GITHUB_TOKEN"},
		Action: action, Stdout: out, Stderr: errOut,
	})
}

func TestPrecedenceFlagOverEnvironmentOverFileOverDefault(t *testing.T) {
	cases := []struct {
		name        string
		env         map[string]string
		args        []string
		wantCluster string
		wantPort    uint16
	}{
		{"file and default", nil, nil, "from-file", 5001},
		{"environment over file and default", map[string]string{"KROPS_KIND_CLUSTER": "from-env", "REGISTRY_PORT": "6000"}, nil, "from-env", 6000},
		{"flag over environment", map[string]string{"KROPS_KIND_CLUSTER": "from-env", "REGISTRY_PORT": "6000"}, []string{"--kind-cluster", "from-flag", "--registry-port=7000"}, "from-flag", 7000},
		{"empty environment is unset", map[string]string{"KROPS_KIND_CLUSTER": ""}, nil, "from-file", 5001},
		{"flags after the positional argument", nil, []string{"one", "--registry-port", "7001", "-v"}, "from-file", 7001},
		{"a flag value that looks like a command name", nil, []string{"--kind-cluster", "version", "one"}, "version", 5001},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			var got seen
			app := testApp(t, &out, &errOut, &got, nil)
			if code := Run(context.Background(), app, append([]string{"krops-test"}, tc.args...), RunOptions{}); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if got.cluster != tc.wantCluster || got.port != tc.wantPort {
				t.Errorf("got %+v, want cluster %s port %d", got, tc.wantCluster, tc.wantPort)
			}
		})
	}
}

func TestSecretsAreNotFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	app := testApp(t, &out, &errOut, &got, nil)
	if code := Run(context.Background(), app, []string{"krops-test", "--github-token", "x"}, RunOptions{}); code != ExitUsage {
		t.Errorf("a secret flag must be rejected as usage error, exit %d", code)
	}
	t.Setenv("GITHUB_TOKEN", "ghp_env")
	if code := Run(context.Background(), testApp(t, &out, &errOut, &got, nil), []string{"krops-test"}, RunOptions{}); code != 0 || got.token != "ghp_env" {
		t.Errorf("token from the environment: exit %d, %+v", code, got)
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  error
		want int
	}{
		{"ok", nil, nil, ExitOK},
		{"failure", nil, errors.New("boom"), ExitFailed},
		{"usage error", nil, Usagef("bad %s", "input"), ExitUsage},
		{"unknown state", nil, UnknownStateError(errors.New("list failed")), ExitUnknownState},
		{"wrapped unknown state", nil, errors.Join(errors.New("x"), UnknownStateError(errors.New("y"))), ExitUnknownState},
		{"unknown flag", []string{"--no-such-flag"}, nil, ExitUsage},
		{"bad log format", []string{"--log-format", "xml"}, nil, ExitUsage},
		{"invalid knob", []string{"--registry-port", "99999"}, nil, ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			var got seen
			var action func(*ucli.Context) error
			if tc.err != nil || tc.want == ExitOK {
				action = func(*ucli.Context) error { return tc.err }
			}
			app := testApp(t, &out, &errOut, &got, action)
			if code := Run(context.Background(), app, append([]string{"krops-test"}, tc.args...), RunOptions{}); code != tc.want {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.want, errOut.String())
			}
		})
	}
}

// A mistyped command is a usage error (exit 2) naming the commands there
// are, not urfave's "No help topic" with its exit 3, which here means
// unknown state.
func TestAnUnknownCommandIsAUsageError(t *testing.T) {
	var out, errOut bytes.Buffer
	app := New(Options{Name: "krops-test", Stdout: &out, Stderr: &errOut,
		Commands: []*ucli.Command{{Name: "up", Action: func(*ucli.Context) error { return nil }}}})
	if code := Run(context.Background(), app, []string{"krops-test", "frobnicate"}, RunOptions{}); code != ExitUsage ||
		!strings.Contains(errOut.String(), `no command "frobnicate"; its commands are up, version`) {
		t.Errorf("unknown command: exit %d, want %d\n%s", code, ExitUsage, errOut.String())
	}
	out.Reset()
	if code := Run(context.Background(), app, []string{"krops-test"}, RunOptions{}); code != ExitOK || !strings.Contains(out.String(), "COMMANDS") {
		t.Errorf("no command: exit %d, want the help and 0\n%s", code, out.String())
	}
}

func TestHelpDocumentsExitCodesAndKnobs(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	app := testApp(t, &out, &errOut, &got, nil)
	if code := Run(context.Background(), app, []string{"krops-test", "--help"}, RunOptions{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := out.String()
	for _, w := range []string{"EXIT CODES", "3  stopped on unknown state", "--registry-port", "$REGISTRY_PORT", "--log-format", "--verbose"} {
		if !strings.Contains(help, w) {
			t.Errorf("help lacks %q:\n%s", w, help)
		}
	}
	if strings.Contains(help, "github-token") {
		t.Error("help must not offer a secret flag")
	}
	out.Reset()
	if code := Run(context.Background(), testApp(t, &out, &errOut, &got, nil), []string{"krops-test", "version"}, RunOptions{}); code != 0 || out.String() != "krops-test 1.2.3\n" {
		t.Errorf("version: exit %d, %q", code, out.String())
	}
}

func TestJSONLogs(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	app := testApp(t, &out, &errOut, &got, func(c *ucli.Context) error {
		Logger(c).Debug("detail", "step", "x")
		Logger(c).Info("hello", "step", "y")
		return nil
	})
	if code := Run(context.Background(), app, []string{"krops-test", "--log-format", "json"}, RunOptions{}); code != 0 {
		t.Fatal(code)
	}
	if !strings.Contains(errOut.String(), `"msg":"hello","step":"y"`) || strings.Contains(errOut.String(), "detail") {
		t.Errorf("json logs at info level: %q", errOut.String())
	}
	// Run's own notices are records too: a log shipper parses every line.
	errOut.Reset()
	app = testApp(t, &out, &errOut, &got, func(c *ucli.Context) error { return UnknownStateError(errors.New("the API server did not answer")) })
	if code := Run(context.Background(), app, []string{"krops-test", "--log-format", "json"}, RunOptions{}); code != ExitUnknownState {
		t.Fatalf("exit %d", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON record: %q", line)
		}
	}
	if !strings.Contains(errOut.String(), `"level":"ERROR","msg":"krops-test failed","error":"the API server did not answer"`) || !strings.Contains(errOut.String(), `"exit_code":3`) {
		t.Errorf("the final error as a record: %q", errOut.String())
	}
	errOut.Reset()
	app = testApp(t, &out, &errOut, &got, func(c *ucli.Context) error { Logger(c).Debug("detail"); return nil })
	Run(context.Background(), app, []string{"krops-test", "-v"}, RunOptions{})
	if !strings.Contains(errOut.String(), "msg=detail") {
		t.Errorf("-v shows debug logs: %q", errOut.String())
	}
}

func TestSignalCancelsTheContext(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	started := make(chan struct{})
	app := testApp(t, &out, &errOut, &got, func(c *ucli.Context) error {
		close(started)
		select {
		case <-c.Context.Done():
			return c.Context.Err()
		case <-time.After(10 * time.Second):
			return errors.New("not cancelled")
		}
	})
	done := make(chan int)
	go func() {
		done <- Run(context.Background(), app, []string{"krops-test"}, RunOptions{Signals: []os.Signal{syscall.SIGUSR1}})
	}()
	<-started
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != ExitInterrupted || !strings.Contains(errOut.String(), "interrupted") {
			t.Errorf("exit %d, stderr %q", code, errOut.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the signal did not cancel the run")
	}
}

// An interrupted run never exits 0 or 1: a step that swallowed the
// cancellation (returning what it could read) did not finish, and a failure
// caused by the signal is not one to retry blindly. A refusal or unknown
// state keeps its own code.
func TestAnInterruptedRunExits130UnlessItRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result error
		want   int
		says   string
	}{
		{"swallowed the cancellation", nil, ExitInterrupted, "interrupted before it finished"},
		{"failed on the cancellation", errors.New("waiting: context canceled"), ExitInterrupted, "error: waiting"},
		{"refused", Usagef("bootstrap.toml: no environment %q", "nope"), ExitUsage, "no environment"},
		{"unknown state", UnknownStateError(errors.New("the API server did not answer")), ExitUnknownState, "did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			var got seen
			started := make(chan struct{})
			app := testApp(t, &out, &errOut, &got, func(c *ucli.Context) error {
				close(started)
				<-c.Context.Done()
				return tc.result
			})
			done := make(chan int)
			go func() {
				done <- Run(context.Background(), app, []string{"krops-test"}, RunOptions{Signals: []os.Signal{syscall.SIGWINCH}})
			}()
			<-started
			if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-done:
				if code != tc.want || !strings.Contains(errOut.String(), tc.says) {
					t.Errorf("exit %d, want %d; stderr %q", code, tc.want, errOut.String())
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the signal did not cancel the run")
			}
		})
	}
}

// The second signal forces the exit even while the run ignores its
// cancelled context (a blocked read, a plugin that does not answer), after
// the cleanup that must not be skipped.
func TestASecondSignalForcesTheExit(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	started := make(chan struct{})
	release := make(chan struct{})
	app := testApp(t, &out, &errOut, &got, func(c *ucli.Context) error {
		close(started)
		<-release // deaf to cancellation
		return nil
	})
	defer close(release)
	exited := make(chan int, 1)
	cleaned := make(chan struct{})
	go Run(context.Background(), app, []string{"krops-test"}, RunOptions{
		Signals:          []os.Signal{syscall.SIGUSR2},
		BeforeForcedExit: func() { close(cleaned) },
		Exit:             func(code int) { exited <- code },
	})
	<-started
	for range 2 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	awaitForcedExit(t, exited, cleaned, "the second signal")
}

// awaitForcedExit checks that a second signal forced exit 130 through
// Exit, after BeforeForcedExit closed forced.
func awaitForcedExit(t *testing.T, exited <-chan int, forced <-chan struct{}, what string) {
	t.Helper()
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("forced exit code %d, want 130", code)
		}
		select {
		case <-forced:
		default:
			t.Error("the forced exit skipped BeforeForcedExit")
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not force the exit", what)
	}
}

func TestSelectEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bootstrap.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BOOTSTRAP_CONFIG", path)
	cases := []struct {
		args []string
		env  map[string]string
		want string
		code int
	}{
		{nil, nil, "one", ExitOK},
		{[]string{"one"}, nil, "one", ExitOK},
		{[]string{"two"}, nil, `unknown environment "two"`, ExitUsage},
		{[]string{"one", "extra"}, nil, "at most one environment argument", ExitUsage},
		{nil, map[string]string{"REGISTRY_PORT": "x"}, "REGISTRY_PORT", ExitUsage},
	}
	for _, tc := range cases {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errOut bytes.Buffer
		var got string
		app := New(Options{Name: "krops-test", Knobs: []string{"BOOTSTRAP_CONFIG", "REGISTRY_PORT"}, Stdout: &out, Stderr: &errOut,
			Action: func(c *ucli.Context) error {
				sel, err := SelectEnvironment(c)
				if err != nil {
					return err
				}
				got = sel.Environment.Name
				return nil
			}})
		code := Run(context.Background(), app, append([]string{"krops-test"}, tc.args...), RunOptions{})
		if code != tc.code || (code == ExitOK && got != tc.want) || (code != ExitOK && !strings.Contains(errOut.String(), tc.want)) {
			t.Errorf("%v %v: exit %d, env %q, stderr %q; want %d and %q", tc.args, tc.env, code, got, errOut.String(), tc.code, tc.want)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}

func TestKnobFlagsMayFollowASubcommand(t *testing.T) {
	var out, errOut bytes.Buffer
	var port string
	app := New(Options{Name: "krops-test", Knobs: []string{"REGISTRY_PORT"}, Stdout: &out, Stderr: &errOut,
		Commands: []*ucli.Command{{Name: "sub", Action: func(c *ucli.Context) error {
			port, _ = Lookup(c).Get("REGISTRY_PORT")
			return nil
		}}}})
	if code := Run(context.Background(), app, []string{"krops-test", "sub", "arg", "--registry-port", "7002"}, RunOptions{}); code != 0 || port != "7002" {
		t.Errorf("exit %d, port %q: %s", code, port, errOut.String())
	}
}

// client-go's own reports (klog) go through the tool's logger as detail:
// absent from a normal run's stderr, present with -v. Not parallel: klog
// is process-wide.
func TestClientGoReportsAreDetail(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	watchFailed := func(*ucli.Context) error {
		klog.ErrorS(errors.New("the server could not find the requested resource"), "Failed to watch")
		klog.Flush()
		return nil
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{{[]string{"krops-test"}, false}, {[]string{"krops-test", "-v"}, true}} {
		errOut.Reset()
		if code := Run(context.Background(), testApp(t, &out, &errOut, &got, watchFailed), tc.args, RunOptions{}); code != 0 {
			t.Fatalf("%v: exit %d", tc.args, code)
		}
		if shown := strings.Contains(errOut.String(), "Failed to watch"); shown != tc.want || strings.Contains(errOut.String(), "E12") {
			t.Errorf("%v: stderr %q", tc.args, errOut.String())
		}
	}
	if !strings.Contains(errOut.String(), "level=DEBUG") {
		t.Errorf("-v: client-go's report is not a debug record: %q", errOut.String())
	}
}

func TestPreflightReportsEveryProblemWithTheWorstExitCode(t *testing.T) {
	var p Preflight
	if p.Err("preflight") != nil || p.Failed() {
		t.Fatal("an empty preflight failed")
	}
	p.Add(nil)
	p.Add(errors.New("the registry does not answer"))
	if ExitCode(p.Err("preflight")) != ExitFailed {
		t.Errorf("a failed check alone: exit %d, want 1", ExitCode(p.Err("preflight")))
	}
	p = Preflight{}
	p.Addf("MGMT_KUBECONFIG %s is a directory", "/x")
	p.Add(errors.New("the registry does not answer"))
	err := p.Err("preflight failed, nothing was changed")
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "preflight failed, nothing was changed:\n  MGMT_KUBECONFIG /x is a directory\n  the registry does not answer") {
		t.Fatalf("exit %d: %v", ExitCode(err), err)
	}
	p.Add(UnknownStateError(errors.New("the account could not be read")))
	p.Addf("later refusal")
	if err := p.Err("preflight"); ExitCode(err) != ExitUnknownState || strings.Count(err.Error(), "\n  ") != 4 {
		t.Fatalf("an unknown state among refusals: exit %d: %v", ExitCode(err), err)
	}
}

// A second signal while the cleanup runs (plugins closing gracefully take
// up to seconds) forces the exit like one during the run: the process must
// not die by the signal's default action with its plugins left running.
// The cleanup runs on every way out, a panic included.
func TestTheCleanupRunsUnderTheSignalWatch(t *testing.T) {
	var out, errOut bytes.Buffer
	var got seen
	started := make(chan struct{})
	app := testApp(t, &out, &errOut, &got, func(c *ucli.Context) error {
		close(started)
		<-c.Context.Done()
		return c.Context.Err()
	})
	cleaning := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	exited := make(chan int, 1)
	forced := make(chan struct{})
	go Run(context.Background(), app, []string{"krops-test"}, RunOptions{
		Signals:          []os.Signal{syscall.SIGUSR2},
		Cleanup:          func() { close(cleaning); <-release },
		BeforeForcedExit: func() { close(forced) },
		Exit:             func(code int) { exited <- code },
	})
	<-started
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cleaning:
	case <-time.After(5 * time.Second):
		t.Fatal("the cleanup did not start after the run returned")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	awaitForcedExit(t, exited, forced, "a second signal during the cleanup")

	// A plain run cleans up once; a panicking one too.
	for _, action := range []func(*ucli.Context) error{
		func(*ucli.Context) error { return nil },
		func(*ucli.Context) error { panic("boom") },
	} {
		calls := 0
		func() {
			defer func() { _ = recover() }()
			Run(context.Background(), testApp(t, &out, &errOut, &got, action), []string{"krops-test"}, RunOptions{Signals: []os.Signal{syscall.SIGUSR2}, Cleanup: func() { calls++ }})
		}()
		if calls != 1 {
			t.Errorf("the cleanup ran %d times, want once", calls)
		}
	}
}
