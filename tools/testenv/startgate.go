package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
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
//
// Starts wait in line, first come first served: with one slot and a dozen
// test binaries polling for it, whoever polled at the right moment won, and
// in CI one start lost for ten minutes while the slot changed hands all the
// time. The line is a directory of tickets, each flock'd by its waiter (a
// dead waiter's ticket is unlocked, so it is dropped instead of blocking
// the line).

// startStall is how long a waiter tolerates a line that does not move: a
// start holds its slot for seconds, or minutes on a loaded machine (each
// of etcd and kube-apiserver may take controlPlaneStartTimeout, and a
// failed start is tried again), so a line stuck that long means a stuck
// holder, which the error names.
const startStall = 20 * time.Minute

// startSlots is how many API servers may start at once on this machine.
func startSlots() int {
	return max(1, runtime.NumCPU()/2)
}

// takeStartSlot waits in line for one of the machine-wide start slots and
// returns its release.
func takeStartSlot(t testing.TB) func() {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "krops-testenv-apiserver-start")
	f, err := waitForSlot(dir, startSlots(), startStall, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("API server start slots: %v", err)
	}
	release := unlockOnce(f)
	t.Cleanup(release)
	return release
}

// waitForSlot joins the line in dir and, once fewer than n live waiters are
// ahead, takes an exclusive flock on one of n slot files. It gives up when
// the line has not moved for stall.
func waitForSlot(dir string, n int, stall, poll time.Duration) (*os.File, error) {
	queue := filepath.Join(dir, "queue")
	if err := os.MkdirAll(queue, 0o700); err != nil {
		return nil, fmt.Errorf("start line %s: %w", queue, err)
	}
	ticket, name, err := joinLine(queue)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = os.Remove(filepath.Join(queue, name))
		ticket.Close()
	}()
	ahead, moved := -1, time.Now()
	for {
		a, err := liveAhead(queue, name)
		if err != nil {
			return nil, err
		}
		if a != ahead {
			ahead, moved = a, time.Now()
		}
		if ahead < n {
			f, err := trySlots(dir, n)
			if err != nil || f != nil {
				return f, err
			}
		}
		if time.Since(moved) > stall {
			return nil, fmt.Errorf("waited %s with %d starts ahead in line and the %d slots in %s held by %s, and nothing moved: a test process that hangs while starting an API server holds a slot (fuser %s/slot-*)",
				stall, ahead, n, dir, holders(dir, n), dir)
		}
		time.Sleep(poll)
	}
}

// joinLine adds a ticket named by the time it joined. The ticket is locked
// before it is renamed into the line, so no waiter ever sees it unlocked
// and takes it for a dead one.
func joinLine(queue string) (*os.File, string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, "", err
	}
	name := fmt.Sprintf("%020d-%d-%s", time.Now().UnixNano(), os.Getpid(), hex.EncodeToString(b))
	tmp := filepath.Join(queue, ".joining-"+name)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("joining the start line: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, "", fmt.Errorf("locking ticket %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(queue, name)); err != nil {
		f.Close()
		_ = os.Remove(tmp)
		return nil, "", fmt.Errorf("joining the start line: %w", err)
	}
	return f, name, nil
}

// liveAhead counts the tickets older than name whose waiters still hold
// them, dropping the tickets of waiters that died in line.
func liveAhead(queue, name string) (int, error) {
	entries, err := os.ReadDir(queue)
	if err != nil {
		return 0, fmt.Errorf("reading the start line %s: %w", queue, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	ahead := 0
	for _, other := range names {
		if other >= name {
			break
		}
		if held(filepath.Join(queue, other)) {
			ahead++
		}
	}
	return ahead, nil
}

// held reports whether a live process holds the ticket at path; an
// unlocked one is removed.
func held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false // gone: its waiter was served
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	if err == nil {
		_ = os.Remove(path)
	}
	return false
}

// trySlots takes the first free slot, recording the holder in it, or
// returns nil when all are held.
func trySlots(dir string, n int) (*os.File, error) {
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("slot-%d", i))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if err := f.Truncate(0); err == nil {
				_, _ = f.WriteAt(fmt.Appendf(nil, "pid %d since %s\n", os.Getpid(), time.Now().Format(time.RFC3339)), 0)
			}
			return f, nil
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
	}
	return nil, nil
}

// holders names who holds each slot, as the holders recorded it.
func holders(dir string, n int) string {
	var hs []string
	for i := range n {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("slot-%d", i)))
		h := strings.TrimSpace(string(b))
		if err != nil || h == "" {
			h = "unknown"
		}
		hs = append(hs, h)
	}
	return strings.Join(hs, "; ")
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
