package chaintest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tools/scripts/build.sh, the first command of every task of the chain,
// skips a build whose inputs did not change. The test runs the real script
// with the real go and git on a small workspace laid out as the
// repository's is (a tool, a provider plugin, a library, a main package
// below a module's root), and checks that it skips exactly when nothing it
// depends on changed: never after an edit, a new version, a binary removed
// from bin/ or a failed build.
func TestBuildSkipsOnlyWhatDidNotChange(t *testing.T) {
	for _, tool := range []string{"go", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: this test runs the real build script, which needs it", tool)
		}
	}
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, script := range []string{"build.sh", "modules.sh"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "tools", "scripts", script))
		if err != nil {
			t.Fatal(err)
		}
		write("tools/scripts/"+script, string(b))
	}
	write("go.work", "go 1.26.0\n\nuse (\n\t./plugins/b\n\t./tools/krops-a\n\t./tools/lib\n)\n")
	mod := func(path string) string { return "module example.com/" + path + "\n\ngo 1.26.0\n" }
	const mainGo = "package main\n\nimport \"fmt\"\n\nvar version = \"none\"\n\nfunc main() { fmt.Println(version) }\n"
	write("tools/krops-a/go.mod", mod("tools/krops-a"))
	write("tools/krops-a/main.go", mainGo)
	write("tools/krops-a/cmd/helper/main.go", "package main\n\nfunc main() {}\n")
	write("plugins/b/go.mod", mod("plugins/b"))
	write("plugins/b/main.go", mainGo)
	write("tools/lib/go.mod", mod("tools/lib"))
	const libGo = "package lib\n\n// Answer is what the library has.\nconst Answer = 42\n"
	write("tools/lib/lib.go", libGo)
	write(".gitignore", "/bin/\n/.krops/\n")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=krops test", "-c", "user.email=test@krops.invalid"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "workspace")

	// build runs the script and says whether it skipped the build.
	build := func(version string) (skipped bool, code int, out string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "tools", "scripts", "build.sh"), version)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=", "GOFLAGS=", "GOTOOLCHAIN=local")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("build.sh %s did not finish within 5 minutes:\n%s", version, buf.String())
		}
		code = cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatalf("build.sh %s: %v", version, err)
		}
		return strings.Contains(buf.String(), "(unchanged)"), code, buf.String()
	}
	mustBuild := func(what, version string, wantSkip bool) {
		t.Helper()
		skipped, code, out := build(version)
		if code != 0 {
			t.Fatalf("%s: build.sh %s exit %d, want 0\n%s", what, version, code, out)
		}
		if skipped != wantSkip {
			t.Fatalf("%s: build.sh %s skipped=%v, want %v\n%s", what, version, skipped, wantSkip, out)
		}
		for _, name := range []string{"krops-a", "krops-provider-b"} {
			got, err := exec.Command(filepath.Join(dir, "bin", name)).Output()
			if err != nil {
				t.Fatalf("%s: bin/%s: %v", what, name, err)
			}
			if strings.TrimSpace(string(got)) != version {
				t.Fatalf("%s: bin/%s says %q, want the version %q", what, name, got, version)
			}
		}
	}

	mustBuild("first build", "v1", false)
	mustBuild("nothing changed", "v1", true)
	write("tools/lib/lib.go", libGo+"\n// Another comment changes the content.\n")
	mustBuild("a library edited", "v1", false)
	mustBuild("nothing changed since the edit", "v1", true)
	mustBuild("another version", "v2", false)
	write("tools/lib/extra.go", "package lib\n\n// Extra is a new file.\nconst Extra = 1\n")
	mustBuild("a file added", "v2", false)
	if err := os.Remove(filepath.Join(dir, "tools", "lib", "extra.go")); err != nil {
		t.Fatal(err)
	}
	mustBuild("a file removed", "v2", false)
	if err := os.Remove(filepath.Join(dir, "bin", "krops-provider-b")); err != nil {
		t.Fatal(err)
	}
	mustBuild("a binary removed from bin/", "v2", false)
	write("README.txt", "outside every module\n")
	mustBuild("a file outside the modules", "v2", true)

	// A compile error fails the build every time, in a library and in a main
	// package below a module's root (checked, not linked); once mended,
	// the build runs again before it is ever skipped.
	for _, broken := range []string{"tools/lib/lib.go", "tools/krops-a/cmd/helper/main.go"} {
		good, err := os.ReadFile(filepath.Join(dir, broken))
		if err != nil {
			t.Fatal(err)
		}
		write(broken, string(good)+"\nfunc broken( {\n")
		for range 2 {
			if skipped, code, out := build("v2"); code == 0 || skipped {
				t.Fatalf("%s broken: build.sh exit %d (skipped=%v), want a failure\n%s", broken, code, skipped, out)
			} else if !strings.Contains(out, filepath.Base(broken)) {
				t.Fatalf("%s broken: the failure does not name the file:\n%s", broken, out)
			}
		}
		write(broken, string(good))
		mustBuild(broken+" mended", "v2", false)
		mustBuild("nothing changed since "+broken+" was mended", "v2", true)
	}
}
