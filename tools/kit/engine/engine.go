// Package engine finds the container engine (Docker or Podman) that kind
// and the local registry run on, and the daemon-side socket kind nodes mount.
package engine

import (
	"context"
	"fmt"
	"strings"

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
}

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
	run := func(name string, args ...string) (proc.Result, error) {
		return o.Runner.Run(ctx, proc.Cmd{Path: name, Args: args, Env: env})
	}
	e := &Engine{runner: o.Runner}
	switch o.Engine {
	case "docker", "podman":
		if _, err := run(o.Engine, "info"); err != nil {
			return nil, fmt.Errorf("CONTAINER_ENGINE=%s does not answer (`%s info` failed): start it or unset CONTAINER_ENGINE to detect: %w", o.Engine, o.Engine, err)
		}
		e.Name = o.Engine
	case "":
		_, dockerErr := run("docker", "info")
		if dockerErr == nil {
			e.Name = "docker"
			if v, err := run("docker", "--version"); err == nil && strings.Contains(strings.ToLower(string(v.Stdout)), "podman") {
				e.Name = "podman"
			}
		} else if _, podmanErr := run("podman", "info"); podmanErr == nil {
			e.Name = "podman"
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
