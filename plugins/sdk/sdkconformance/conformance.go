// Package sdkconformance checks that a provider plugin binary follows the
// krops provider protocol. Third-party authors run it from their own tests:
//
//	func TestConformance(t *testing.T) {
//		sdkconformance.Run(t, "./bin/krops-provider-mycloud", sdkconformance.Options{})
//	}
//
// or without Go code through `task plugin:conformance PLUGIN=<path>`.
package sdkconformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/procfs"
	"github.com/kropsdev/krops/plugins/sdk/sdktest"
)

// Options configure a run.
type Options struct {
	// Config is sent with Configure; its zero value sends
	// {"environment": {}, "provider": {}}.
	Config sdk.Config
	// Env are values for the variables the plugin declares.
	Env map[string]string
	// BaseEnv is the plugin process's environment (see sdk.LoadOptions).
	BaseEnv []string
}

// hostEnv makes the test binary play a host that loads the plugin and waits
// to be killed, for the host-death check.
const hostEnv = "KROPS_CONFORMANCE_HOST"

// Run checks binary: handshake and Describe, version negotiation, capability
// honesty, streaming and cancellation, stderr-only output, and exit when the
// host dies.
func Run(t *testing.T, binary string, o Options) {
	t.Helper()
	if os.Getenv(hostEnv) == filepath.Base(binary) {
		playHost(binary, o)
		return
	}
	abs, err := filepath.Abs(binary)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(filepath.Base(abs), sdk.ExecutablePrefix)
	if name == filepath.Base(abs) {
		t.Fatalf("%s: a provider plugin's file name must start with %s", abs, sdk.ExecutablePrefix)
	}
	if len(o.Config.Raw) == 0 {
		o.Config.Raw = []byte(`{"environment": {}, "provider": {}}`)
	}
	if o.Config.Environment == "" {
		o.Config.Environment = "conformance"
	}
	ctx := context.Background()
	logs := &sdktest.Buffer{}
	defer func() {
		if t.Failed() {
			t.Logf("plugin logs:\n%s", logs.String())
		}
	}()
	var stdout bytes.Buffer
	c, err := sdk.Load(ctx, name, sdk.LoadOptions{Path: abs, BaseEnv: o.BaseEnv, Stdout: &stdout, Stderr: logs})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer c.Close()
	lookup := func(k string) (string, bool) { v, ok := o.Env[k]; return v, ok }

	t.Run("describe", func(t *testing.T) {
		d := c.Description()
		if d.Name != name || d.Version == "" {
			t.Errorf("Describe = %+v: want name %q and a version", d, name)
		}
		if d.ProtocolVersion != sdk.ProtocolVersion {
			t.Errorf("negotiated protocol %d, want %d", d.ProtocolVersion, sdk.ProtocolVersion)
		}
		if d.Has(sdk.CapHooks) && len(d.Phases) == 0 {
			t.Error("declares hooks but no phase")
		}
	})

	t.Run("version negotiation", func(t *testing.T) {
		_, err := sdk.Load(ctx, name, sdk.LoadOptions{Path: abs, BaseEnv: o.BaseEnv, Versions: []int{99}, Stderr: logs})
		if err == nil || !strings.Contains(err.Error(), "protocol") {
			t.Errorf("a host speaking only protocol 99 must be refused with a clear error, got %v", err)
		}
	})

	if err := c.Configure(ctx, o.Config, lookup); err != nil {
		t.Fatalf("Configure: %v", err)
	}

	t.Run("capability honesty", func(t *testing.T) {
		for _, capability := range []sdk.Capability{sdk.CapPreflight, sdk.CapKindConfig, sdk.CapHooks, sdk.CapPivotInputs, sdk.CapTeardownPolicy, sdk.CapDiscover, sdk.CapSweep} {
			err := c.Probe(ctx, capability)
			declared := c.Description().Has(capability)
			switch {
			case declared && errors.Is(err, sdk.ErrNotSupported):
				t.Errorf("declares %s but answers not supported", capability)
			case !declared && !errors.Is(err, sdk.ErrNotSupported):
				t.Errorf("does not declare %s but serves it (err %v): undeclared capabilities must answer UNIMPLEMENTED", capability, err)
			case !declared:
				var ce *sdk.CapabilityError
				if err := hostCall(ctx, c, capability); !errors.As(err, &ce) || ce.Plugin != name || ce.Capability != capability {
					t.Errorf("host call of undeclared %s: %v, want a CapabilityError naming %s and %s", capability, err, name, capability)
				}
			}
		}
	})

	if c.Description().Has(sdk.CapTeardownPolicy) {
		t.Run("teardown policy", func(t *testing.T) {
			pol, err := c.TeardownPolicy(ctx)
			if err != nil {
				t.Fatalf("TeardownPolicy: %v", err)
			}
			// The host deletes these by exact name: each must be one.
			for _, s := range pol.Secrets {
				if ns, name, ok := strings.Cut(s, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
					t.Errorf("TeardownPolicy names Secret %q: want namespace/name", s)
				}
			}
		})
	}

	if c.Description().Has(sdk.CapDiscover) {
		t.Run("streaming and cancellation", func(t *testing.T) {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			start := time.Now()
			events := 0
			err := c.Discover(cctx, func(sdk.DiscoverEvent) error {
				events++
				cancel()
				return nil
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Discover: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("cancelled Discover took %v", d)
			}
			// The plugin must still serve calls after a cancelled stream.
			if err := c.Probe(ctx, sdk.CapDiscover); err != nil {
				t.Errorf("a call after the cancelled stream: %v", err)
			}
		})
	}

	t.Run("stderr only", func(t *testing.T) {
		if stdout.Len() > 0 {
			t.Errorf("the plugin wrote to stdout after its handshake: %q", stdout.String())
		}
	})

	t.Run("exits when its host dies", func(t *testing.T) {
		exitsWithHost(t, binary)
	})
}

// hostCall calls capability through the host API with harmless inputs.
func hostCall(ctx context.Context, c *sdk.Client, capability sdk.Capability) error {
	var err error
	switch capability {
	case sdk.CapPreflight:
		_, err = c.Preflight(ctx)
	case sdk.CapKindConfig:
		var kc sdk.KindConfig
		if kc, err = c.KindConfig(ctx); err == nil {
			err = checkKindConfig(kc)
		}
	case sdk.CapHooks:
		_, err = c.Hook(ctx, sdk.HookRequest{Phase: sdk.PhaseAfterKindCreate})
	case sdk.CapPivotInputs:
		_, err = c.PivotInputs(ctx, sdk.PivotInputsRequest{})
	case sdk.CapTeardownPolicy:
		_, err = c.TeardownPolicy(ctx)
	case sdk.CapDiscover:
		err = c.Discover(ctx, func(sdk.DiscoverEvent) error { return errors.New("stop") })
	case sdk.CapSweep:
		err = c.Sweep(ctx, sdk.SweepRequest{DryRun: true}, func(sdk.SweepEvent) error { return nil })
	}
	return err
}

// checkKindConfig refuses what a host would: registry settings as a
// containerd patch (containerd will not start with them beside the hosts
// directory hosts configure), and a mirror without a registry or an
// endpoint.
func checkKindConfig(kc sdk.KindConfig) error {
	for _, p := range kc.ContainerdConfigPatches {
		for _, bad := range []string{".registry.mirrors", ".registry.configs", "config_path"} {
			if strings.Contains(p, bad) {
				return fmt.Errorf("KindConfig: a containerd patch sets %q: send registry mirrors as RegistryMirrors", strings.TrimPrefix(bad, "."))
			}
		}
	}
	for _, m := range kc.RegistryMirrors {
		if m.Registry == "" || len(m.Endpoints) == 0 {
			return fmt.Errorf("KindConfig: registry mirror %+v needs a registry and at least one endpoint", m)
		}
	}
	return nil
}

func exitsWithHost(t *testing.T, binary string) {
	var parts []string
	for _, p := range strings.Split(t.Name(), "/") {
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	// Re-run this very test as the host, up to the Run call.
	pattern := strings.Join(parts[:len(parts)-1], "/")
	cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), hostEnv+"="+filepath.Base(binary))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	helperErr := &sdktest.Buffer{}
	cmd.Stderr = helperErr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := 0
	var helperOut strings.Builder
	sc := bufio.NewScanner(out)
	// Generous: the helper is this test binary started again (a race
	// build under CI's load took over 30 s to load the plugin once); the
	// property under test is the 2 s after the kill, below.
	deadline := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	for sc.Scan() {
		helperOut.WriteString(sc.Text() + "\n")
		if rest, ok := strings.CutPrefix(sc.Text(), "KROPS_PLUGIN_PID "); ok {
			pid, _ = strconv.Atoi(rest)
			break
		}
	}
	deadline.Stop()
	if pid == 0 {
		t.Fatalf("the host helper never reported the plugin's pid:\n%s%s", helperOut.String(), helperErr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	start := time.Now()
	for procfs.Alive(pid) {
		if time.Since(start) > 2*time.Second {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("plugin pid %d still runs 2 s after its host was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func playHost(binary string, o Options) {
	abs, _ := filepath.Abs(binary)
	name := strings.TrimPrefix(filepath.Base(abs), sdk.ExecutablePrefix)
	c, err := sdk.Load(context.Background(), name, sdk.LoadOptions{Path: abs, BaseEnv: o.BaseEnv})
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance host: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("KROPS_PLUGIN_PID %d\n", c.PID())
	time.Sleep(time.Minute)
	os.Exit(1)
}
