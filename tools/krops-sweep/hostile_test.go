package main_test

import (
	"fmt"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/procfs"
	"github.com/kropsdev/krops/tools/testenv"
	"github.com/kropsdev/krops/tools/testenv/awstest"
)

// The hostile user's cases, through the real krops-sweep binary. The
// plugins here are STAND-IN shell scripts that misbehave on purpose; none
// of them is a krops provider.

type hostile struct {
	dir, bin, plugins string
	env               []string
}

func newHostile(t *testing.T) hostile {
	t.Helper()
	h := hostile{dir: t.TempDir(), bin: builds.Binary(t, ".", "krops-sweep")}
	h.plugins = filepath.Join(h.dir, "plugins")
	if err := os.Mkdir(h.plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "bootstrap.toml"), []byte(awstest.BootstrapTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	h.env = []string{"PATH=" + sdktest.PathWithoutEngines(t, ""), sdktest.NoEngineEnv[0], sdktest.NoEngineEnv[1], "HOME=" + h.dir, "KROPS_PLUGIN_DIR=" + h.plugins}
	return h
}

// standIn installs a STAND-IN for the aws plugin running body.
func (h hostile) standIn(t *testing.T, body string) {
	t.Helper()
	p := filepath.Join(h.plugins, "krops-provider-aws")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n# STAND-IN for a misbehaving aws provider plugin.\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// started runs the binary in the background.
func (h hostile) started(t *testing.T, extraEnv []string, args ...string) (*exec.Cmd, *sdktest.Buffer) {
	t.Helper()
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = h.dir
	cmd.Env = append(append([]string{}, h.env...), extraEnv...)
	var out sdktest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, &out
}

// exited waits up to d for cmd and returns its exit code (-1 for a signal)
// and how long it took.
func exited(t *testing.T, cmd *exec.Cmd, d time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), time.Since(start)
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s still running after %v", cmd.Path, d)
		return 0, 0
	}
}

func assertGone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); procfs.Alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s (pid %d) survived the run", what, pid)
			return
		}
	}
}

// A configuration path that is a FIFO or /dev/zero is refused at once: the
// run neither blocks on the read nor grows. So is a FIFO, a device or a
// directory as a kubeconfig or the age key, and a kubeconfig that does not
// parse.
func TestUnreadableConfigPathsAreRefusedAtOnce(t *testing.T) {
	h := newHostile(t)
	fifo := filepath.Join(h.dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		cmd, out := h.started(t, []string{"BOOTSTRAP_CONFIG=" + path}, "cloud", "aws")
		code, took := exited(t, cmd, 10*time.Second)
		if code != 2 || !strings.Contains(out.String(), path) || !strings.Contains(out.String(), "is not a regular file") {
			t.Errorf("%s: exit %d after %v:\n%s", path, code, took, out)
		}
		// A child started with os/exec shares this process's memory until
		// its exec (vfork), so its peak counts this test process's size
		// too: the bound is that plus what a refusal may use.
		var self syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
			t.Fatal(err)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > self.Maxrss+200*1024 {
			t.Errorf("%s: peak memory %d KiB, this test process's %d KiB", path, ru.Maxrss, self.Maxrss)
		}
	}
	// The same for the files the path knobs name, which client-go and the
	// age library would read later: refused up front, naming the knob.
	for _, knob := range []string{"KUBECONFIG", "MGMT_KUBECONFIG", "AGE_KEY_FILE"} {
		for _, path := range []string{fifo, "/dev/zero", h.dir} {
			cmd, out := h.started(t, []string{knob + "=" + path}, "aws", "--dry-run")
			code, took := exited(t, cmd, 10*time.Second)
			if code != 2 || !strings.Contains(out.String(), knob+"=") || !strings.Contains(out.String(), "a regular file, not a") {
				t.Errorf("%s=%s: exit %d after %v, want 2 naming the knob:\n%s", knob, path, code, took, out)
			}
		}
	}
	// A kubeconfig that does not parse was "no controller host answered"
	// (exit 1, advising a cloud sweep): it is a broken input.
	garbage := filepath.Join(h.dir, "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("apiVersion: v1\nclusters: [\x01"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, knob := range []string{"KUBECONFIG", "MGMT_KUBECONFIG"} {
		cmd, out := h.started(t, []string{knob + "=" + garbage}, "local-host", "--dry-run")
		code, took := exited(t, cmd, 10*time.Second)
		if code != 2 || !strings.Contains(out.String(), knob+"=") || !strings.Contains(out.String(), "want a kubeconfig") || strings.Contains(out.String(), "krops-sweep cloud") {
			t.Errorf("%s=%s: exit %d after %v, want 2 naming the knob and no cloud-sweep advice:\n%s", knob, garbage, code, took, out)
		}
	}
}

// A plugin that starts a background child holding its pipes and then hangs
// in its handshake: Ctrl-C returns at once (once or twice), and neither the
// plugin nor its child survives.
func TestInterruptWhileAPluginHangsWithAChild(t *testing.T) {
	for _, signals := range []int{1, 2} {
		t.Run(strconv.Itoa(signals)+" SIGINT", func(t *testing.T) {
			h := newHostile(t)
			pids := filepath.Join(h.dir, "pids")
			h.standIn(t, "sleep 300 &\necho $$ $! > '"+pids+".tmp'\nmv '"+pids+".tmp' '"+pids+"'\nsleep 300\n")
			cmd, out := h.started(t, nil, "cloud", "aws")
			var plugin, child int
			for deadline := time.Now().Add(20 * time.Second); plugin == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if b, err := os.ReadFile(pids); err == nil {
					f := strings.Fields(string(b))
					plugin, _ = strconv.Atoi(f[0])
					child, _ = strconv.Atoi(f[1])
				}
			}
			if plugin == 0 {
				t.Fatalf("the stand-in plugin never started:\n%s", out)
			}
			for i := 0; i < signals; i++ {
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			code, took := exited(t, cmd, 30*time.Second)
			if took > 2*time.Second {
				t.Errorf("exit %d came %v after the interrupt, want under 2 s (the start timeout is 10 s)", code, took)
			}
			if code != 130 {
				t.Errorf("exit %d, want 130 (interrupted, or forced by the second signal):\n%s", code, out)
			}
			if signals == 1 && !strings.Contains(out.String(), "interrupted during the handshake") {
				t.Errorf("the error must say the handshake was interrupted:\n%s", out)
			}
			assertGone(t, "the plugin", plugin)
			assertGone(t, "the plugin's child", child)
		})
	}
}

// A plugin that dies before its handshake is reported with its exit code
// and the end of its stderr, without -v.
func TestPluginDyingBeforeItsHandshakeIsExplained(t *testing.T) {
	h := newHostile(t)
	h.standIn(t, "echo 'aws provider: cannot load shared library libfoo.so' >&2\nexit 127\n")
	cmd, out := h.started(t, nil, "cloud", "aws")
	code, _ := exited(t, cmd, 30*time.Second)
	for _, want := range []string{"exited with code 127 before its handshake", "cannot load shared library libfoo.so"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("exit %d; output lacks %q:\n%s", code, want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1 (a broken plugin, not a configuration problem)", code)
	}
}

// Plugin directories someone else could redirect or fill are refused with
// exit 2, and the plugin in them never runs.
func TestUnsafePluginDirectoriesAreRefused(t *testing.T) {
	h := newHostile(t)
	ran := filepath.Join(h.dir, "ran")
	h.standIn(t, "touch '"+ran+"'\nexit 1\n")
	if err := os.Symlink(h.dir, filepath.Join(h.dir, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, dir, want string
		mode            os.FileMode
	}{
		{"symlinked parent", filepath.Join(h.dir, "link", "plugins"), "symlinked parent", 0o755},
		{"trailing slash on a symlinked parent", filepath.Join(h.dir, "link", "plugins") + "/", "symlinked parent", 0o755},
		{"world-writable directory", h.plugins, "is world-writable", 0o777},
	}
	for _, tc := range cases {
		if err := os.Chmod(h.plugins, tc.mode); err != nil {
			t.Fatal(err)
		}
		cmd, out := h.started(t, []string{"KROPS_PLUGIN_DIR=" + tc.dir}, "cloud", "aws")
		code, _ := exited(t, cmd, 30*time.Second)
		if code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: exit %d:\n%s", tc.name, code, out)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%s: the refused plugin ran", tc.name)
		}
	}
}

// builds holds the krops-sweep binary, built once for every test here.
var builds *testenv.Builds

// TestMain builds once, and fails the package if any process a test
// started (a plugin, its child, an API server, moto) outlives the tests.
func TestMain(m *testing.M) {
	b, err := testenv.NewBuilds()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builds = b
	sdktest.Main(m, b.Remove)
}
