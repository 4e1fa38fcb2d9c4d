package proc

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wrapper is a shell script standing in for a CLI that runs a helper: it
// starts a long sleep, writes the sleep's pid, and waits for it.
func wrapper(t *testing.T) (script, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "child.pid")
	script = filepath.Join(dir, "wrapper")
	body := "#!/bin/sh\nsleep 300 &\necho $! > " + pidFile + "\nwait\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, pidFile
}

func childPID(t *testing.T, pidFile string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the wrapper never started its child")
	return 0
}

// alive reports whether pid runs (a zombie awaiting its reaper counts as
// gone: it runs nothing).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func gone(t *testing.T, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Cancelling a run with OwnGroup ends the wrapper's child too; without it,
// the child outlives the run (the behaviour plugins keep, whose group the
// host kills whole).
func TestCancelEndsTheWholeGroup(t *testing.T) {
	for _, own := range []bool{true, false} {
		script, pidFile := wrapper(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := Exec{OwnGroup: own, WaitDelay: time.Second}.Run(ctx, Cmd{Path: script, Env: []string{"PATH=" + os.Getenv("PATH")}})
			done <- err
		}()
		child := childPID(t, pidFile)
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("OwnGroup=%v: a cancelled run returned no error", own)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("OwnGroup=%v: the cancelled run did not return", own)
		}
		if own && !gone(t, child) {
			t.Errorf("OwnGroup: the wrapper's child %d still runs after cancellation", child)
		}
		if !own {
			if !alive(child) {
				t.Errorf("without OwnGroup the child %d was expected to outlive the run (the test would prove nothing)", child)
			}
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	}
}

// Groups.Kill, the forced exit's cleanup, ends runs still in flight.
func TestGroupsKillEndsRunsInFlight(t *testing.T) {
	script, pidFile := wrapper(t)
	ctx, groups := WithGroups(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = Exec{OwnGroup: true}.Run(ctx, Cmd{Path: script, Env: []string{"PATH=" + os.Getenv("PATH")}})
	}()
	child := childPID(t, pidFile)
	groups.Kill()
	if !gone(t, child) {
		t.Errorf("Groups.Kill left the child %d running", child)
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the killed run did not return")
	}
}
