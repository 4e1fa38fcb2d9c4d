package chaintest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/tools/kit/dotenv"
)

// dotenvLines are the .env spellings users write; each gets its own key.
var dotenvLines = []string{
	"V%d=plain",
	"export V%d=exported",
	"V%d =  spaced  ",
	`V%d="double quoted"`,
	`V%d='single quoted'`,
	`V%d="hash # inside"`,
	"V%d=value # trailing comment",
	"V%d=a#b",
	`V%d="escaped\nnewline"`,
	`V%d='kept\nas is'`,
	"V%d=",
	"V%d=a=b",
	`V%d="x" # after quotes`,
}

// krops's own .env parser (kit/dotenv, used by the toolbox wrapper) reads
// every line above exactly as the real task and mise do, so a value cannot
// differ between `task X`, `mise run X` and the toolbox.
func TestDotenvParserAgreesWithTaskAndMise(t *testing.T) {
	r := newRunner(t)
	var lines []string
	for i, l := range dotenvLines {
		lines = append(lines, fmt.Sprintf(l, i))
	}
	body := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(r.dir, ".env"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// A task that prints its whole environment, in the copy only.
	tf := filepath.Join(r.dir, "Taskfile.yml")
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tf, append(b, "\n  dump-env:\n    silent: true\n    cmds: [env]\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	viaTask := r.run(nil, r.taskBin, "dump-env")
	viaMise := r.miseEnv(t)
	entries, problems, err := dotenv.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ours := dotenv.Map(entries)
	if len(problems) != 0 {
		t.Errorf("our parser skipped %v", problems)
	}
	for i := range dotenvLines {
		k := fmt.Sprintf("V%d", i)
		tv, tok := viaTask[k]
		mv, mok := viaMise[k]
		// task prints the environment line by line: a value with a
		// newline shows up to its first line.
		if strings.Contains(ours[k], "\n") {
			if first, _, _ := strings.Cut(ours[k], "\n"); tv != first || mv != ours[k] {
				t.Errorf("%s (%s): ours %q, task %q (first line), mise %q", k, lines[i], ours[k], tv, mv)
			}
			continue
		}
		if !tok || !mok || tv != ours[k] || mv != ours[k] {
			t.Errorf("%s (%s): ours %q, task %q (set %v), mise %q (set %v)", k, lines[i], ours[k], tv, tok, mv, mok)
		}
	}
}

func (r *runner) miseEnv(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command(r.miseBin, "env", "--json")
	cmd.Dir, cmd.Env = r.dir, r.baseEnv
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("mise env --json: %v", err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("mise env --json: %v\n%s", err, raw)
	}
	return m
}

// Lines that are not KEY=value: mise refuses the whole file (task does too,
// except for a key starting with a digit, which it takes), so krops's
// parser reports each, and the toolbox refuses to start (exit 2).
func TestBadDotenvLinesAreRefusedLikeTask(t *testing.T) {
	r := newRunner(t)
	tf := filepath.Join(r.dir, "Taskfile.yml")
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tf, append(b, "\n  dump-env:\n    silent: true\n    cmds: [env]\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"1BAD=x", "BAD-KEY=x", "no equals sign", `Q="unterminated`} {
		if err := os.WriteFile(filepath.Join(r.dir, ".env"), []byte("GOOD=1\n"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(r.taskBin, "dump-env")
		cmd.Dir, cmd.Env = r.dir, r.baseEnv
		taskErr := cmd.Run()
		cmd = exec.Command(r.miseBin, "env", "--json")
		cmd.Dir, cmd.Env = r.dir, r.baseEnv
		miseErr := cmd.Run()
		_, problems, err := dotenv.Parse(strings.NewReader("GOOD=1\n" + line + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if miseErr == nil || (taskErr == nil) != (line == "1BAD=x") || len(problems) != 1 || problems[0].Line != 2 {
			t.Errorf("%q: mise error %v, task error %v; our problems %v", line, miseErr, taskErr, problems)
		}
	}
}

// mise installs only what a task needs: the air-gap tools (clusterctl,
// zarf) are airgap:build's own, so `mise run teardown` and the other
// lifecycle tasks, which install the current tool set, never fetch them.
func TestMiseInstallsOnlyWhatATaskNeeds(t *testing.T) {
	r := newRunner(t)
	cmd := exec.Command(r.miseBin, "ls", "--current", "--json")
	cmd.Dir, cmd.Env = r.dir, r.baseEnv
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("mise ls --current: %v", err)
	}
	current := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &current); err != nil {
		t.Fatalf("mise ls --current --json: %v\n%s", err, raw)
	}
	for _, airgapOnly := range []string{"clusterctl", "zarf"} {
		if _, ok := current[airgapOnly]; ok {
			t.Errorf("%s is in the base tool set: every task run would install it", airgapOnly)
		}
	}
	for _, needed := range []string{"go", "task"} {
		if _, ok := current[needed]; !ok {
			t.Errorf("%s is missing from the base tool set", needed)
		}
	}
	cmd = exec.Command(r.miseBin, "tasks", "info", "airgap:build", "--json")
	cmd.Dir, cmd.Env = r.dir, r.baseEnv
	raw, err = cmd.Output()
	if err != nil {
		t.Fatalf("mise tasks info: %v", err)
	}
	var info struct{ Tools map[string]string }
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	if info.Tools["clusterctl"] == "" || info.Tools["zarf"] == "" {
		t.Errorf("airgap:build's own tools: %v", info.Tools)
	}
}
