package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// HowToGetMoto is the hint shown when moto_server is missing. PyPI is not
// reachable from these machines, so nothing here ever runs pip.
const HowToGetMoto = "moto_server comes with the machine's Python 3.11 (moto 5); elsewhere install it with `pip install 'moto[server]'`"

// MotoServer is a running moto in server mode: real AWS wire protocols,
// in-memory state.
type MotoServer struct {
	// URL is the endpoint, http://127.0.0.1:<port>. S3 works path-style on
	// an IP address without extra settings.
	URL string
	cmd *exec.Cmd
}

// MotoOptions configure Moto.
type MotoOptions struct {
	// LoadManagedPolicies makes AWS-managed IAM policies attachable
	// (MOTO_IAM_LOAD_MANAGED_POLICIES); it slows the first IAM call and every
	// reset by about 1.6 s.
	LoadManagedPolicies bool
	// KeepEnv leaves the process environment alone; by default Moto points
	// the AWS SDK at the server with t.Setenv.
	KeepEnv bool
}

// Moto starts moto_server on a free loopback port for t and stops it in
// t.Cleanup. Unless KeepEnv, it sets AWS_ENDPOINT_URL, static test
// credentials and a default region for the code under test (t.Setenv, so the
// test must not be parallel).
func Moto(t testing.TB, opts MotoOptions) *MotoServer {
	t.Helper()
	Integration(t)
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		Missing(t, "moto_server", HowToGetMoto)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := supervisedCommand(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if opts.LoadManagedPolicies {
		cmd.Env = append(cmd.Env, "MOTO_IAM_LOAD_MANAGED_POLICIES=true")
	}
	// The process writes its output from exec's copying goroutine while a
	// failed start reads it here: the buffer takes a lock.
	logs := &proc.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto_server: %v", err)
	}
	m := &MotoServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(m.stop)
	// moto_server is Python importing all of moto: seconds on an idle
	// machine, well over 30 s at the load average of a full test run.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.waitReady(ctx); err != nil {
		t.Fatalf("moto_server on %s did not answer: %v\n%s", m.URL, err, logs.String())
	}
	if !opts.KeepEnv {
		for k, v := range m.Env() {
			t.Setenv(k, v)
		}
	}
	return m
}

// Env is what the AWS SDK needs to talk to this server.
func (m *MotoServer) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":            m.URL,
		"AWS_ACCESS_KEY_ID":           "testing",
		"AWS_SECRET_ACCESS_KEY":       "testing",
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  "eu-north-1",
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		// moto sends no response checksums; the SDK would log about each.
		"AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
	}
}

// Environ is Env as KEY=VALUE entries for a child process, with the AWS
// endpoint replaced by endpoint (a fault proxy in front of the server);
// empty endpoint keeps the server's own URL.
func (m *MotoServer) Environ(endpoint string) []string {
	var out []string
	for k, v := range m.Env() {
		if k == "AWS_ENDPOINT_URL" && endpoint != "" {
			v = endpoint
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Reset wipes every account and region of the server.
func (m *MotoServer) Reset(ctx context.Context) error { return ResetMoto(ctx, m.URL) }

// ResetMoto empties the moto server at url (every service, every region).
func ResetMoto(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("resetting moto: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("resetting moto: %s", resp.Status)
	}
	return nil
}

func (m *MotoServer) waitReady(ctx context.Context) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/moto-api/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *MotoServer) stop() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = m.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = m.cmd.Process.Kill()
			<-done
		}
	}
}
