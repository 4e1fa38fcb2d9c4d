package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// HowToGetFlux is the hint shown when the Flux controllers are missing.
const HowToGetFlux = "run `tools/task.sh testbin` once (plain `go test` then finds the binaries), or set KROPS_FLUX_BIN to the directory tools/testbin/flux.sh prints"

// HowToGetFluxOperator is the hint shown when the Flux Operator is missing.
const HowToGetFluxOperator = "run `tools/task.sh testbin` once (plain `go test` then finds the binaries), or set KROPS_FLUX_OPERATOR_BIN to the directory tools/testbin/flux-operator.sh prints"

// Controllers are real controllers running as processes against a Cluster.
type Controllers struct {
	// Namespace is where they run (RUNTIME_NAMESPACE), flux-system.
	Namespace string
	logs      map[string]*proc.Buffer
	stopOnce  sync.Once
	cmds      []*exec.Cmd
	// afterStop runs once the processes are gone (releasing a lock).
	afterStop func()

	mu      sync.Mutex
	cluster *Cluster
	defs    []controller
	health  map[string]string
}

// Kill stops the named controller alone, as if its pod died; Start brings
// it back. For tests of what a tool does while a controller is gone.
func (c *Controllers) Kill(t testing.TB, name string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.index(t, name)
	stopAll([]*exec.Cmd{c.cmds[i]})
}

// Start starts the named controller again after Kill and waits until it
// is ready.
func (c *Controllers) Start(t testing.TB, name string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.index(t, name)
	cmd, err := startController(c.cluster, c.Namespace, c.defs[i], c.health[name], c.logs[name])
	if err != nil {
		t.Fatal(err)
	}
	c.cmds[i] = cmd
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := waitHealthy(ctx, "http://"+c.health[name]+"/readyz"); err != nil {
		t.Fatalf("%s did not become ready again: %v", name, err)
	}
}

func (c *Controllers) index(t testing.TB, name string) int {
	t.Helper()
	for i, d := range c.defs {
		if d.name == name {
			return i
		}
	}
	t.Fatalf("no controller %s here", name)
	return -1
}

func startController(c *Cluster, namespace string, ctl controller, health string, logs *proc.Buffer) (*exec.Cmd, error) {
	cmd, err := supervisedCommand(ctl.bin, ctl.args(health)...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(append(cmd.Env, "KUBECONFIG="+c.Kubeconfig, "RUNTIME_NAMESPACE="+namespace), ctl.env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", ctl.name, err)
	}
	return cmd, nil
}

// Stop stops the controllers now (t's cleanup would otherwise), for a test
// that moves on to other controllers, such as a pivot's target.
func (c *Controllers) Stop() {
	c.stopOnce.Do(func() {
		stopAll(c.cmds)
		if c.afterStop != nil {
			c.afterStop()
		}
	})
}

// Logs returns what the named controller printed so far.
func (c *Controllers) Logs(name string) string { return c.logs[name].String() }

// controller is one process to run. args receives the health address
// (host:port) on which the process must serve /readyz.
type controller struct {
	name, bin string
	args      func(health string) []string
	env       []string
}

// fluxArgs are the flags every Flux controller and the Flux Operator share.
func fluxArgs(health string, more ...string) []string {
	return append([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=" + health, "--enable-leader-election=false", "--log-level=debug"}, more...)
}

// Flux starts source-controller and kustomize-controller (KROPS_FLUX_BIN,
// built by tools/testbin/flux.sh) against c, watching every namespace, and
// stops them in t.Cleanup. c must have the FluxSource and FluxKustomize CRDs.
// When t fails, the controllers' logs are printed.
func Flux(t testing.TB, c *Cluster) *Controllers {
	t.Helper()
	dir := binDir(t, "KROPS_FLUX_BIN", "the Flux controllers", HowToGetFlux)
	storage := filepath.Join(t.TempDir(), "storage")
	// source-controller refuses to start when its storage directory is missing.
	if err := os.MkdirAll(storage, 0o755); err != nil {
		t.Fatal(err)
	}
	artifacts := "127.0.0.1:" + strconv.Itoa(port(t))
	return run(t, c, []controller{
		{name: "source-controller", bin: filepath.Join(dir, "source-controller"), args: func(h string) []string {
			return fluxArgs(h, "--watch-all-namespaces=true", "--storage-path="+storage, "--storage-addr="+artifacts, "--storage-adv-addr="+artifacts)
		}},
		// Dependants are re-checked every 2 s instead of 30 s, so a dependsOn
		// chain settles in test time.
		{name: "kustomize-controller", bin: filepath.Join(dir, "kustomize-controller"), args: func(h string) []string {
			return fluxArgs(h, "--watch-all-namespaces=true", "--requeue-dependency=2s")
		}},
	})
}

// RunFluxOperator starts the Flux Operator (KROPS_FLUX_OPERATOR_BIN, built by
// tools/testbin/flux-operator.sh) against c and stops it in t.Cleanup. c must
// have the FluxOperator CRDs. It renders ResourceSets and FluxInstances from
// the Flux distribution built into it; nothing is pulled.
func RunFluxOperator(t testing.TB, c *Cluster) *Controllers {
	t.Helper()
	dir := binDir(t, "KROPS_FLUX_OPERATOR_BIN", "the Flux Operator", HowToGetFluxOperator)
	return run(t, c, []controller{{
		name: "flux-operator", bin: filepath.Join(dir, "flux-operator"),
		args: func(h string) []string {
			return fluxArgs(h, "--storage-path="+filepath.Join(dir, "data"), "--web-server-port="+strconv.Itoa(port(t)))
		},
		// The operator refuses to run outside FIPS mode, as upstream builds it.
		env: []string{"GODEBUG=fips140=on"},
	}})
}

func binDir(t testing.TB, envVar, what, how string) string {
	t.Helper()
	Integration(t)
	dir := Testbin(envVar)
	if dir == "" {
		MissingTestbin(t, what+" ("+envVar+")", how)
	}
	return dir
}

// Testbin is the directory a tools/testbin script built for key
// (KUBEBUILDER_ASSETS, KROPS_FLUX_BIN, KROPS_FLUX_OPERATOR_BIN,
// KROPS_CAPI_BIN): the environment variable when set, else the path the
// script recorded in its cache, so plain `go test` finds the binaries after
// `task testbin`. Empty when neither exists.
func Testbin(key string) string {
	if dir := os.Getenv(key); dir != "" {
		return dir
	}
	root := os.Getenv("KROPS_TESTBIN_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		root = filepath.Join(cache, "krops", "testbin")
	}
	b, err := os.ReadFile(filepath.Join(root, key))
	if err != nil {
		return ""
	}
	dir := strings.TrimSpace(string(b))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

func port(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run starts the controllers under supervision, waits until each reports
// ready, and stops them when t ends (printing their logs if t failed).
func run(t testing.TB, c *Cluster, ctrls []controller) *Controllers {
	t.Helper()
	cs := &Controllers{Namespace: "flux-system", logs: map[string]*proc.Buffer{}, cluster: c, defs: ctrls, health: map[string]string{}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cs.Namespace}}
	if err := c.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", cs.Namespace, err)
	}
	for i := range ctrls {
		// Each process gets its own temporary directory: kustomize-controller
		// removes every kustomization-* directory in its TMPDIR when it
		// starts (stale ones, it assumes), which on a shared /tmp are the
		// working directories of kustomize-controllers other tests run. In
		// a cluster each controller has a container's /tmp to itself.
		// The directories are made before the cleanup that stops the
		// processes is registered, so they are removed after it.
		ctrls[i].env = append(ctrls[i].env, "TMPDIR="+t.TempDir())
	}
	health := map[string]string{}
	t.Cleanup(func() {
		if t.Failed() {
			for _, ctl := range ctrls {
				t.Logf("--- %s log ---\n%s", ctl.name, cs.logs[ctl.name].String())
			}
		}
		cs.Stop()
	})
	for _, ctl := range ctrls {
		if _, err := os.Stat(ctl.bin); err != nil {
			t.Fatalf("%s: %v", ctl.name, err)
		}
		health[ctl.name] = "127.0.0.1:" + strconv.Itoa(port(t))
		cs.health[ctl.name] = health[ctl.name]
		logs := &proc.Buffer{}
		cs.logs[ctl.name] = logs
		cmd, err := startController(c, cs.Namespace, ctl, health[ctl.name], logs)
		if err != nil {
			t.Fatal(err)
		}
		cs.cmds = append(cs.cmds, cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ctl := range ctrls {
		if err := waitHealthy(ctx, "http://"+health[ctl.name]+"/readyz"); err != nil {
			t.Fatalf("%s did not become ready: %v\n%s", ctl.name, err, cs.logs[ctl.name].String())
		}
	}
	return cs
}

// stopAll stops the processes in parallel. Each gets SIGTERM and two
// seconds, then a second SIGTERM, on which controller-runtime exits at once
// (its graceful shutdown waits far longer than a test should). SIGKILL comes
// last and only for the supervisor, which cannot forward it.
func stopAll(cmds []*exec.Cmd) {
	var wg sync.WaitGroup
	for _, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			for i := 0; i < 2; i++ {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-done:
					return
				case <-time.After(2 * time.Second):
				}
			}
			_ = cmd.Process.Kill()
			<-done
		}()
	}
	wg.Wait()
}

func waitHealthy(ctx context.Context, url string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", url, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
