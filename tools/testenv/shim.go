package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// envtest starts kube-apiserver and etcd as plain children of the test
// binary. When `go test -timeout` or a panic ends the binary, t.Cleanup never
// runs and those children would outlive it, holding ports and memory. So
// envtest is pointed at a directory of shims: symlinks to the test binary
// itself, named like the real programs. When the test binary starts under one
// of those names, the init below supervises the real program instead of
// running tests: it forwards termination signals to it, and kills it as soon
// as the shim's own parent (the test binary) is gone.
//
// PR_SET_PDEATHSIG on the real program would be simpler, but the kernel drops
// it on exec when credentials are recomputed, which happens for root in the
// containers these tests run in; watching the parent does not depend on that.

// shimTargetFile, inside a shim directory, holds the real assets directory.
const shimTargetFile = "krops-testenv-target"

var shimmed = []string{"kube-apiserver", "etcd"}

// superviseEnv, when set, makes the test binary supervise the program it
// names with the remaining arguments (used for moto_server, which testenv
// starts itself).
const superviseEnv = "KROPS_TESTENV_SUPERVISE"

func init() {
	if real := os.Getenv(superviseEnv); real != "" {
		os.Unsetenv(superviseEnv)
		os.Exit(superviseShim(real, os.Args[1:]))
	}
	name := filepath.Base(os.Args[0])
	if name != "kube-apiserver" && name != "etcd" {
		return
	}
	target, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), shimTargetFile))
	if err != nil {
		return // not our shim: an unrelated binary with that name
	}
	os.Exit(superviseShim(filepath.Join(strings.TrimSpace(string(target)), name), os.Args[1:]))
}

func superviseShim(real string, args []string) int {
	parent := os.Getppid()
	cmd := exec.Command(real, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Belt and braces: where the kernel keeps it, the child also dies with us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv shim: starting %s: %v\n", real, err)
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return cmd.ProcessState.ExitCode()
			}
			return 0
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case <-tick.C:
			if os.Getppid() != parent {
				_ = cmd.Process.Kill()
				<-done
				return 1
			}
		}
	}
}

// supervisedCommand returns a command that runs program under a supervising
// copy of the test binary, so program dies with the test binary.
func supervisedCommand(program string, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the test binary: %w", err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), superviseEnv+"="+program)
	return cmd, nil
}

// shimDir creates a directory of shims for the real binaries in assets.
func shimDir(assets, tmp string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating the test binary: %w", err)
	}
	dir := filepath.Join(tmp, "assets-shim")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, n := range shimmed {
		if _, err := os.Stat(filepath.Join(assets, n)); err != nil {
			return "", fmt.Errorf("%s is not in KUBEBUILDER_ASSETS=%s: %w", n, assets, err)
		}
		if err := os.Symlink(self, filepath.Join(dir, n)); err != nil && !os.IsExist(err) {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, shimTargetFile), []byte(assets), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}
