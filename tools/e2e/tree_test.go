package e2e_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chain this package runs is Taskfile.yml's bootstrap, command for
// command: a change to the task has to show up here.
func TestBootstrapMirrorsTheTaskfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tasks map[string]struct {
			Cmds []any `json:"cmds"`
		} `json:"tasks"`
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	var fromTask []string
	for _, c := range tf.Tasks["bootstrap"].Cmds {
		s, ok := c.(string)
		if !ok {
			t.Fatalf("bootstrap has a command that is not a plain string: %v", c)
		}
		// The e2e passes no arguments after --: {{.CLI_ARGS}} is empty.
		fromTask = append(fromTask, strings.NewReplacer("{{.BIN}}/", "", "{{.ENV}}", "local-host", " {{.CLI_ARGS}}", "").Replace(s))
	}
	var ours []string
	for _, argv := range bootstrapChain(nil, nil) {
		ours = append(ours, strings.Join(argv, " "))
	}
	if strings.Join(fromTask, "\n") != strings.Join(ours, "\n") {
		t.Errorf("Taskfile.yml's bootstrap:\n%s\nthe e2e chain:\n%s", strings.Join(fromTask, "\n"), strings.Join(ours, "\n"))
	}
}

// The e2e tree provisions mgmt/local-host's own Cluster objects: only the
// ClusterClasses behind them differ (in-memory instead of Docker).
func TestE2ETreeProvisionsLocalHostsClusters(t *testing.T) {
	real := filepath.Join(repo, "mgmt", "local-host", "clusters")
	e2e := filepath.Join(repo, "mgmt", "local-host-e2e", "clusters")
	for _, f := range []string{"kustomization.yaml", "local-management.yaml", "local-workload.yaml"} {
		a, err := os.ReadFile(filepath.Join(real, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(e2e, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("mgmt/local-host-e2e/clusters/%s differs from mgmt/local-host/clusters/%s: copy it over", f, f)
		}
	}
}
