package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInCIHonoursWhatCISystemsSet(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{"CI": "true"}, true},
		{map[string]string{"CI": "True"}, true},
		{map[string]string{"CI": "1"}, true},
		{map[string]string{"CI": "yes"}, true},
		{map[string]string{"CI": "woodpecker"}, true},
		{map[string]string{"TF_BUILD": "True"}, true},
		{map[string]string{"JENKINS_URL": "https://ci.example/"}, true},
		{map[string]string{}, false},
		{map[string]string{"CI": ""}, false},
		{map[string]string{"CI": "false"}, false},
		{map[string]string{"CI": "0"}, false},
		{map[string]string{"CI": " FALSE "}, false},
		{map[string]string{"CI": "off"}, false},
	} {
		if got := inCI(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("inCI(%v) = %t, want %t", c.env, got, c.want)
		}
	}
}

// While the scripts still build the testbin programs, a test needing one
// records itself for the rerun and skips; the record is the package's
// directory and the top-level test's name (a subtest reruns its parent),
// one line per deferral.
func TestMissingTestbinDefersToTheRerun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "deferred")
	t.Setenv("KROPS_TESTBIN_DEFER", file)
	var skipped bool
	t.Run("needs kube-apiserver", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		MissingTestbin(t, "kube-apiserver", "build it")
	})
	if !skipped {
		t.Fatal("the test was not skipped")
	}
	b, err := os.ReadFile(file)
	wd, _ := os.Getwd()
	want := wd + "\tTestMissingTestbinDefersToTheRerun\n"
	if err != nil || string(b) != want {
		t.Errorf("recorded %q (%v), want %q", b, err, want)
	}
}
