// Command krops-toolbox runs a krops task inside the toolbox image (task
// toolbox -- <task> ENV=<env>).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/mattn/go-isatty"
	ucli "github.com/urfave/cli/v2"

	"github.com/kropsdev/krops/plugins/sdk/proc"
	"github.com/kropsdev/krops/tools/kit/cli"
	"github.com/kropsdev/krops/tools/krops-toolbox/internal/toolbox"
)

// version is stamped at build time (-X main.version=...).
var version = "dev"

func main() { os.Exit(run(os.Args)) }

func run(args []string) int {
	return cli.Run(context.Background(), newApp(), args, cli.RunOptions{})
}

// newApp is the command line: what run parses, and what docs/cli.md
// renders (TestCLIDocIsCurrent).
func newApp() *ucli.App {
	return cli.New(cli.Options{
		Name:  "krops-toolbox",
		Usage: "run a krops task inside the toolbox image",
		Description: `Runs "task <args>" in the toolbox container: the repository at /workspace, .kube/ persisted in it,
the engine's socket mounted at /var/run/docker.sock (Docker: /var/run/docker.sock, or the current context's unix
socket for rootless Docker; Podman: the socket podman info reports, rootful, rootless or in a podman machine;
ENGINE_SOCK overrides), on the kind network when it exists (before the first kind cluster, krops-kind joins it from
inside). On a rootful Linux engine the container runs as your user id, with the socket's group and HOME=/tmp, so
.kube/ and the rest stay yours; rootless engines and Docker Desktop map the container's user to you already.
.env is read first and wins over the environment, as in task and mise. Only the krops knobs and cloud credentials
pass in, by name (-e NAME), so values never appear in argv; KROPS_TOOLBOX, ENGINE_SOCK, CONTAINER_ENGINE and
KUBECONFIG are set for the inside, with a warning when yours differ. Files named by AGE_KEY_FILE, AWS_CONFIG_FILE,
AWS_SHARED_CREDENTIALS_FILE and GOOGLE_APPLICATION_CREDENTIALS are mounted read-only and the variables rewritten;
MGMT_KUBECONFIG (default: .kube/krops-<env>-mgmt.yaml in the repository) outside the repository has its directory
mounted read-write, since the pivot writes it. The checkout's commit, branch and origin (without credentials) are
read here with git and passed as KROPS_OCI_GIT_SHA, _REF and KROPS_OCI_SOURCE_URL unless set. The task's exit code
is the command's.`,
		Version: version,
		Commands: []*ucli.Command{{
			Name:      "run",
			Usage:     "run a task in the toolbox: krops-toolbox run -- bootstrap ENV=local-host",
			ArgsUsage: "[-- TASK [ARGS...]]",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "image", EnvVars: []string{"KROPS_TOOLBOX_IMAGE"}, Value: "krops-toolbox:dev", Usage: "toolbox image (task toolbox:build builds krops-toolbox:dev)"},
				&ucli.BoolFlag{Name: "dry-run", Usage: "print the engine command instead of running it"},
			},
			Action: runAction,
		}, {
			Name:  "pins",
			Usage: "check the Dockerfile's base images: each pinned by digest or marked pending",
			Flags: []ucli.Flag{
				&ucli.StringFlag{Name: "file", Value: "Dockerfile", Usage: "the Dockerfile"},
				&ucli.BoolFlag{Name: "resolve", Usage: "read each pending image's digest from its registry and write it in"},
				&ucli.BoolFlag{Name: "release", Usage: "fail (exit 2) while any base image is pending: a release is built from digests only"},
				&ucli.BoolFlag{Name: "insecure", Usage: "allow plain HTTP registries (a local mirror)"},
			},
			Action: pinsAction,
		}},
	})
}

func pinsAction(c *ucli.Context) error {
	file := c.String("file")
	out := cli.Printer(c, c.App.Writer)
	if c.Bool("resolve") {
		pinned, err := toolbox.Resolve(c.Context, file, toolbox.RegistryDigest(c.Bool("insecure")))
		if err != nil {
			return err
		}
		for _, img := range pinned {
			out.Successf("%s pinned to %s", img.Arg, img.Ref)
		}
	}
	images, err := toolbox.BaseImages(file)
	if err != nil {
		return cli.UsageError(err)
	}
	pending := 0
	for _, img := range images {
		if img.Pending {
			pending++
			out.Warnf("%s=%s is pending: its digest has not been read from the registry", img.Arg, img.Ref)
		} else {
			out.Successf("%s=%s", img.Arg, img.Ref)
		}
	}
	if pending > 0 && c.Bool("release") {
		return cli.Usagef("%d base images of %s are pending; a release is built from digests only: run `krops-toolbox pins --resolve` where the registry is reachable, then commit", pending, file)
	}
	return nil
}

// exitCode carries the task's exit code out through cli.Run.
type exitCode struct{ code int }

func (e exitCode) Error() string { return fmt.Sprintf("the task in the toolbox exited %d", e.code) }
func (e exitCode) ExitCode() int { return e.code }

func runAction(c *ucli.Context) error {
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	plan, err := toolbox.Prepare(c.Context, toolbox.Options{
		Repo: repo, Image: c.String("image"), Args: c.Args().Slice(), Environ: os.Environ(),
		Terminal: isatty.IsTerminal(os.Stdin.Fd()), Home: home, UID: os.Getuid(), GID: os.Getgid(),
	})
	if err != nil {
		return cli.UsageError(err)
	}
	out := cli.Printer(c, c.App.ErrWriter)
	for _, w := range plan.Warnings {
		out.Warnf("%s", w)
	}
	if c.Bool("dry-run") {
		fmt.Fprintln(c.App.Writer, proc.CommandLine(proc.Cmd{Path: plan.Engine, Args: plan.Args}))
		return nil
	}
	cmd := exec.CommandContext(c.Context, plan.Engine, plan.Args...)
	cmd.Env = plan.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitCode{ee.ExitCode()}
	}
	return err
}
