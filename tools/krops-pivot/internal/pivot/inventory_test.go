package pivot

import (
	"strings"
	"testing"
)

func TestInventoryProblems(t *testing.T) {
	inv := func(kv ...string) map[string]inventoryEntry {
		m := map[string]inventoryEntry{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = inventoryEntry{Key: kv[i], Version: kv[i+1]}
		}
		return m
	}
	source := inv("CoreProvider/cluster-api", "v1.14.2", "InfrastructureProvider/docker", "v1.14.2", "AddonProvider/helm", "v0.5.0")
	got := InventoryProblems(source, inv("CoreProvider/cluster-api", "v1.15.0", "InfrastructureProvider/docker", "v1.14.1", "BootstrapProvider/kubeadm", "v1.14.2"))
	want := []string{
		"AddonProvider/helm v0.5.0 is not installed on the management cluster",
		"InfrastructureProvider/docker is at v1.14.1 on the management cluster, older than v1.14.2 on kind",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Newer or equal on the target, and extra providers there, are fine.
	if p := InventoryProblems(source, inv("CoreProvider/cluster-api", "v1.14.2", "InfrastructureProvider/docker", "v1.14.3", "AddonProvider/helm", "v0.5.0", "IPAMProvider/in-cluster", "v1.0.0")); len(p) != 0 {
		t.Errorf("unexpected problems: %v", p)
	}
	if p := InventoryProblems(inv("CoreProvider/cluster-api", "main"), inv("CoreProvider/cluster-api", "dev")); len(p) != 1 || !strings.Contains(p[0], "cannot be compared") {
		t.Errorf("unparsable versions: %v", p)
	}
}

func TestForeignPaused(t *testing.T) {
	if got := foreignPaused([]string{"a", "b", "c"}, []string{"b"}); strings.Join(got, ",") != "a,c" {
		t.Errorf("got %v", got)
	}
}
