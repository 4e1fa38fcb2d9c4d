package chaintest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/tools/kit/config"
	"github.com/kropsdev/krops/tools/testenv"
)

// repoRoot is the repository root relative to this package.
const repoRoot = "../../.."

// chainFiles are the files that define the chain; the test runs copies so its
// .env never touches the working tree.
var chainFiles = []string{"Taskfile.yml", ".taskrc.yml", "mise.toml", "mise.aws.toml", "mise.local-host.toml"}

func copyChain(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range chainFiles {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type runner struct {
	t       *testing.T
	dir     string
	taskBin string
	miseBin string
	baseEnv []string
}

func newRunner(t *testing.T) *runner {
	taskBin := testenv.Program(t, "KROPS_TASK_BIN", "task", "run tests through `tools/task.sh test`, which installs the pinned task")
	miseBin := testenv.Program(t, "KROPS_MISE_BIN", "mise", "run `tools/task.sh tools`, which installs the pinned mise from npm")
	dir := copyChain(t)
	state := t.TempDir()
	// mise gets private state directories, trusts only the copy, and stays
	// offline: the machine has no route to the tool registries, and the
	// test is about environment handling, not tool installs.
	env := []string{
		"HOME=" + state,
		"PATH=" + filepath.Dir(taskBin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"MISE_DATA_DIR=" + filepath.Join(state, "data"),
		"MISE_CACHE_DIR=" + filepath.Join(state, "cache"),
		"MISE_STATE_DIR=" + filepath.Join(state, "state"),
		"MISE_CONFIG_DIR=" + filepath.Join(state, "config"),
		"MISE_TRUSTED_CONFIG_PATHS=" + dir,
		"MISE_OFFLINE=1",
		"MISE_AUTO_INSTALL=0",
		"MISE_TASK_RUN_AUTO_INSTALL=0",
		"NO_COLOR=1",
	}
	return &runner{t: t, dir: dir, taskBin: taskBin, miseBin: miseBin, baseEnv: env}
}

func (r *runner) run(extraEnv map[string]string, bin string, args ...string) map[string]string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = r.dir
	cmd.Env = append([]string{}, r.baseEnv...)
	for k, v := range extraEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", bin, args, err, stdout.String(), stderr.String())
	}
	seen := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			seen[k] = v
		}
	}
	if len(seen) == 0 {
		r.t.Fatalf("%s %v printed no variables:\n%s\n%s", bin, args, stdout.String(), stderr.String())
	}
	return seen
}

func TestDotenvWinsTheSameWayInTaskAndMise(t *testing.T) {
	r := newRunner(t)
	dotenv := strings.Join([]string{
		"# comments and blank lines are ignored",
		"",
		"KROPS_KIND_CLUSTER=from-dotenv",
		`REGISTRY_PORT="6001"`,
		"OCI_REPOSITORY='quoted repo'",
		"GITHUB_TOKEN=ghp_from_dotenv",
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(r.dir, ".env"), []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	process := map[string]string{
		"KROPS_KIND_CLUSTER": "from-process", // also in .env: .env must win
		"OCI_TAG":            "from-process", // only in the process: passes through
		"REGISTRY_PORT":      "7000",
	}
	viaTask := r.run(process, r.taskBin, "env")
	viaMise := r.run(process, r.miseBin, "run", "env")

	want := map[string]string{
		"KROPS_KIND_CLUSTER": "from-dotenv",
		"REGISTRY_PORT":      "6001",
		"OCI_REPOSITORY":     "quoted repo",
		"OCI_TAG":            "from-process",
		"GITHUB_TOKEN":       "<set>", // masked by `task env`
		"KROPS_PROFILE":      "",
	}
	for name, res := range map[string]map[string]string{"task": viaTask, "mise": viaMise} {
		for k, v := range want {
			if res[k] != v {
				t.Errorf("%s sees %s=%q, want %q", name, k, res[k], v)
			}
		}
	}
	for _, k := range sortedKnobs() {
		if viaTask[k] != viaMise[k] {
			t.Errorf("%s differs: task sees %q, mise sees %q", k, viaTask[k], viaMise[k])
		}
	}
	for _, res := range []map[string]string{viaTask, viaMise} {
		for _, v := range res {
			if strings.Contains(v, "ghp_from_dotenv") {
				t.Error("task env printed a secret")
			}
		}
	}
}

func TestMiseEnvironmentLayersSetTheProfile(t *testing.T) {
	r := newRunner(t)
	for _, env := range []string{"aws", "local-host"} {
		got := r.run(nil, r.miseBin, "-E", env, "run", "env")
		if got["KROPS_PROFILE"] != env {
			t.Errorf("mise -E %s: KROPS_PROFILE=%q", env, got["KROPS_PROFILE"])
		}
	}
}

func TestTaskEnvListsEveryKnob(t *testing.T) {
	r := newRunner(t)
	got := r.run(nil, r.taskBin, "env")
	for _, k := range sortedKnobs() {
		if _, ok := got[k]; !ok {
			t.Errorf("task env does not show %s", k)
		}
	}
	if len(got) != len(sortedKnobs()) {
		t.Errorf("task env shows %d variables, KnobTable has %d", len(got), len(sortedKnobs()))
	}
}

func sortedKnobs() []string {
	var names []string
	for _, k := range config.KnobTable() {
		names = append(names, k.Env)
	}
	return names
}
