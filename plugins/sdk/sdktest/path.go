package sdktest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Engines are the container engine programs a test's stand-ins replace.
var Engines = []string{"docker", "podman", "nerdctl", "dockerd", "containerd", "ctr", "runc", "kind", "podman-remote"}

// NoEngineEnv points the engine CLIs' own connection variables nowhere, so
// a real docker or podman that a test reaches by mistake cannot talk to an
// engine running on the machine either.
var NoEngineEnv = []string{
	"DOCKER_HOST=unix:///nonexistent/krops-test-no-engine.sock",
	"DOCKER_CONTEXT=default",
}

// PathWithoutEngines is a PATH for a test that scripts its own container
// engine: first (the stand-ins' directories), then one directory of links to
// every program of the base PATH except the Engines. The base is the given
// PATH value, or this process's PATH when empty. A real docker or podman on
// the machine (the real-engine lane leaves one running) is then never run
// by a test that meant its stand-in, nor found where a test expects none.
func PathWithoutEngines(t testing.TB, base string, first ...string) string {
	t.Helper()
	if base == "" {
		base = os.Getenv("PATH")
	}
	skip := map[string]bool{}
	for _, e := range Engines {
		skip[e] = true
	}
	links := t.TempDir()
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(base) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if skip[name] || seen[name] || e.IsDir() {
				continue
			}
			seen[name] = true // the first on PATH wins, as in a lookup
			if err := os.Symlink(filepath.Join(dir, name), filepath.Join(links, name)); err != nil {
				t.Fatalf("linking %s for a PATH without engines: %v", name, err)
			}
		}
	}
	return strings.Join(append(append([]string{}, first...), links), string(os.PathListSeparator))
}
