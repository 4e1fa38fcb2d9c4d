package sdk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/procfs"
)

// standInPlugin writes a STAND-IN plugin: a shell script behaving the way
// a broken or hostile provider would. It is not a krops provider and never
// completes a handshake.
func standInPlugin(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), sdk.ExecutablePrefix+"standin")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n# STAND-IN for a misbehaving provider plugin.\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// pidFrom waits for a stand-in to write a pid to path.
func pidFrom(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// gone waits up to d for pid to stop running.
func gone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for procfs.Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func TestPluginExitingBeforeHandshakeIsExplainedWithItsStderr(t *testing.T) {
	bin := standInPlugin(t, "echo 'starting' >&2\necho 'cannot read /etc/krops/creds: permission denied' >&2\nexit 7\n")
	_, err := load(t, "standin", bin, sdk.LoadOptions{})
	if err == nil {
		t.Fatal("a plugin that exits at once must fail to load")
	}
	for _, want := range []string{"standin", "exited with code 7", "before its handshake", "cannot read /etc/krops/creds: permission denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "stdout") {
		t.Errorf("an early exit is not a stdout problem:\n%v", err)
	}
	silent := standInPlugin(t, "exit 3\n")
	if _, err := load(t, "standin", silent, sdk.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(err.Error(), "nothing to stderr") {
		t.Errorf("a silent early exit: %v", err)
	}
}

// A plugin that starts a background child holding its pipes and then hangs:
// the host gives up at the start timeout, kills the whole group (the child
// included), and does not wait for the child to close the pipes.
func TestHungPluginWithABackgroundChildIsKilledWithItsGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	bin := standInPlugin(t, "sleep 300 &\necho $! > '"+pidfile+"'\nsleep 300\n")
	start := time.Now()
	_, err := load(t, "standin", bin, sdk.LoadOptions{StartTimeout: time.Second})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no handshake within the start timeout") {
		t.Errorf("hung plugin: %v", err)
	}
	// The timeout plus the pipe grace, with room for a loaded machine; the
	// child would hold the host for 300 s.
	if took > 6*time.Second {
		t.Errorf("the host returned after %v; the start timeout is 1 s", took)
	}
	if child := pidFrom(t, pidfile); !gone(child, 5*time.Second) {
		t.Errorf("the plugin's child %d survived the plugin", child)
	}
}

// A child that leaves the plugin's group (setsid) cannot be killed with it,
// but it cannot hold the host either: the pipes are let go shortly after the
// plugin is gone.
func TestChildOutsideTheGroupDoesNotHoldTheHost(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "escaped.pid")
	bin := standInPlugin(t, "setsid sh -c 'echo $$ > \""+pidfile+"\"; exec sleep 300' &\nsleep 300\n")
	start := time.Now()
	_, err := load(t, "standin", bin, sdk.LoadOptions{StartTimeout: time.Second})
	took := time.Since(start)
	escaped := pidFrom(t, pidfile)
	// This test cleans up what it made escape; the host cannot.
	_ = syscall.Kill(escaped, syscall.SIGKILL)
	if err == nil {
		t.Fatal("a hung plugin must fail to load")
	}
	if took > 6*time.Second {
		t.Errorf("the host waited %v for a child that left the plugin's group", took)
	}
}

// Ctrl-C during the handshake: Load returns at once, not at the start
// timeout, and the plugin and its child are gone.
func TestInterruptDuringHandshakeReturnsAtOnce(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	bin := standInPlugin(t, "sleep 300 &\necho $! > '"+pidfile+"'\nsleep 300\n")
	ctx, cancel := context.WithCancel(context.Background())
	child := make(chan int, 1)
	go func() {
		child <- pidFrom(t, pidfile)
		cancel()
	}()
	start := time.Now()
	_, err := sdk.Load(ctx, "standin", sdk.LoadOptions{Path: bin, StartTimeout: time.Minute, Stderr: &strings.Builder{}})
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted during the handshake") {
		t.Errorf("interrupted handshake: %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("Load returned %v after the start; the interrupt came right after the plugin started", took)
	}
	if pid := <-child; !gone(pid, 5*time.Second) {
		t.Errorf("the plugin's child %d survived the interrupt", pid)
	}
}

// loadWithChild loads the test plugin in its "child" mode and returns the
// client and the pid of the child holding the plugin's pipes.
func loadWithChild(t *testing.T) (*sdk.Client, int) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	env := append(withMode("child"), "TESTPLUGIN_PIDFILE="+pidfile)
	c, err := load(t, "testplugin", testPlugin(t), sdk.LoadOptions{BaseEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	return c, pidFrom(t, pidfile)
}

// A real plugin with a child holding its pipes: Close returns promptly and
// takes the child with it.
func TestCloseKillsThePluginsChildren(t *testing.T) {
	c, child := loadWithChild(t)
	if !procfs.Alive(child) {
		t.Fatalf("the test plugin's child %d is not running", child)
	}
	start := time.Now()
	c.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v with a child holding the plugin's pipes", took)
	}
	if !gone(child, 5*time.Second) {
		t.Errorf("the plugin's child %d survived Close", child)
	}
}

// KillPlugins (a second Ctrl-C) kills every plugin's group at once, without
// the graceful close that Close tries first.
func TestKillPluginsKillsEveryGroupAtOnce(t *testing.T) {
	c, child := loadWithChild(t)
	sdk.KillPlugins()
	if !gone(child, 2*time.Second) || !gone(c.PID(), 2*time.Second) {
		t.Errorf("after KillPlugins: plugin %d alive %v, child %d alive %v", c.PID(), procfs.Alive(c.PID()), child, procfs.Alive(child))
	}
}
