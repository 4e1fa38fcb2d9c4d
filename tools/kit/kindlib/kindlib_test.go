package kindlib

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/plugins/sdk/procfs"
)

// wedgedEngine puts a `docker` on PATH that accepts every command and never
// answers, as a daemon that is stuck does, and records its pid.
func wedgedEngine(t *testing.T) (pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + "\nwhile :; do sleep 1; done\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return pidFile
}

func enginePID(t *testing.T, pidFile string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
	}
	t.Fatal("kind never ran the engine")
	return 0
}

func gone(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !procfs.Alive(pid) {
			return true
		}
	}
	return false
}

// kind's own engine call, which takes no context, returns when the run's
// context ends, and the engine command it was waiting on is stopped.
func TestAQueryOnAWedgedEngineEndsWithItsContext(t *testing.T) {
	pidFile := wedgedEngine(t)
	k, err := New("docker", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := k.List(ctx); done <- err }()
	pid := enginePID(t, pidFile)
	cancel() // the first Ctrl-C
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("List after the interrupt: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("List ignored the cancelled context")
	}
	if !gone(pid, 5*time.Second) {
		t.Errorf("kind's docker (pid %d) still runs after the interrupt", pid)
	}
}

// A creation is not cut short by the first interrupt, but a forced exit
// (the run's groups killed) ends the engine commands kind runs for it.
func TestAForcedExitEndsKindsEngineCommands(t *testing.T) {
	pidFile := wedgedEngine(t)
	k, err := New("docker", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, groups := proc.WithGroups(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Create(ctx, "wedged", []byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n")) }()
	pid := enginePID(t, pidFile)
	groups.Kill()
	if !gone(pid, 5*time.Second) {
		t.Errorf("kind's docker (pid %d) still runs after the forced exit", pid)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("Create did not return once its engine command was killed")
	}
}
