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

// Snapshot sees this process with its parent and the CPU it used, and the
// CPU of a child it waited for in Reaped; Argv keeps arguments apart.
func TestSnapshotCountsOwnAndReapedCPU(t *testing.T) {
	find := func() Process {
		for _, p := range Snapshot() {
			if p.PID == os.Getpid() {
				return p
			}
		}
		t.Fatal("Snapshot lacks the test process")
		return Process{}
	}
	before := find()
	if before.PPID != os.Getppid() || before.Start == 0 {
		t.Errorf("the test process: %+v, parent %d", before, os.Getppid())
	}
	// A child that counts (CPU, however loaded the machine), then reaped.
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after := find()
	if after.Start != before.Start || after.Reaped <= before.Reaped {
		t.Errorf("after reaping a busy child: %+v, before %+v", after, before)
	}
	if got := Argv(os.Getpid()); len(got) == 0 || got[0] != os.Args[0] {
		t.Errorf("Argv %q, want it to start with %q", got, os.Args[0])
	}
}
