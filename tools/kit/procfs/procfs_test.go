package procfs

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestAliveAndChildren(t *testing.T) {
	// A command name with spaces and a parenthesis must not confuse the parser.
	cmd := exec.Command("/bin/sh", "-c", "exec -a 'odd (name) x' sleep 30")
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
