package enginenet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// standInEngine writes a STAND-IN engine executable: it records its argv
// and answers `network inspect` with canned output, as Docker and Podman
// print it.
func standInEngine(t *testing.T, inspect string) (bin, argvLog string) {
	t.Helper()
	dir := t.TempDir()
	argvLog = filepath.Join(dir, "argv")
	if err := os.WriteFile(filepath.Join(dir, "inspect.json"), []byte(inspect), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$*\" >> " + argvLog + "\ncase \"$1 $2\" in\n\"network inspect\") cat " + filepath.Join(dir, "inspect.json") + " ;;\nesac\n"
	bin = filepath.Join(dir, "docker")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argvLog
}

func network(bin string) Network {
	return Network{Run: func(ctx context.Context, args ...string) (proc.Result, error) {
		return proc.Exec{}.Run(ctx, proc.Cmd{Path: bin, Args: args, Env: []string{"PATH=/usr/bin:/bin"}})
	}}
}

func TestMembersFromTheInspection(t *testing.T) {
	docker := `[{"Name": "kind", "Containers": {"3f2a9c1b7d0e5a6b": {"Name": "toolbox"}, "9e8d7c6b5a4f": {"Name": "mgmt-control-plane"}}}]`
	bin, argv := standInEngine(t, docker)
	n := network(bin)
	got, err := n.Members(context.Background(), "kind")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "3f2a9c1b7d0e5a6b,9e8d7c6b5a4f,mgmt-control-plane,toolbox" {
		t.Errorf("members %v", got)
	}
	if err := n.Connect(context.Background(), "kind", "toolbox"); err != nil {
		t.Fatal(err)
	}
	if err := n.Disconnect(context.Background(), "kind", "toolbox"); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(argv)
	if string(log) != "network inspect kind\nnetwork connect kind toolbox\nnetwork disconnect kind toolbox\n" {
		t.Errorf("argv:\n%s", log)
	}
}

func TestAnEmptyOrUnreadableInspection(t *testing.T) {
	bin, _ := standInEngine(t, `[{"Name": "kind", "Containers": {}}]`)
	if got, err := network(bin).Members(context.Background(), "kind"); err != nil || len(got) != 0 {
		t.Errorf("empty network: %v %v", got, err)
	}
	bin, _ = standInEngine(t, `Error: no such network`)
	if _, err := network(bin).Members(context.Background(), "kind"); err == nil || !strings.Contains(err.Error(), "unreadable output") {
		t.Errorf("garbage must be an error, never an empty network: %v", err)
	}
}
