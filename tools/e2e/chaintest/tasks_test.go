package chaintest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kropsdev/krops/tools/testenv"
)

// The binaries a task may call. In these tests each is a STAND-IN script
// that records its argv (what is tested is which command each task runs
// with which arguments, through the real task and mise).
var recordedBinaries = []string{"krops-kind", "krops-flux-seed", "krops-pivot", "krops-sweep", "krops-orphans", "krops-sops", "krops-validate", "krops-airgap", "krops-access", "krops-aws"}

// recordingChain makes r's copy of the chain run recording stand-ins: a
// stand-in tools/scripts/build.sh writes them into bin/, and a stand-in
// tools/testbin/install.sh answers task validate's question for the API
// server's directory.
func recordingChain(t *testing.T, r *runner) (calls string) {
	t.Helper()
	calls = filepath.Join(r.dir, "calls.log")
	var build strings.Builder
	build.WriteString("#!/bin/sh\nset -e\nmkdir -p bin\n")
	for _, b := range recordedBinaries {
		build.WriteString("printf '#!/bin/sh\\necho \"" + b + " $*\" >> \"$KROPS_CALLS\"\\n' > bin/" + b + "\nchmod +x bin/" + b + "\n")
	}
	for name, content := range map[string]string{
		"tools/scripts/build.sh":   build.String(),
		"tools/testbin/install.sh": "#!/bin/sh\necho /stand-in/kubebuilder-assets\n",
	} {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return calls
}

// Every operator task runs its binary with the arguments given after the
// task name (mise) or after -- (task), and nothing else gets them.
func TestTasksPassTheirArgumentsToTheirBinary(t *testing.T) {
	r := newRunner(t)
	calls := recordingChain(t, r)
	for _, c := range []struct {
		argv []string
		want []string
	}{
		{[]string{r.miseBin, "-E", "local-host", "run", "bootstrap", "--recreate"},
			[]string{"krops-kind preflight", "krops-flux-seed preflight", "krops-kind up --recreate", "krops-flux-seed --from-bootstrap", "krops-pivot --from-bootstrap"}},
		{[]string{r.taskBin, "bootstrap", "ENV=local-host", "--", "--recreate"},
			[]string{"krops-kind preflight local-host", "krops-flux-seed preflight local-host", "krops-kind up local-host --recreate", "krops-flux-seed --from-bootstrap local-host", "krops-pivot --from-bootstrap local-host"}},
		{[]string{r.miseBin, "run", "kind", "--recreate"}, []string{"krops-kind up --recreate"}},
		{[]string{r.miseBin, "run", "teardown", "--dry-run"}, []string{"krops-sweep --dry-run"}},
		{[]string{r.miseBin, "-E", "local-host", "run", "oci-push"}, []string{"krops-flux-seed publish --reconcile"}},
		{[]string{r.taskBin, "oci-push", "ENV=local-host"}, []string{"krops-flux-seed publish local-host --reconcile"}},
		{[]string{r.miseBin, "-E", "local-host", "run", "kubeconfigs"}, []string{"krops-access kubeconfigs"}},
		{[]string{r.taskBin, "kubeconfigs", "ENV=aws", "--", "--dir", "/tmp/k"}, []string{"krops-access kubeconfigs aws --dir /tmp/k"}},
		{[]string{r.miseBin, "-E", "aws", "run", "mgmt-kubeconfig"}, []string{"krops-access mgmt-kubeconfig"}},
		{[]string{r.miseBin, "-E", "local-host", "run", "podinfo-port-forward", "--local-port", "8080"}, []string{"krops-access port-forward --local-port 8080"}},
		{[]string{r.miseBin, "-E", "aws", "run", "controller-credentials"}, []string{"krops-pivot controller-credentials"}},
		{[]string{r.miseBin, "-E", "aws", "run", "aws-bootstrap", "--dry-run"}, []string{"krops-aws bootstrap --dry-run"}},
		{[]string{r.taskBin, "aws-credentials", "ENV=aws", "--", "--write", "/tmp/c"}, []string{"krops-aws credentials aws --write /tmp/c"}},
		{[]string{r.miseBin, "run", "sops-keygen"}, []string{"krops-sops keygen"}},
		{[]string{r.miseBin, "run", "sops-encrypt", "mgmt/a.sops.yaml", "mgmt/b.sops.yaml"}, []string{"krops-sops encrypt mgmt/a.sops.yaml mgmt/b.sops.yaml"}},
		{[]string{r.miseBin, "run", "sops-decrypt", "--in-place", "mgmt/a.sops.yaml"}, []string{"krops-sops decrypt --in-place mgmt/a.sops.yaml"}},
		{[]string{r.miseBin, "run", "sops-updatekeys"}, []string{"krops-sops updatekeys"}},
		{[]string{r.miseBin, "run", "validate", "--skip-schema"}, []string{"krops-validate --skip-schema", "krops-airgap check"}},
	} {
		if err := os.Remove(calls); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
		cmd.Dir = r.dir
		cmd.Env = append(append([]string{}, r.baseEnv...), "KROPS_CALLS="+calls)
		out, err := cmd.CombinedOutput()
		cancel()
		name := filepath.Base(c.argv[0]) + " " + strings.Join(c.argv[1:], " ")
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
			continue
		}
		b, _ := os.ReadFile(calls)
		got := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := range got {
			got[i] = strings.TrimSpace(got[i]) // "$*" of no arguments
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s ran:\n  %s\nwant:\n  %s", name, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
}

// The operator's tasks exist under the same name in task and mise, each
// with a one-line description.
func TestOperatorTasksAreListedByTaskAndMise(t *testing.T) {
	r := newRunner(t)
	names := []string{"bootstrap", "kind", "seed", "pivot", "teardown", "orphans", "validate", "kubeconfigs", "mgmt-kubeconfig", "podinfo-port-forward", "controller-credentials", "oci-push", "sops-keygen", "sops-encrypt", "sops-decrypt", "sops-updatekeys"}
	listing := func(argv ...string) map[string]string {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = r.dir
		cmd.Env = r.baseEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
		got := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "* "))
			if len(f) > 1 {
				got[strings.TrimSuffix(f[0], ":")] = strings.Join(f[1:], " ")
			}
		}
		return got
	}
	viaTask := listing(r.taskBin, "--list")
	viaMise := listing(r.miseBin, "-E", "local-host", "tasks", "ls")
	for _, n := range names {
		if viaTask[n] == "" {
			t.Errorf("task --list has no described task %s", n)
		}
		if viaMise[n] == "" {
			t.Errorf("mise tasks has no described task %s", n)
		}
	}
}

// sops-keygen for real through mise and task: the real krops-sops writes
// the key in the checkout and prints its public key; a second run is
// refused with its own exit code (2), through the chain.
func TestSopsKeygenThroughTheChain(t *testing.T) {
	r := newRunner(t)
	real := testenv.BuildBinary(t, "../../krops-sops", "krops-sops")
	build := "#!/bin/sh\nset -e\nmkdir -p bin\ncp '" + real + "' bin/krops-sops\n"
	p := filepath.Join(r.dir, "tools", "scripts", "build.sh")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(build), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(argv ...string) (string, int) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = r.dir, r.baseEnv
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("%v: %v", argv, err)
		return "", -1
	}
	out, code := run(r.miseBin, "run", "sops-keygen")
	if code != 0 || !regexp.MustCompile(`Public key: age1[0-9a-z]{58}`).MatchString(out) {
		t.Fatalf("mise run sops-keygen: exit %d\n%s", code, out)
	}
	if st, err := os.Stat(filepath.Join(r.dir, "age.agekey")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("age.agekey: %v %v", st, err)
	}
	for _, argv := range [][]string{{r.miseBin, "run", "sops-keygen"}, {r.taskBin, "--exit-code", "sops-keygen"}} {
		if out, code := run(argv...); code != 2 || !strings.Contains(out, "never replaces") {
			t.Errorf("%s again: exit %d, want 2\n%s", filepath.Base(argv[0]), code, out)
		}
	}
}
