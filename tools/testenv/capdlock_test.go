package testenv

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A lock held by another test run fails the waiter within its short bound,
// naming the holder, instead of waiting out the long one; a holder of the
// same run is waited for, and the lock is taken once it lets go.
func TestCAPDLockNamesAHolderFromAnotherRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capd.lock")
	held, err := lockExclusive(path, capdHolder{PID: 4242, Run: "other-run", Test: "TestElsewhere"}, time.Second, time.Minute, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = lockExclusive(path, capdHolder{PID: 1, Run: "this-run", Test: t.Name()}, 300*time.Millisecond, time.Hour, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "pid 4242 (TestElsewhere, run other-run") || !strings.Contains(err.Error(), "kill 4242") {
		t.Fatalf("waiting on another run's holder: %v", err)
	}
	if waited := time.Since(start); waited > time.Minute {
		t.Errorf("gave up after %v: the other-run bound (300ms) was not used", waited)
	}

	// The same run: waited for until the holder lets go.
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = syscall.Flock(int(held.Fd()), syscall.LOCK_UN)
		held.Close()
	}()
	f, err := lockExclusive(path, capdHolder{PID: 1, Run: "other-run", Test: t.Name()}, 100*time.Millisecond, time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("a holder of the same run was not waited for: %v", err)
	}
	f.Close()
}
