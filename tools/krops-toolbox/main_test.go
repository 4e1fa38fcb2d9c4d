package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kropsdev/krops/plugins/sdk/sdktest"
	"github.com/kropsdev/krops/tools/testenv"
)

// No container engine runs here: "docker" and "podman" on PATH are
// STAND-INS that answer the engine queries the toolbox makes and record
// the `run` it issues (its argv, and the environment it was given).

var builds *testenv.Builds

func TestMain(m *testing.M) {
	b, err := testenv.NewBuilds()
	if err != nil {
		panic(err)
	}
	builds = b
	sdktest.Main(m, b.Remove)
}

const standInEngine = `#!/bin/sh
# STAND-IN for the __ENGINE__ CLI: answers the queries, records "run".
case "$1" in
  info)
    if [ "$2" = "--format" ]; then
      case "$3" in
        *RemoteSocket*) echo "$STANDIN_PODMAN_SOCKET" ;;
        *) echo "$STANDIN_OS" ;;
      esac
    fi
    exit 0 ;;
  --version) echo "__ENGINE__ version 0.0.0-standin"; exit 0 ;;
  context) echo "$STANDIN_CONTEXT_HOST"; exit 0 ;;
  network) [ "$2" = inspect ] && [ -n "$STANDIN_KIND_NETWORK" ] && exit 0; echo "Error: No such network: $3" >&2; exit 1 ;;
  run)
    shift
    printf '%s\n' "$@" > "$STANDIN_LOG"
    printf 'GITHUB_TOKEN=%s\nAWS_SECRET_ACCESS_KEY=%s\nKROPS_OCI_SOURCE_URL=%s\n' "$GITHUB_TOKEN" "$AWS_SECRET_ACCESS_KEY" "$KROPS_OCI_SOURCE_URL" > "$STANDIN_LOG.env"
    exit "${STANDIN_EXIT:-0}" ;;
esac
exit 1
`

type site struct {
	repo, bin, engines, log string
}

func newSite(t *testing.T, engines ...string) site {
	t.Helper()
	s := site{repo: t.TempDir(), bin: builds.Binary(t, ".", "krops-toolbox"), engines: t.TempDir()}
	s.log = filepath.Join(t.TempDir(), "run.log")
	for _, e := range engines {
		body := strings.ReplaceAll(standInEngine, "__ENGINE__", e)
		if err := os.WriteFile(filepath.Join(s.engines, e), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s site) run(t *testing.T, env []string, args ...string) (testenv.Result, []string, map[string]string) {
	t.Helper()
	base := append([]string{"PATH=" + sdktest.PathWithoutEngines(t, "/usr/bin:/bin", s.engines), "HOME=" + s.repo, "STANDIN_LOG=" + s.log}, sdktest.NoEngineEnv...)
	r := testenv.RunBinary(t, s.repo, append(base, env...), s.bin, args...)
	b, _ := os.ReadFile(s.log)
	argv := strings.Split(strings.TrimSpace(string(b)), "\n")
	seen := map[string]string{}
	if b, err := os.ReadFile(s.log + ".env"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			seen[k] = v
		}
	}
	return r, argv, seen
}

func has(argv []string, pair ...string) bool {
	for i := 0; i+len(pair) <= len(argv); i++ {
		if strings.Join(argv[i:i+len(pair)], "\x00") == strings.Join(pair, "\x00") {
			return true
		}
	}
	return false
}

func TestDockerRunPassesSecretsByNameAndForcesTheInsidePaths(t *testing.T) {
	s := newSite(t, "docker")
	dotenv := "GITHUB_TOKEN=ghp_from_dotenv\nKROPS_PROFILE=aws\n"
	if err := os.WriteFile(filepath.Join(s.repo, ".env"), []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	r, argv, seen := s.run(t, []string{
		"STANDIN_CONTEXT_HOST=unix:///run/user/1000/docker.sock", "STANDIN_EXIT=3",
		"GITHUB_TOKEN=ghp_from_process", "AWS_SECRET_ACCESS_KEY=aws_secret_value", "KUBECONFIG=/elsewhere/config",
		"UNRELATED_SECRET=not_forwarded",
	}, "run", "--image", "toolbox:test", "--", "bootstrap", "ENV=aws")
	if r.Code != 3 {
		t.Errorf("exit %d, want the task's 3:\n%s", r.Code, r.Stderr)
	}
	for _, pair := range [][]string{
		{"-v", s.repo + ":/workspace"}, {"-w", "/workspace"},
		{"-v", "/run/user/1000/docker.sock:/var/run/docker.sock"}, // rootless Docker: the context's socket
		{"-e", "GITHUB_TOKEN"}, {"-e", "AWS_SECRET_ACCESS_KEY"}, {"-e", "KROPS_PROFILE"},
		{"-e", "KUBECONFIG=/workspace/.kube/config"}, {"-e", "KROPS_TOOLBOX=1"}, {"-e", "ENGINE_SOCK=/var/run/docker.sock"},
		{"toolbox:test", "bootstrap", "ENV=aws"},
	} {
		if !has(argv, pair...) {
			t.Errorf("argv lacks %q:\n%s", pair, strings.Join(argv, "\n"))
		}
	}
	joined := strings.Join(argv, " ")
	for _, secret := range []string{"ghp_from_dotenv", "ghp_from_process", "aws_secret_value", "not_forwarded", "UNRELATED_SECRET"} {
		if strings.Contains(joined, secret) || strings.Contains(r.Stderr, secret) {
			t.Errorf("%s appears in argv or output", secret)
		}
	}
	// The engine got the values by name, and .env won over the process.
	if seen["GITHUB_TOKEN"] != "ghp_from_dotenv" || seen["AWS_SECRET_ACCESS_KEY"] != "aws_secret_value" {
		t.Errorf("the engine saw %v", seen)
	}
	if !strings.Contains(r.Stderr, "KUBECONFIG=/elsewhere/config is replaced by /workspace/.kube/config") {
		t.Errorf("no warning about the forced KUBECONFIG:\n%s", r.Stderr)
	}
	if st, err := os.Stat(filepath.Join(s.repo, ".kube")); err != nil || !st.IsDir() {
		t.Error(".kube/ was not created for persistence")
	}
}

func TestSocketPerEngine(t *testing.T) {
	cases := []struct {
		name    string
		engines []string
		env     []string
		want    string
	}{
		{"Docker Desktop", []string{"docker"}, []string{"STANDIN_OS=Docker Desktop", "STANDIN_CONTEXT_HOST=unix:///Users/me/.docker/run/docker.sock"}, "/var/run/docker.sock:/var/run/docker.sock"},
		{"Docker, default context", []string{"docker"}, []string{"STANDIN_CONTEXT_HOST=unix:///var/run/docker.sock"}, "/var/run/docker.sock:/var/run/docker.sock"},
		{"rootless Podman", []string{"podman"}, []string{"STANDIN_PODMAN_SOCKET=unix:///run/user/1000/podman/podman.sock"}, "/run/user/1000/podman/podman.sock:/var/run/docker.sock"},
		{"ENGINE_SOCK wins", []string{"docker"}, []string{"ENGINE_SOCK=/custom/engine.sock"}, "/custom/engine.sock:/var/run/docker.sock"},
	}
	for _, tc := range cases {
		s := newSite(t, tc.engines...)
		r, argv, _ := s.run(t, tc.env, "run", "--", "env")
		if r.Code != 0 || !has(argv, "-v", tc.want) {
			t.Errorf("%s: exit %d, argv:\n%s\n%s", tc.name, r.Code, strings.Join(argv, "\n"), r.Stderr)
		}
		if tc.engines[0] == "podman" && !has(argv, "-e", "CONTAINER_HOST=unix:///var/run/docker.sock") {
			t.Errorf("%s: podman-remote inside needs CONTAINER_HOST:\n%s", tc.name, strings.Join(argv, "\n"))
		}
	}
}

func TestHostFilesAreMountedAndRewritten(t *testing.T) {
	s := newSite(t, "docker")
	outside := filepath.Join(t.TempDir(), "age.key")
	inside := filepath.Join(s.repo, "secrets", "mgmt.kubeconfig")
	for _, f := range []string{outside, inside} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, argv, _ := s.run(t, []string{"AGE_KEY_FILE=" + outside, "MGMT_KUBECONFIG=" + inside}, "run", "--", "pivot")
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	for _, pair := range [][]string{
		{"-v", outside + ":/run/krops/files/age.key:ro"}, {"-e", "AGE_KEY_FILE=/run/krops/files/age.key"},
		{"-e", "MGMT_KUBECONFIG=/workspace/secrets/mgmt.kubeconfig"},
	} {
		if !has(argv, pair...) {
			t.Errorf("argv lacks %q:\n%s", pair, strings.Join(argv, "\n"))
		}
	}
	r, _, _ = s.run(t, []string{"AGE_KEY_FILE=/nonexistent/age.key"}, "run", "--", "pivot")
	if r.Code != 2 || !strings.Contains(r.Stderr, "AGE_KEY_FILE=/nonexistent/age.key") {
		t.Errorf("a missing host file: exit %d:\n%s", r.Code, r.Stderr)
	}

	// The configuration resolves the trees beside itself: inside the
	// repository it is rewritten, outside it is refused before anything
	// runs (a mount of the file alone would bring no trees along).
	conf := filepath.Join(s.repo, "envs", "bootstrap.toml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("# x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, argv, _ = s.run(t, []string{"BOOTSTRAP_CONFIG=" + conf}, "run", "--", "bootstrap")
	if r.Code != 0 || !has(argv, "-e", "BOOTSTRAP_CONFIG=/workspace/envs/bootstrap.toml") {
		t.Errorf("BOOTSTRAP_CONFIG inside the repository: exit %d, argv:\n%s\n%s", r.Code, strings.Join(argv, "\n"), r.Stderr)
	}
	_ = os.Remove(s.log)
	r, _, _ = s.run(t, []string{"BOOTSTRAP_CONFIG=" + outside}, "run", "--", "bootstrap")
	if r.Code != 2 || !strings.Contains(r.Stderr, "BOOTSTRAP_CONFIG="+outside+" is outside the repository") {
		t.Errorf("BOOTSTRAP_CONFIG outside the repository: exit %d:\n%s", r.Code, r.Stderr)
	}
	if b, err := os.ReadFile(s.log); err == nil && strings.Contains(string(b), "run") {
		t.Errorf("a refused configuration still ran the container:\n%s", b)
	}
}

// The kind network is joined only when it exists (before the first kind
// cluster docker run would refuse it; krops-kind joins from inside); a
// management kubeconfig outside the repository gets its directory mounted
// read-write, since the pivot writes it; the artifact's source is read from
// the checkout here and passed by name.
func TestNetworkOutputFileAndSource(t *testing.T) {
	s := newSite(t, "docker")
	r, argv, _ := s.run(t, nil, "run", "--", "bootstrap")
	if r.Code != 0 || slices.Contains(argv, "--network") {
		t.Errorf("no kind network yet: exit %d, argv:\n%s\n%s", r.Code, strings.Join(argv, "\n"), r.Stderr)
	}
	r, argv, _ = s.run(t, []string{"STANDIN_KIND_NETWORK=1"}, "run", "--", "teardown")
	if r.Code != 0 || !has(argv, "--network", "kind") {
		t.Errorf("a kind network: exit %d, argv:\n%s\n%s", r.Code, strings.Join(argv, "\n"), r.Stderr)
	}

	kubeDir := t.TempDir()
	r, argv, _ = s.run(t, []string{"MGMT_KUBECONFIG=" + filepath.Join(kubeDir, "mgmt.yaml")}, "run", "--", "pivot")
	if r.Code != 0 || !has(argv, "-v", kubeDir+":/run/krops/mgmt") || !has(argv, "-e", "MGMT_KUBECONFIG=/run/krops/mgmt/mgmt.yaml") {
		t.Errorf("MGMT_KUBECONFIG outside the repository, not yet written: exit %d, argv:\n%s\n%s", r.Code, strings.Join(argv, "\n"), r.Stderr)
	}
	r, argv, _ = s.run(t, []string{"ORPHAN_REPORT_JSON=" + filepath.Join(kubeDir, "orphans.json")}, "run", "--", "orphans")
	if r.Code != 0 || !has(argv, "-v", kubeDir+":/run/krops/report") || !has(argv, "-e", "ORPHAN_REPORT_JSON=/run/krops/report/orphans.json") {
		t.Errorf("ORPHAN_REPORT_JSON outside the repository: exit %d, argv:\n%s\n%s", r.Code, strings.Join(argv, "\n"), r.Stderr)
	}
	r, _, _ = s.run(t, []string{"MGMT_KUBECONFIG=/nonexistent/dir/mgmt.yaml"}, "run", "--", "pivot")
	if r.Code != 2 || !strings.Contains(r.Stderr, "MGMT_KUBECONFIG=/nonexistent/dir/mgmt.yaml: its directory /nonexistent/dir must exist") {
		t.Errorf("a missing directory: exit %d:\n%s", r.Code, r.Stderr)
	}

	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x"},
		{"remote", "add", "origin", "https://x-access-token:ghp_in_remote@github.com/kropsdev/krops.git"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", s.repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	r, argv, seen := s.run(t, nil, "run", "--", "bootstrap")
	if r.Code != 0 || !has(argv, "-e", "KROPS_OCI_GIT_SHA") || !has(argv, "-e", "KROPS_OCI_GIT_REF") || !has(argv, "-e", "KROPS_OCI_SOURCE_URL") ||
		seen["KROPS_OCI_SOURCE_URL"] != "https://github.com/kropsdev/krops.git" || strings.Contains(strings.Join(argv, " ")+r.Stderr, "ghp_in_remote") {
		t.Errorf("the checkout's source: exit %d, seen %v, argv:\n%s\n%s", r.Code, seen, strings.Join(argv, "\n"), r.Stderr)
	}
}

func TestRefusals(t *testing.T) {
	s := newSite(t) // no engine at all
	r, _, _ := s.run(t, nil, "run", "--", "bootstrap")
	if r.Code != 2 || !strings.Contains(r.Stderr, "no container engine answers") {
		t.Errorf("no engine: exit %d:\n%s", r.Code, r.Stderr)
	}
	s = newSite(t, "docker")
	if err := os.WriteFile(filepath.Join(s.repo, ".env"), []byte("OK=1\nBAD-KEY=ghp_secret_in_bad_line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _, _ = s.run(t, nil, "run", "--", "bootstrap")
	if r.Code != 2 || !strings.Contains(r.Stderr, "line 2") || strings.Contains(r.Stderr, "ghp_secret_in_bad_line") {
		t.Errorf("bad .env: exit %d:\n%s", r.Code, r.Stderr)
	}
}

// The repository's Dockerfile follows the pin rule, builds with the same
// script as `task build`, and carries what the tasks call.
func TestTheDockerfile(t *testing.T) {
	s := newSite(t)
	r := testenv.RunBinary(t, "../..", []string{"PATH=/usr/bin:/bin", "HOME=" + s.repo}, s.bin, "pins")
	if r.Code != 0 {
		t.Fatalf("pins: exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"tools/scripts/build.sh", "task", "@jdxcode/mise", "docker-cli", "podman-remote", "git", "ca-certificates",
		`AWS_PAGER=""`, "KROPS_TOOLBOX=1", "ENTRYPOINT", "TARGETARCH"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{".env", "*.agekey", ".kube/", ".krops/"} {
		if !strings.Contains(string(ignore), secret+"\n") {
			t.Errorf(".dockerignore must keep %s out of the image", secret)
		}
	}
}

// Pending images fail a release check; --resolve reads the digest from a
// real registry (on loopback), writes it in and drops the marker.
func TestPinsResolveAndReleaseCheck(t *testing.T) {
	s := newSite(t)
	reg := testenv.Registry(t)
	ref := reg.Host + "/library/base:1.0"
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	df := filepath.Join(s.repo, "Dockerfile")
	if err := os.WriteFile(df, []byte("# pin: pending\nARG BASE_IMAGE="+ref+"\nFROM ${BASE_IMAGE} AS build\nFROM build\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + s.repo}
	if r := testenv.RunBinary(t, s.repo, env, s.bin, "pins", "--release"); r.Code != 2 || !strings.Contains(r.Stderr, "1 base images of Dockerfile are pending") {
		t.Errorf("release check with a pending image: exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := testenv.RunBinary(t, s.repo, env, s.bin, "pins", "--resolve", "--insecure", "--release"); r.Code != 0 {
		t.Fatalf("resolve: exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	b, _ := os.ReadFile(df)
	if want := "ARG BASE_IMAGE=" + ref + "@" + digest.String() + "\nFROM ${BASE_IMAGE} AS build\n"; !strings.HasPrefix(string(b), want) {
		t.Errorf("after --resolve:\n%s\nwant it to start with:\n%s", b, want)
	}
	// An unpinned, unmarked image and a literal FROM are refused.
	if err := os.WriteFile(df, []byte("ARG BASE_IMAGE=debian:trixie\nFROM debian:trixie\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := testenv.RunBinary(t, s.repo, env, s.bin, "pins")
	if r.Code != 2 || !strings.Contains(r.Stderr, "neither pinned by digest nor marked") || !strings.Contains(r.Stderr, "FROM debian:trixie") {
		t.Errorf("unpinned: exit %d:\n%s", r.Code, r.Stderr)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
