package chaintest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A tool's exit code is part of its contract (2 refused, 3 unknown state),
// and it must reach whoever called the chain: task alone answers 201 for
// any failed command. Through the real task, tools/task.sh and mise, a
// teardown whose krops-sweep exits 3 exits 3. The krops-sweep here is a
// STAND-IN script that only exits 3 (what is tested is the chain, not the
// tool), put in bin/ by a stand-in tools/scripts/build.sh.
func TestExitCodesPassThroughTheChain(t *testing.T) {
	r := newRunner(t)
	for name, content := range map[string]string{
		"tools/scripts/build.sh": "#!/bin/sh\nmkdir -p bin\nprintf '#!/bin/sh\\necho stand-in krops-sweep \"$@\" >&2\\nexit 3\\n' > bin/krops-sweep\nchmod +x bin/krops-sweep\n",
	} {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile(filepath.Join(repoRoot, "tools", "task.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "tools", "task.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	// tools/task.sh finds the pinned task in its cache; this one is it.
	cache := t.TempDir()
	pinned := filepath.Join(cache, "krops", "tools", filepath.Base(filepath.Dir(r.taskBin)))
	if err := os.MkdirAll(pinned, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(r.taskBin, filepath.Join(pinned, "task")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"tools/task.sh", []string{filepath.Join(r.dir, "tools", "task.sh"), "teardown", "ENV=local-host"}},
		{"mise run", []string{r.miseBin, "run", "teardown"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
		cmd.Dir = r.dir
		cmd.Env = append(append([]string{}, r.baseEnv...), "XDG_CACHE_HOME="+cache)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("%s teardown with a krops-sweep that exits 3: %v\n%s", c.name, err, out)
		}
	}
}
