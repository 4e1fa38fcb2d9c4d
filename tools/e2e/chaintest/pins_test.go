package chaintest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The task version is pinned in three places that must agree: the installer
// the README and CI use, the test driver that hands it to the chain tests,
// and mise.toml.
func TestTaskPinsAgree(t *testing.T) {
	m := regexp.MustCompile(`(?m)^TASK_VERSION=(v[0-9.]+)`).FindStringSubmatch(read(t, "tools/task.sh"))
	if m == nil {
		t.Fatal("tools/task.sh has no TASK_VERSION")
	}
	installer := m[1]
	if !strings.Contains(read(t, "tools/scripts/test.sh"), "task-"+installer) {
		t.Errorf("tools/scripts/test.sh does not use task %s", installer)
	}
	var mise struct {
		Tools map[string]any `toml:"tools"`
	}
	if err := toml.Unmarshal([]byte(read(t, "mise.toml")), &mise); err != nil {
		t.Fatal(err)
	}
	if got := mise.Tools["task"]; "v"+got.(string) != installer {
		t.Errorf("mise.toml pins task %v, tools/task.sh installs %s", got, installer)
	}
}

// Lifecycle tasks appear only when the binary behind them exists: every
// bin/<name> the Taskfile runs must be a workspace module with a main package.
func TestTaskfileRunsOnlyBinariesThatExist(t *testing.T) {
	taskfile := read(t, "Taskfile.yml")
	work := read(t, "go.work")
	for _, m := range regexp.MustCompile(`bin/(krops-[a-z0-9-]+)`).FindAllStringSubmatch(taskfile, -1) {
		name := m[1]
		found := false
		for _, dir := range []string{"tools/" + name, "plugins/" + strings.TrimPrefix(name, "krops-provider-")} {
			if strings.Contains(work, "./"+dir) {
				if _, err := os.Stat(filepath.Join(repoRoot, dir, "main.go")); err == nil {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("Taskfile.yml runs bin/%s, but no workspace module builds it", name)
		}
	}
}

// outsideWork are the tool modules kept out of go.work on purpose: their
// dependencies (Kubernetes, Flux and Cluster API at their own versions, the
// kind node image's builder, CAPA's IAM generator) would otherwise pin the
// workspace's.
var outsideWork = map[string]bool{
	filepath.Join("tools", "testbin"):           true,
	filepath.Join("tools", "realengine"):        true,
	filepath.Join("tools", "capa-iam-template"): true,
}

// Every module of the repository is in go.work, except outsideWork's.
func TestGoWorkListsEveryModule(t *testing.T) {
	work := read(t, "go.work")
	found := 0
	err := filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && rel != "." || outsideWork[rel]) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			found++
			dir := filepath.Dir(rel)
			if !strings.Contains(work, "./"+filepath.ToSlash(dir)+"\n") {
				t.Errorf("module %s is not in go.work", dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 2 {
		t.Errorf("found %d modules: the walk is not looking at the repository", found)
	}
}
