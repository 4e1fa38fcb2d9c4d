package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestAliveAndChildren(t *testing.T) {
	// A command name with spaces and parentheses must not confuse the
	// parser: the kernel takes it from the executable's file name.
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(t.TempDir(), "odd (name) x")
	if err := os.WriteFile(odd, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatal("a running child is not alive")
	}
	if !slices.Contains(Children(os.Getpid()), pid) {
		t.Errorf("children of the test %v lack %d", Children(os.Getpid()), pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if Alive(pid) {
		t.Error("a killed and reaped child is still alive")
	}
}
