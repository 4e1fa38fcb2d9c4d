package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// standInRunner is a STAND-IN for the docker and podman programs (no engine
// runs on the test machines): it answers per command line and records them.
type standInRunner struct {
	answers map[string]string // command line -> stdout; missing means failure
	calls   []string
}

func (r *standInRunner) Run(_ context.Context, c proc.Cmd) (proc.Result, error) {
	line := strings.Join(append([]string{c.Path}, c.Args...), " ")
	r.calls = append(r.calls, line)
	out, ok := r.answers[line]
	if !ok {
		return proc.Result{ExitCode: 1}, errors.New("exit status 1")
	}
	return proc.Result{Stdout: []byte(out)}, nil
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name     string
		opts     Options
		answers  map[string]string
		want     string
		wantSock string
		wantEnv  string
		wantErr  string
	}{
		{"docker answers", Options{}, map[string]string{"docker info": "", "docker --version": "Docker version 28.2.2"}, "docker", DockerSocket, "", ""},
		{"rootless docker: the context's socket", Options{}, map[string]string{"docker info": "", "docker --version": "Docker version 28.2.2", "docker context inspect --format {{.Endpoints.docker.Host}}": "unix:///run/user/1000/docker.sock\n"}, "docker", "/run/user/1000/docker.sock", "", ""},
		{"Docker Desktop serves /var/run/docker.sock", Options{}, map[string]string{"docker info": "", "docker --version": "Docker version 28.2.2", "docker info --format {{.OperatingSystem}}": "Docker Desktop\n", "docker context inspect --format {{.Endpoints.docker.Host}}": "unix:///Users/me/.docker/run/docker.sock\n"}, "docker", DockerSocket, "", ""},
		{"docker is podman's shim", Options{}, map[string]string{"docker info": "", "docker --version": "podman version 5.4.0", "podman info --format {{.Host.RemoteSocket.Path}}": "/run/user/1000/podman/podman.sock\n"}, "podman", "/run/user/1000/podman/podman.sock", "KIND_EXPERIMENTAL_PROVIDER=podman", ""},
		{"podman when docker is down", Options{}, map[string]string{"podman info": "", "podman info --format {{.Host.RemoteSocket.Path}}": "unix:///run/podman/podman.sock"}, "podman", "/run/podman/podman.sock", "KIND_EXPERIMENTAL_PROVIDER=podman", ""},
		{"podman in the toolbox uses the fixed socket", Options{Toolbox: true}, map[string]string{"podman info": ""}, "podman", PodmanToolboxSocket, "CONTAINER_HOST=" + ToolboxContainerHost, ""},
		{"explicit engine", Options{Engine: "podman", Sock: "/my.sock"}, map[string]string{"podman info": ""}, "podman", "/my.sock", "", ""},
		{"explicit engine down", Options{Engine: "docker"}, nil, "", "", "", "CONTAINER_ENGINE=docker does not answer"},
		{"nothing answers", Options{}, nil, "", "", "", "no container engine answers"},
		{"unknown engine", Options{Engine: "nerdctl"}, nil, "", "", "", `CONTAINER_ENGINE="nerdctl" is not supported`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &standInRunner{answers: tc.answers}
			tc.opts.Runner = r
			e, err := Detect(context.Background(), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Name != tc.want || e.Sock != tc.wantSock {
				t.Errorf("engine %s sock %s, want %s %s (calls %v)", e.Name, e.Sock, tc.want, tc.wantSock, r.calls)
			}
			if tc.wantEnv != "" && !slices.Contains(e.Env, tc.wantEnv) {
				t.Errorf("env %v lacks %s", e.Env, tc.wantEnv)
			}
		})
	}
}

func TestPodmanWithoutSocketAnswerFallsBackWithAWarning(t *testing.T) {
	r := &standInRunner{answers: map[string]string{"podman info": "", "podman info --format {{.Host.RemoteSocket.Path}}": ""}}
	e, err := Detect(context.Background(), Options{Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	if e.Sock != PodmanToolboxSocket || len(e.Warnings) != 1 {
		t.Errorf("sock %s warnings %v", e.Sock, e.Warnings)
	}
}

// hangingEngine puts a `docker` and a `podman` on PATH that accept the call
// and never answer, as a wedged daemon's CLI does.
func hangingEngine(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"docker", "podman"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// exec looks the program up in this process's PATH, not the child's.
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	return []string{"PATH=" + dir + ":/usr/bin:/bin"}
}

// A wedged engine is a bounded, named timeout, announced while it is
// waited for; real processes, so the kill of the hung CLI is exercised.
func TestWedgedEngineIsABoundedTimeout(t *testing.T) {
	env := hangingEngine(t)
	var heard []string
	var mu sync.Mutex
	start := time.Now()
	_, err := Detect(context.Background(), Options{
		Engine: "docker", Env: env, Runner: proc.Exec{OwnGroup: true, WaitDelay: time.Second},
		Timeout: 4 * time.Second,
		Waiting: func(m string) { mu.Lock(); heard = append(heard, m); mu.Unlock() },
	})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "`docker info` did not answer within 4s") {
		t.Fatalf("wedged engine: %v, want ErrTimeout naming docker info", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("a 4s bound took %s", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 || !strings.Contains(heard[0], "waiting for `docker info` to answer") {
		t.Errorf("what was waited for was not said: %q", heard)
	}
}

// An interrupted detection is the interruption, not "no container engine
// answers" (which would send the user to start an engine that runs).
func TestInterruptedDetectionIsNotNoEngine(t *testing.T) {
	env := hangingEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := Detect(ctx, Options{Env: env, Runner: proc.Exec{OwnGroup: true, WaitDelay: time.Second}})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "no container engine answers") {
		t.Fatalf("interrupted detection: %v, want context.Canceled", err)
	}
}
