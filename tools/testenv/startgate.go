package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A kube-apiserver's start is the heaviest moment of its life: etcd's first
// writes, the API server's post-start hooks, the default namespace, then the
// CRDs. The full run (`go test -p 4`, four test binaries side by side, some
// starting two or three servers at once) started a dozen at the same moment
// on 2 cores, and envtest's fixed waits (5 s for the default namespace; a
// start timeout after which it kills the server and starts again, which the
// next start under the same load fails too) gave up in CI. So starts take a
// machine-wide slot, one per two cores, and wait for it before their clocks
// run: a start then has the CPU it needs. A running server holds no slot.

// startSlotWait bounds the wait for a slot: a start holds one for seconds,
// so minutes of waiting mean a stuck holder, which the error names.
const startSlotWait = 10 * time.Minute

// startSlots is how many API servers may start at once on this machine.
func startSlots() int {
	return max(1, runtime.NumCPU()/2)
}

// takeStartSlot waits for one of the machine-wide start slots (an flock'd
// file each, so a dead holder frees its slot at once) and returns its
// release.
func takeStartSlot(t testing.TB) func() {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "krops-testenv-apiserver-start")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("API server start slots: %v", err)
	}
	f, err := waitForSlot(dir, startSlots(), startSlotWait)
	if err != nil {
		t.Fatalf("API server start slots: %v", err)
	}
	release := unlockOnce(f)
	t.Cleanup(release)
	return release
}

// waitForSlot takes an exclusive flock on one of n slot files in dir,
// polling until one is free or wait has passed.
func waitForSlot(dir string, n int, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		for i := range n {
			path := filepath.Join(dir, fmt.Sprintf("slot-%d", i))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				return nil, err
			}
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				return f, nil
			}
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("locking %s: %w", path, err)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("all %d slots in %s were held for %s: a test process that hangs while starting an API server holds one (fuser %s/slot-*)", n, dir, wait, dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unlockOnce returns a release of f's flock that may be called more than
// once (by the caller, then by t's cleanup).
func unlockOnce(f *os.File) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		})
	}
}
