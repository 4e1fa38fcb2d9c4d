package fluxbuild

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// A root that lists a file from a sibling directory builds as Flux builds it,
// where kustomize's own defaults refuse it.
func TestFilesOutsideTheRootLoadAsInFlux(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	for p, body := range map[string]string{
		"/repo/air/kustomization.yaml": "resources:\n- ../tree/cm.yaml\n",
		"/repo/tree/cm.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n",
	} {
		if err := fs.WriteFile(p, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/repo/air"); err == nil || !strings.Contains(err.Error(), "security") {
		t.Fatalf("kustomize's defaults should refuse the file outside the root: %v", err)
	}
	res, err := Build(fs, "/repo/air")
	if err != nil {
		t.Fatal(err)
	}
	if rs := res.Resources(); len(rs) != 1 || rs[0].GetName() != "shared" {
		t.Fatalf("built %v", rs)
	}
}
