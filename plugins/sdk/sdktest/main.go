package sdktest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/plugins/sdk/procfs"
)

// Main runs a package's tests, kills every plugin they started whatever
// path the tests took, and then fails the package if any process the tests
// started is still running: a plugin, or a child a plugin left behind. The
// test binary is made the subreaper of its descendants first, so orphans
// are seen instead of being adopted by init. cleanups run after the tests,
// before the check. The plugins Build compiled are removed (about 130 MB
// per package run otherwise left in the temporary directory). Call it from
// TestMain.
func Main(m *testing.M, cleanups ...func()) {
	if err := procfs.BecomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "sdktest: cannot watch for leftover processes: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	sdk.CleanupClients()
	removeBuilt()
	for _, c := range cleanups {
		c()
	}
	if left := procfs.Leftovers(3 * time.Second); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: processes started by the tests outlived them:\n")
		for _, pid := range left {
			fmt.Fprintf(os.Stderr, "  pid %d: %s\n", pid, procfs.Cmdline(pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		code = 1
	}
	os.Exit(code)
}

// Install builds pkg as krops-provider-<name> (see Build) and copies it
// into dir, where a host's plugin discovery finds it. It returns the path.
func Install(t testing.TB, dir, pkg, name string) string {
	t.Helper()
	b, err := os.ReadFile(Build(t, pkg, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, sdk.ExecutablePrefix+name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Buffer collects plugin logs safely from the goroutines that relay them.
// (Plugins may log after a test ended, when t.Log would panic.)
type Buffer = proc.Buffer
