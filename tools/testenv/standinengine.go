package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StandInEngine is a STAND-IN for the docker CLI (no engine runs in these
// tests): it answers what the docker provider asks to find a load
// balancer's published API port (`port <container> 6443/tcp`) from
// published (container name to host:port), and logs every call. Other
// calls fail, naming themselves.
type StandInEngine struct {
	// Dir holds the docker executable; put it on PATH.
	Dir string
}

// NewStandInEngine writes the stand-in.
func NewStandInEngine(t testing.TB, published map[string]string) *StandInEngine {
	t.Helper()
	dir := t.TempDir()
	var cases strings.Builder
	for name, addr := range published {
		cases.WriteString("\t" + name + ") echo '" + addr + "' ;;\n")
	}
	script := `#!/bin/sh
# STAND-IN for the docker CLI (testenv.NewStandInEngine).
echo "$*" >> "` + dir + `/log"
case "$1" in
info) exit 0 ;;
--version) echo "Docker version 28.2.2, build e6534b4" ;;
port)
	case "$2" in
` + cases.String() + `	*) echo "Error: No such container: $2" >&2; exit 1 ;;
	esac ;;
*) echo "stand-in engine: unexpected $*" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &StandInEngine{Dir: dir}
}

// Calls returns the calls made so far, one per line.
func (e *StandInEngine) Calls() string {
	b, _ := os.ReadFile(filepath.Join(e.Dir, "log"))
	return string(b)
}
