package toolbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/config"
)

// engineAnswers is a STAND-IN for the engine's read-only queries: info
// answers by its --format, every other query fails.
type engineAnswers map[string]string

func (a engineAnswers) Run(_ context.Context, c proc.Cmd) (proc.Result, error) {
	key := strings.Join(c.Args, " ")
	if c.Path == "docker" && key == "info" || c.Path == "podman" && key == "info" {
		return proc.Result{}, nil
	}
	if out, ok := a[c.Path+" "+key]; ok {
		return proc.Result{Stdout: []byte(out)}, nil
	}
	return proc.Result{ExitCode: 1}, errors.New("exit status 1")
}

// On a rootful Linux engine the container runs as the caller, with the
// socket's group, and HOME where that user may write; rootless engines and
// Docker Desktop keep the image's user, as does a caller who is root.
func TestTheContainerRunsAsTheCallerOnARootfulEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	gid, _ := socketGroup(sock)
	const format = "info --format {{.OperatingSystem}} {{.SecurityOptions}}"
	for _, tc := range []struct {
		name     string
		uid      int
		answers  engineAnswers
		env      []string
		asCaller bool
	}{
		{"rootful Docker", 1000, engineAnswers{"docker " + format: "Debian GNU/Linux 13 (trixie) [name=seccomp,profile=builtin]"}, nil, true},
		{"rootless Docker", 1000, engineAnswers{"docker " + format: "Debian GNU/Linux 13 (trixie) [name=seccomp,profile=builtin name=rootless]"}, nil, false},
		{"Docker Desktop", 1000, engineAnswers{"docker " + format: "Docker Desktop []"}, nil, false},
		{"rootless Podman", 1000, engineAnswers{"podman info --format {{.Host.Security.Rootless}}": "true"}, []string{"CONTAINER_ENGINE=podman"}, false},
		{"rootful Podman", 1000, engineAnswers{"podman info --format {{.Host.Security.Rootless}}": "false"}, []string{"CONTAINER_ENGINE=podman"}, true},
		{"root caller", 0, engineAnswers{"docker " + format: "Debian GNU/Linux 13 (trixie) []"}, nil, false},
	} {
		p, err := Prepare(context.Background(), Options{Repo: t.TempDir(), Image: "toolbox:test", Runner: tc.answers, UID: tc.uid, GID: 1000,
			Environ: append([]string{"ENGINE_SOCK=" + sock}, tc.env...)})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		i := slices.Index(p.Args, "--user")
		switch {
		case tc.asCaller && (i < 0 || p.Args[i+1] != "1000:1000" || !slices.Contains(p.Args, "HOME=/tmp")):
			t.Errorf("%s: not run as the caller with HOME=/tmp: %q", tc.name, p.Args)
		case tc.asCaller && gid != 1000 && !slices.Contains(p.Args, "--group-add"):
			t.Errorf("%s: no --group-add for the socket's group %d: %q", tc.name, gid, p.Args)
		case !tc.asCaller && (i >= 0 || slices.Contains(p.Args, "HOME=/tmp")):
			t.Errorf("%s: run as the caller: %q", tc.name, p.Args)
		}
	}
}

// Every knob of the lifecycle reaches the tasks inside, by name, as a
// mounted file, as an output directory, or set by the toolbox to its inside
// value; the few that cannot mean anything there say why. A knob added to
// the table without a decision here fails this test, instead of being
// dropped silently at the container's edge.
func TestEveryKnobIsForwardedOrDeliberatelyNot(t *testing.T) {
	for _, k := range config.KnobTable() {
		_, out := OutputKnobs[k.Env]
		_, not := NotForwarded[k.Env]
		ways := 0
		for _, b := range []bool{slices.Contains(Forwarded, k.Env), slices.Contains(PathKnobs, k.Env), slices.Contains(RepoPathKnobs, k.Env), out, slices.Contains(SetInside, k.Env), not} {
			if b {
				ways++
			}
		}
		if ways != 1 {
			t.Errorf("%s: handled %d ways by the toolbox (want exactly one of Forwarded, PathKnobs, RepoPathKnobs, OutputKnobs, SetInside, NotForwarded)", k.Env, ways)
		}
	}
}
