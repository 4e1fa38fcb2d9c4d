package chaintest

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type renovateConfig struct {
	EnabledManagers []string `json:"enabledManagers"`
	CustomManagers  []struct {
		FileMatch    []string `json:"fileMatch"`
		MatchStrings []string `json:"matchStrings"`
	} `json:"customManagers"`
	PackageRules []struct {
		GroupName         string   `json:"groupName"`
		MatchPackageNames []string `json:"matchPackageNames"`
	} `json:"packageRules"`
}

// loadRenovate reads renovate.json5, which this repository keeps to the
// JSON subset plus whole-line // comments.
func loadRenovate(t *testing.T) renovateConfig {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "renovate.json5"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			lines = append(lines, l)
		}
	}
	var c renovateConfig
	if err := json.Unmarshal([]byte(strings.Join(lines, "\n")), &c); err != nil {
		t.Fatalf("renovate.json5: %v", err)
	}
	return c
}

// pin is one version written in a file.
type pin struct {
	file  string
	line  int
	value string
}

// pins lists every version the repository pins outside go.mod, mise.toml
// [tools] and the Dockerfile's base images (which built-in managers read).
func pins(t *testing.T) []pin {
	t.Helper()
	var out []pin
	add := func(file string, re *regexp.Regexp, inDoc func(doc string) bool) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		line := 1
		for _, doc := range strings.SplitAfter(string(b), "\n---\n") {
			ok := inDoc == nil || inDoc(doc)
			for _, l := range strings.SplitAfter(doc, "\n") {
				if m := re.FindStringSubmatch(l); ok && m != nil {
					out = append(out, pin{file, line, m[1]})
				}
				if strings.HasSuffix(l, "\n") {
					line++
				}
			}
		}
	}
	versioned := regexp.MustCompile(`(?m)^kind: (\w+Provider|HelmRelease|HelmChartProxy)\s*$`)
	yamlVersion := regexp.MustCompile(`^\s+version: "?(v?[0-9][^"\s]*)"?\s*$`)
	for _, tree := range []string{"mgmt", "workload"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, tree), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
				add(strings.TrimPrefix(path, repoRoot+"/"), yamlVersion, versioned.MatchString)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	inCharts := false
	b, err := os.ReadFile(filepath.Join(repoRoot, "bootstrap.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "[") {
			inCharts = l == "[charts]"
			continue
		}
		if m := regexp.MustCompile(`^[a-z-]+ = "([^"]+)"`).FindStringSubmatch(l); inCharts && m != nil {
			out = append(out, pin{"bootstrap.toml", i + 1, m[1]})
		}
	}
	add("Taskfile.yml", regexp.MustCompile(`^  [A-Z_]+_VERSION: (\S+)\s*$`), nil)
	add("Dockerfile", regexp.MustCompile(`^ARG [A-Z_]+_VERSION=(\S+)\s*$`), nil)
	add("tools/task.sh", regexp.MustCompile(`^TASK_VERSION=(\S+?)(?:\s|$)`), nil)
	scripts, _ := filepath.Glob(filepath.Join(repoRoot, "tools", "testbin", "*.sh"))
	for _, f := range scripts {
		add(strings.TrimPrefix(f, repoRoot+"/"), regexp.MustCompile(`^version=(v[0-9]\S*)\s*$`), nil)
	}
	return out
}

// Every pin has a Renovate rule that finds it (its file matched, the
// custom manager's regex ending on its line with its value), the built-in
// managers cover go.mod, mise.toml and the Dockerfile, and pins that move
// together are grouped.
func TestRenovateCoversEveryPin(t *testing.T) {
	c := loadRenovate(t)
	for _, m := range []string{"gomod", "mise", "dockerfile", "custom.regex"} {
		if !strings.Contains(strings.Join(c.EnabledManagers, " "), m) {
			t.Errorf("manager %s is not enabled", m)
		}
	}
	all := pins(t)
	t.Logf("%d pins", len(all))
	if len(all) < 30 {
		t.Fatalf("only %d pins found; is the enumeration broken?", len(all))
	}
	contents := map[string]string{}
	for _, p := range all {
		if _, ok := contents[p.file]; !ok {
			b, err := os.ReadFile(filepath.Join(repoRoot, p.file))
			if err != nil {
				t.Fatal(err)
			}
			contents[p.file] = string(b)
		}
		if !covered(t, c, p, contents[p.file]) {
			t.Errorf("%s:%d: %s has no Renovate rule (add a `# renovate: datasource=... depName=...` line above it)", p.file, p.line, p.value)
		}
	}
	groups := map[string]string{}
	for _, r := range c.PackageRules {
		for _, n := range r.MatchPackageNames {
			groups[n] = r.GroupName
		}
	}
	for _, together := range [][]string{
		{"kubernetes-sigs/cluster-api", "sigs.k8s.io/cluster-api", "cluster-api-operator"},
		{"cert-manager", "quay.io/jetstack/**"},
		{"github.com/fluxcd/source-controller", "github.com/fluxcd/source-controller/api"},
		{"github.com/fluxcd/kustomize-controller", "github.com/fluxcd/kustomize-controller/api"},
		{"github.com/go-task/task/v3", "task"},
	} {
		for _, n := range together[1:] {
			if groups[n] == "" || groups[n] != groups[together[0]] {
				t.Errorf("%s and %s must be in one group (groups %q, %q)", together[0], n, groups[together[0]], groups[n])
			}
		}
	}
}

func covered(t *testing.T, c renovateConfig, p pin, content string) bool {
	for _, m := range c.CustomManagers {
		matched := false
		for _, fm := range m.FileMatch {
			if regexp.MustCompile(fm).MatchString(p.file) {
				matched = true
			}
		}
		if !matched {
			continue
		}
		for _, ms := range m.MatchStrings {
			re, err := regexp.Compile(ms)
			if err != nil {
				t.Fatalf("matchString %q: %v", ms, err)
			}
			value := re.SubexpIndex("currentValue")
			dep := re.SubexpIndex("depName")
			for _, loc := range re.FindAllStringSubmatchIndex(content, -1) {
				endLine := strings.Count(content[:loc[1]], "\n") + 1
				if endLine == p.line && content[loc[2*value]:loc[2*value+1]] == p.value && loc[2*dep] >= 0 {
					return true
				}
			}
		}
	}
	return false
}
