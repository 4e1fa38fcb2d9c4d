// Command testplugin is a provider plugin for the SDK's own tests. Its
// behaviour is chosen by TESTPLUGIN_MODE in its base environment:
//
//	v1v2     offers protocol versions 1 and 2
//	v2only   offers only version 2
//	stdout   writes to stdout before the handshake
//	child    starts a child that inherits stdout and stderr and outlives
//	         nothing on its own (sleep 300), writes its pid to
//	         TESTPLUGIN_PIDFILE, then serves
//	(empty)  a provider that streams Discover until cancelled, reports the
//	         environment it sees from Preflight, logs at each level, and
//	         sweeps by announcing every deletion and waiting to be stopped
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kropsdev/krops/plugins/sdk"
)

type provider struct {
	sdk.Unimplemented
	log hclog.Logger
}

func (p *provider) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name: "testplugin", Version: "0.0.1",
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapDiscover, sdk.CapSweep},
		Env:          []string{"TESTPLUGIN_DECLARED"},
	}, nil
}

func (p *provider) Configure(context.Context, sdk.Config) error {
	p.log.Warn("configured", "level", "warn")
	p.log.Debug("configured in detail")
	return nil
}

// Preflight reports every variable of the plugin's environment as a check
// name, so tests can see exactly what reached it.
func (p *provider) Preflight(context.Context) ([]sdk.Check, error) {
	var names []string
	for _, kv := range os.Environ() {
		names = append(names, kv[:strings.Index(kv, "=")])
	}
	sort.Strings(names)
	var out []sdk.Check
	for _, n := range names {
		out = append(out, sdk.Check{Name: n, OK: true, Message: os.Getenv(n)})
	}
	return out, nil
}

// Discover streams numbered resources every 10 ms until cancelled.
func (p *provider) Discover(ctx context.Context, emit func(sdk.DiscoverEvent) error) error {
	for i := 0; ; i++ {
		r := sdk.Resource{Kind: "thing", ID: fmt.Sprintf("thing-%d", i)}
		if err := emit(sdk.DiscoverEvent{Resource: &r}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Sweep plans a dry run; otherwise it announces the deletion of every
// resource in scope back to back, as a plugin does before each cloud call,
// and waits until it is stopped. Stopped, it reports each deletion as not
// confirmed: those events can only reach the host if the stream outlives
// the stop, which is what the host's graceful interrupt is for.
func (p *provider) Sweep(ctx context.Context, req sdk.SweepRequest, emit func(sdk.SweepEvent) error) error {
	state := sdk.SweepDeleting
	if req.DryRun {
		state = sdk.SweepPlanned
	}
	for _, r := range req.Scope {
		if err := emit(sdk.SweepEvent{Resource: r, State: state}); err != nil {
			return err
		}
	}
	if req.DryRun || len(req.Scope) == 0 {
		return nil
	}
	<-ctx.Done()
	for _, r := range req.Scope {
		if err := emit(sdk.SweepEvent{Resource: r, State: sdk.SweepFailed, Message: "stopped before the deletion was confirmed"}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func main() {
	p := &provider{log: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Trace})}
	switch os.Getenv("TESTPLUGIN_MODE") {
	case "v1v2":
		sdk.Serve(p, sdk.ServeOptions{Versions: []int{1, 2}})
	case "v2only":
		sdk.Serve(p, sdk.ServeOptions{Versions: []int{2}})
	case "child":
		child := exec.Command("sleep", "300")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.WriteFile(os.Getenv("TESTPLUGIN_PIDFILE"), []byte(fmt.Sprint(child.Process.Pid)), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		sdk.Serve(p, sdk.ServeOptions{})
	case "stdout":
		fmt.Println("hello from a plugin that prints")
		sdk.Serve(p, sdk.ServeOptions{})
	default:
		sdk.Serve(p, sdk.ServeOptions{})
	}
}
