package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kropsdev/krops/tools/kit/proc"
)

// HowToGetFlux is the hint shown when the Flux controllers are missing.
const HowToGetFlux = "run `tools/testbin/flux.sh` and set KROPS_FLUX_BIN to the directory it prints, or run the tests through `tools/task.sh test`"

// FluxControllers are the real Flux source-controller and
// kustomize-controller, running as processes against a Cluster.
type FluxControllers struct {
	// Namespace is where they run (RUNTIME_NAMESPACE), flux-system.
	Namespace string
	logs      map[string]*proc.Buffer
}

// Logs returns what the named controller printed so far.
func (f *FluxControllers) Logs(name string) string { return f.logs[name].String() }

// Flux starts source-controller and kustomize-controller (KROPS_FLUX_BIN,
// built by tools/testbin/flux.sh) against c, watching every namespace, and
// stops them in t.Cleanup. c must have the FluxSource and FluxKustomize CRDs.
// When t fails, the controllers' logs are printed.
func Flux(t testing.TB, c *Cluster) *FluxControllers {
	t.Helper()
	Integration(t)
	dir := os.Getenv("KROPS_FLUX_BIN")
	if dir == "" {
		Missing(t, "the Flux controllers (KROPS_FLUX_BIN)", HowToGetFlux)
	}
	f := &FluxControllers{Namespace: "flux-system", logs: map[string]*proc.Buffer{}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if err := c.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", f.Namespace, err)
	}
	storage := filepath.Join(t.TempDir(), "storage")
	// source-controller refuses to start when its storage directory is missing.
	if err := os.MkdirAll(storage, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	procs := []struct {
		name   string
		health int
		args   []string
	}{
		{"source-controller", ports[0], []string{"--storage-path=" + storage, "--storage-addr=" + addr(ports[1]), "--storage-adv-addr=" + addr(ports[1])}},
		// Dependants are re-checked every 2 s instead of 30 s, so a dependsOn
		// chain settles in test time.
		{"kustomize-controller", ports[2], []string{"--requeue-dependency=2s"}},
	}
	var cmds []*exec.Cmd
	for _, p := range procs {
		bin := filepath.Join(dir, p.name)
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("KROPS_FLUX_BIN=%s: %v (%s)", dir, err, HowToGetFlux)
		}
		args := append([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=" + addr(p.health), "--enable-leader-election=false", "--watch-all-namespaces=true", "--log-level=debug"}, p.args...)
		cmd, err := supervisedCommand(bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "KUBECONFIG="+c.Kubeconfig, "RUNTIME_NAMESPACE="+f.Namespace)
		logs := &proc.Buffer{}
		f.logs[p.name] = logs
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", p.name, err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("--- %s log ---\n%s", p.name, f.logs[p.name].String())
			}
		}
		stopAll(cmds)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range procs {
		if err := waitHealthy(ctx, "http://"+addr(p.health)+"/readyz"); err != nil {
			t.Fatalf("%s did not become ready: %v\n%s", p.name, err, f.logs[p.name].String())
		}
	}
	return f
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
