package sdktest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Recorder is a STAND-IN executable for a program that cannot run on the
// test machines (mise with cloud credentials, a cloud CLI): it records the
// working directory and argv of every call and exits 0.
type Recorder struct {
	// Dir holds the executable; put it first in the plugin's PATH.
	Dir string
	log string
}

// NewRecorder writes a recording stand-in named name.
func NewRecorder(t testing.TB, name string) *Recorder {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.log")
	script := "#!/bin/sh\n# STAND-IN for " + name + ": records cwd and argv.\nprintf '%s|%s\\n' \"$PWD\" \"$*\" >> '" + log + "'\necho \"stand-in " + name + " ran\"\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Recorder{Dir: dir, log: log}
}

// Calls returns "cwd|args" per call, in order.
func (r *Recorder) Calls() []string {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
