// Package lock is the host-level lock that keeps two krops runs from working
// on the same kind cluster at once: an flock'd file per name under the
// user's state directory, with the holder (run id, pid, command) written
// beside it so a refused run can say who holds it.
//
// The kernel drops an flock when its process dies, however it dies, so a
// lock is never stuck: a holder file naming a dead process is stale, and the
// next run takes over with a warning.
package lock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Holder describes the process that holds a lock.
type Holder struct {
	RunID   string    `json:"run_id"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

func (h Holder) String() string {
	run := h.RunID
	if run == "" {
		run = "(no run id)"
	}
	return fmt.Sprintf("run %s, pid %d, command %q, since %s", run, h.PID, h.Command, h.Since.UTC().Format(time.RFC3339))
}

// Options name a lock and say who takes it.
type Options struct {
	// Dir holds the lock files; empty means DefaultDir().
	Dir string
	// Name is what is locked, e.g. "kind-mgmt".
	Name string
	// Holder is written beside the lock; PID and Since default to this
	// process and now.
	Holder Holder
}

// HeldError is returned when a live process holds the lock.
type HeldError struct {
	Name   string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is locked by another krops run (%s): wait for it to finish, or stop it; a lock whose process has died is taken over automatically", e.Name, e.Holder)
}

// Lock is a held lock.
type Lock struct {
	f    *os.File
	path string
	// Previous is the stale holder taken over, if any.
	Previous *Holder
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// DefaultDir is $XDG_STATE_HOME/krops/locks, else ~/.local/state/krops/locks.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "krops", "locks"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the lock directory: %w (set XDG_STATE_HOME)", err)
	}
	return filepath.Join(home, ".local", "state", "krops", "locks"), nil
}

func paths(o Options) (lockPath, holderPath string, err error) {
	if !validName.MatchString(o.Name) {
		return "", "", fmt.Errorf("lock name %q: use letters, digits, '.', '_' and '-'", o.Name)
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = DefaultDir(); err != nil {
			return "", "", err
		}
	}
	return filepath.Join(dir, o.Name+".lock"), filepath.Join(dir, o.Name+".holder.json"), nil
}

// Acquire takes the lock without waiting. A lock that a live process holds
// is a *HeldError naming it.
func Acquire(o Options) (*Lock, error) {
	lockPath, holderPath, err := paths(o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o700); err != nil {
		return nil, &DirError{Dir: filepath.Dir(lockPath), Err: err}
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &DirError{Dir: filepath.Dir(lockPath), Err: err}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h, _, _ := readHolder(holderPath)
			return nil, &HeldError{Name: o.Name, Holder: h}
		}
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	l := &Lock{f: f, path: holderPath}
	// The flock is ours, so any holder file left is a dead run's.
	if prev, ok, _ := readHolder(holderPath); ok && prev.PID != os.Getpid() {
		l.Previous = &prev
	}
	h := o.Holder
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	if h.Since.IsZero() {
		h.Since = time.Now()
	}
	if h.Command == "" {
		h.Command = strings.Join(os.Args, " ")
	}
	if err := writeHolder(holderPath, h); err != nil {
		l.Release()
		return nil, &DirError{Dir: filepath.Dir(lockPath), Err: err}
	}
	return l, nil
}

// DirError is a lock directory that cannot hold locks (not a directory,
// not writable, full): a setup problem the user fixes, not a failed run.
type DirError struct {
	Dir string
	Err error
}

func (e *DirError) Error() string {
	return fmt.Sprintf("the lock directory %s cannot be used: %v; make it a directory this user can write, or set XDG_STATE_HOME to one", e.Dir, e.Err)
}

func (e *DirError) Unwrap() error { return e.Err }

// Release drops the lock and its holder file.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, os.ErrNotExist) {
		rmErr = nil
	}
	err := l.f.Close() // closing drops the flock
	l.f = nil
	return errors.Join(rmErr, err)
}

// Status reports who holds a lock: held is false when nobody does (a holder
// file left by a dead process does not count).
func Status(o Options) (h Holder, held bool, err error) {
	lockPath, holderPath, err := paths(o)
	if err != nil {
		return Holder{}, false, err
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return Holder{}, false, nil
	}
	h, _, err = readHolder(holderPath)
	return h, true, err
}

func readHolder(path string) (Holder, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, err
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil {
		return Holder{}, false, fmt.Errorf("reading %s: %w", path, err)
	}
	return h, true, nil
}

func writeHolder(path string, h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the lock holder: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the lock holder: %w", err)
	}
	return nil
}
