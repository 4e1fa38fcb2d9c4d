package testenv

import (
	"os"
	"strings"
	"testing"
)

// kustomize-controller removes the kustomization-* directories it finds in
// its TMPDIR when it starts. On the machine's shared /tmp those are the
// working directories of the kustomize-controllers other test packages run
// at the same time (a CI run failed on one vanishing mid-build), so each
// process must get a directory of its own.
func TestKustomizeControllerLeavesTheSharedTempDirAlone(t *testing.T) {
	probe, err := os.MkdirTemp("", "kustomization-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(probe) })
	c := APIServer(t, ClusterOptions{CRDs: []CRDSet{FluxSource, FluxKustomize}})
	flux := Flux(t, c)
	// The controller lists its stale directories before it reports ready,
	// and says so when there are any.
	if log := flux.Logs("kustomize-controller"); strings.Contains(log, "purging stale tmp dirs") {
		t.Errorf("kustomize-controller purged temporary directories it does not own:\n%s", log)
	}
	if _, err := os.Stat(probe); err != nil {
		t.Errorf("%s, another process's working directory, is gone: %v", probe, err)
	}
}
