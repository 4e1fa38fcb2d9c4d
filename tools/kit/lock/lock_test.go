package lock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests hold locks in real processes: this test binary re-run as a
// helper that takes a lock, says so, and waits to be killed.
func TestMain(m *testing.M) {
	if name := os.Getenv("KROPS_LOCK_HELPER"); name != "" {
		l, err := Acquire(Options{Dir: os.Getenv("KROPS_LOCK_DIR"), Name: name, Holder: Holder{RunID: "helper-run", Command: "krops-kind up"}})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("held")
		time.Sleep(time.Hour) // until killed
		runtime.KeepAlive(l)  // the open lock file holds the flock
	}
	os.Exit(m.Run())
}

func holdInHelper(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KROPS_LOCK_HELPER="+name, "KROPS_LOCK_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("helper: %q", line)
	}
	return cmd
}

func TestASecondRunIsRefusedNamingTheHolder(t *testing.T) {
	dir := t.TempDir()
	helper := holdInHelper(t, dir, "kind-mgmt")
	_, err := Acquire(Options{Dir: dir, Name: "kind-mgmt", Holder: Holder{RunID: "second"}})
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("err = %v, want a HeldError", err)
	}
	if held.Holder.PID != helper.Process.Pid || held.Holder.RunID != "helper-run" || held.Holder.Command != "krops-kind up" {
		t.Errorf("holder %+v, want the helper (pid %d)", held.Holder, helper.Process.Pid)
	}
	for _, want := range []string{"kind-mgmt is locked", "run helper-run", fmt.Sprintf("pid %d", helper.Process.Pid), `"krops-kind up"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	h, isHeld, err := Status(Options{Dir: dir, Name: "kind-mgmt"})
	if err != nil || !isHeld || h.PID != helper.Process.Pid {
		t.Errorf("status: %+v held=%t err=%v", h, isHeld, err)
	}
}

func TestAKilledHoldersLockIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	helper := holdInHelper(t, dir, "kind-mgmt")
	pid := helper.Process.Pid
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	if _, isHeld, err := Status(Options{Dir: dir, Name: "kind-mgmt"}); err != nil || isHeld {
		t.Errorf("a dead holder still counts: held=%t err=%v", isHeld, err)
	}
	l, err := Acquire(Options{Dir: dir, Name: "kind-mgmt", Holder: Holder{RunID: "next"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Previous == nil || l.Previous.PID != pid || l.Previous.RunID != "helper-run" {
		t.Errorf("previous holder %+v, want the killed helper (pid %d)", l.Previous, pid)
	}
	h, isHeld, _ := Status(Options{Dir: dir, Name: "kind-mgmt"})
	if !isHeld || h.RunID != "next" || h.PID != os.Getpid() {
		t.Errorf("after takeover: %+v held=%t", h, isHeld)
	}
}

func TestDifferentNamesRunSideBySide(t *testing.T) {
	dir := t.TempDir()
	holdInHelper(t, dir, "kind-a")
	l, err := Acquire(Options{Dir: dir, Name: "kind-b"})
	if err != nil {
		t.Fatalf("a different name must not wait for kind-a: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	// Released: taken again at once, with no stale holder to report.
	l, err = Acquire(Options{Dir: dir, Name: "kind-b"})
	if err != nil || l.Previous != nil {
		t.Fatalf("re-acquire: %v, previous %+v", err, l.Previous)
	}
	l.Release()
}

func TestBadNamesAreRefused(t *testing.T) {
	for _, name := range []string{"", "../x", "a/b", "-x"} {
		if _, err := Acquire(Options{Dir: t.TempDir(), Name: name}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

// A lock directory that is a file, or that this user cannot write, is a
// DirError naming the directory, so callers can call it a setup problem.
func TestUnusableLockDirectoryIsADirError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Acquire(Options{Name: "x", Dir: filepath.Join(file, "locks")})
	var de *DirError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "XDG_STATE_HOME") {
		t.Fatalf("lock under a file: %v, want a DirError naming %s", err, file)
	}
}
