// Package engine finds the container engine (Docker or Podman) that kind
// and the local registry run on, and the daemon-side socket kind nodes mount.
package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// Toolbox paths: inside the toolbox image the engine is always reached
// through these sockets.
const (
	DockerSocket         = "/var/run/docker.sock"
	PodmanToolboxSocket  = "/run/podman/podman.sock"
	ToolboxContainerHost = "unix:///var/run/docker.sock"
)

// Options are the knobs detection reads.
type Options struct {
	// Engine is CONTAINER_ENGINE: docker, podman or empty to detect.
	Engine string
	// Sock is ENGINE_SOCK: overrides the detected socket.
	Sock string
	// Toolbox is KROPS_TOOLBOX=1.
	Toolbox bool
	// ContainerHost is CONTAINER_HOST as the caller has it.
	ContainerHost string
	// Env is the environment engine commands run with.
	Env    []string
	Runner proc.Runner
	// Timeout bounds each detection call; zero means DefaultTimeout.
	Timeout time.Duration
	// Waiting, when set, hears what detection waits for once a call has
	// taken longer than a few seconds, so a wedged engine is not silence.
	Waiting func(msg string)
}

// DefaultTimeout bounds one detection call (`docker info` and the like). A
// healthy engine answers in well under a second, a busy one or a Podman
// machine that is starting in a few; a daemon that accepted the call and
// went quiet would otherwise hang every command that needs the engine.
const DefaultTimeout = 30 * time.Second

// waitingAfter is when a slow call is announced.
const waitingAfter = 3 * time.Second

// ErrTimeout is an engine call that did not answer within its bound.
var ErrTimeout = errors.New("the container engine did not answer in time")

// Engine is a detected engine.
type Engine struct {
	// Name is docker or podman; it is also the program run.
	Name string
	// Sock is the daemon-side socket kind nodes mount.
	Sock string
	// Env is what commands for this engine run with (Options.Env plus
	// KIND_EXPERIMENTAL_PROVIDER for podman, CONTAINER_HOST in the toolbox).
	Env []string
	// Warnings explain fallbacks taken during detection.
	Warnings []string
	runner   proc.Runner
}

// Detect picks the engine: CONTAINER_ENGINE when set, else docker when it
// answers (podman when the "docker" answering is podman's shim), else podman.
func Detect(ctx context.Context, o Options) (*Engine, error) {
	if o.Runner == nil {
		o.Runner = proc.Exec{}
	}
	env := append([]string{}, o.Env...)
	if o.Toolbox && o.ContainerHost == "" {
		env = append(env, "CONTAINER_HOST="+ToolboxContainerHost)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	run := func(name string, args ...string) (proc.Result, error) {
		return bounded(ctx, o, proc.Cmd{Path: name, Args: args, Env: env})
	}
	e := &Engine{runner: o.Runner}
	switch o.Engine {
	case "docker", "podman":
		if _, err := run(o.Engine, "info"); ctx.Err() != nil {
			return nil, ctx.Err()
		} else if err != nil {
			return nil, fmt.Errorf("CONTAINER_ENGINE=%s does not answer (`%s info` failed): start it or unset CONTAINER_ENGINE to detect: %w", o.Engine, o.Engine, err)
		}
		e.Name = o.Engine
	case "":
		_, dockerErr := run("docker", "info")
		if ctx.Err() != nil {
			// Interrupted is not "no engine answers".
			return nil, ctx.Err()
		}
		if dockerErr == nil {
			e.Name = "docker"
			if v, err := run("docker", "--version"); err == nil && strings.Contains(strings.ToLower(string(v.Stdout)), "podman") {
				e.Name = "podman"
			}
		} else if _, podmanErr := run("podman", "info"); podmanErr == nil {
			e.Name = "podman"
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		} else {
			return nil, fmt.Errorf("no container engine answers: docker info: %v; podman info: %v. Start Docker or Podman, or set CONTAINER_ENGINE", dockerErr, podmanErr)
		}
	default:
		return nil, fmt.Errorf("CONTAINER_ENGINE=%q is not supported: want docker or podman", o.Engine)
	}
	switch {
	case o.Sock != "":
		e.Sock = o.Sock
	case e.Name == "docker" && !o.Toolbox:
		e.Sock = dockerSocket(run)
	case e.Name == "docker":
		e.Sock = DockerSocket
	case o.Toolbox:
		e.Sock = PodmanToolboxSocket
	default:
		res, err := run("podman", "info", "--format", "{{.Host.RemoteSocket.Path}}")
		e.Sock = strings.TrimPrefix(strings.TrimSpace(string(res.Stdout)), "unix://")
		if err != nil || e.Sock == "" {
			e.Sock = PodmanToolboxSocket
			e.Warnings = append(e.Warnings, "podman did not report its socket; using "+PodmanToolboxSocket+" (set ENGINE_SOCK to override)")
		}
	}
	if e.Name == "podman" {
		env = append(env, "KIND_EXPERIMENTAL_PROVIDER=podman")
	}
	e.Env = env
	return e, nil
}

// dockerSocket is the daemon-side Docker socket: Docker Desktop serves
// /var/run/docker.sock into containers whatever the client uses; elsewhere
// the current context's unix endpoint (rootless Docker's
// /run/user/<uid>/docker.sock) when it has one, else /var/run/docker.sock.
func dockerSocket(run func(string, ...string) (proc.Result, error)) string {
	if res, err := run("docker", "info", "--format", "{{.OperatingSystem}}"); err == nil && strings.Contains(string(res.Stdout), "Docker Desktop") {
		return DockerSocket
	}
	if res, err := run("docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"); err == nil {
		if p, ok := strings.CutPrefix(strings.TrimSpace(string(res.Stdout)), "unix://"); ok && p != "" {
			return p
		}
	}
	return DockerSocket
}

// Run runs the engine with args.
func (e *Engine) Run(ctx context.Context, args ...string) (proc.Result, error) {
	return e.runner.Run(ctx, proc.Cmd{Path: e.Name, Args: args, Env: e.Env})
}

// bounded runs one detection call under o.Timeout, telling o.Waiting when it
// is slow. A call that runs out of time is ErrTimeout naming the command.
func bounded(ctx context.Context, o Options, c proc.Cmd) (proc.Result, error) {
	callCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.Waiting != nil {
		t := time.AfterFunc(waitingAfter, func() {
			o.Waiting(fmt.Sprintf("waiting for `%s` to answer (up to %s; Ctrl-C stops)", proc.CommandLine(c), o.Timeout))
		})
		defer t.Stop()
	}
	res, err := o.Runner.Run(callCtx, c)
	if err != nil && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return res, fmt.Errorf("`%s` did not answer within %s (a wedged daemon or a socket nobody serves): %w", proc.CommandLine(c), o.Timeout, ErrTimeout)
	}
	return res, err
}
