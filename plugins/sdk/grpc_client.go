package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/kropsdev/krops/plugins/sdk/proto/providerv1"
)

// Client is a host's typed handle on a running provider plugin. It checks
// declared capabilities before every call, so asking for one the plugin
// lacks is a CapabilityError naming both, never a silent no-op.
type Client struct {
	// Name is the provider name; Path the executable that serves it.
	Name string
	Path string
	rpc  pb.ProviderClient
	desc Description
	kill func()
	pid  int
}

func newClient(name, path string, rpc pb.ProviderClient, kill func()) (*Client, error) {
	c := &Client{Name: name, Path: path, rpc: rpc, kill: kill}
	resp, err := rpc.Describe(context.Background(), &pb.DescribeRequest{})
	if err != nil {
		return nil, c.wrap("Describe", err)
	}
	d := Description{Name: resp.GetName(), Version: resp.GetVersion(), ProtocolVersion: int(resp.GetProtocolVersion()), ConfigKeys: resp.GetConfigKeys(), Env: resp.GetEnv()}
	for _, x := range resp.GetCapabilities() {
		if v, ok := capFromPB[x]; ok {
			d.Capabilities = append(d.Capabilities, v)
		}
	}
	for _, x := range resp.GetPhases() {
		if v, ok := phaseFromPB[x]; ok {
			d.Phases = append(d.Phases, v)
		}
	}
	if d.Name != name {
		return nil, fmt.Errorf("plugin %s describes itself as provider %q, not %q: rename the executable or fix its Describe", path, d.Name, name)
	}
	c.desc = d
	return c, nil
}

// Description is what the plugin declared.
func (c *Client) Description() Description { return c.desc }

// Close stops the plugin process.
func (c *Client) Close() {
	if c.kill != nil {
		c.kill()
	}
}

func (c *Client) need(capability Capability) error {
	if !c.desc.Has(capability) {
		return &CapabilityError{Plugin: c.Name, Capability: capability}
	}
	return nil
}

// wrap names the plugin and call in a plugin error and keeps cancellation
// recognisable with errors.Is.
func (c *Client) wrap(call string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("provider %s: %s: %w", c.Name, call, err)
	}
	switch st.Code() {
	case codes.Canceled:
		return fmt.Errorf("provider %s: %s: %w", c.Name, call, context.Canceled)
	case codes.DeadlineExceeded:
		return fmt.Errorf("provider %s: %s: %w", c.Name, call, context.DeadlineExceeded)
	case codes.Aborted:
		return fmt.Errorf("provider %s: %s: %w", c.Name, call, marked(st.Message(), ErrUnknownState))
	case codes.Unimplemented:
		return fmt.Errorf("provider %s: %s: %w", c.Name, call, marked(st.Message(), ErrNotSupported))
	case codes.PermissionDenied:
		return fmt.Errorf("provider %s: %s: %w", c.Name, call, marked(st.Message(), ErrRefused))
	}
	return fmt.Errorf("provider %s: %s: %s", c.Name, call, st.Message())
}

// markedError is a plugin's message that errors.Is reads as one of the
// SDK's sentinels. A Go plugin's message already ends with the sentinel's
// text (its error wrapped it), so it is said once: "…to the list: refused",
// not "…: refused: refused". A plugin in another language gets it added.
type markedError struct {
	msg      string
	sentinel error
}

func marked(msg string, sentinel error) error {
	if s := sentinel.Error(); !strings.HasSuffix(msg, s) {
		msg += ": " + s
	}
	return markedError{msg: msg, sentinel: sentinel}
}

func (e markedError) Error() string        { return e.msg }
func (e markedError) Is(target error) bool { return target == e.sentinel }

// ExitCode is the krops exit code a host returns for the plugin's error
// when nothing closer to the user decided one: a refusal is a
// configuration problem (2), unknown state is 3 (the exit-code contract
// holds through the plugin boundary).
func (e markedError) ExitCode() int {
	switch e.sentinel {
	case ErrRefused:
		return 2
	case ErrUnknownState:
		return 3
	}
	return 1
}

// Configure sends the environment's configuration and the values of the
// variables the plugin declared; lookup reads the host's environment.
func (c *Client) Configure(ctx context.Context, cfg Config, lookup func(string) (string, bool)) error {
	env := map[string]string{}
	for _, n := range c.desc.Env {
		if v, ok := lookup(n); ok {
			env[n] = v
		}
	}
	_, err := c.rpc.Configure(ctx, &pb.ConfigureRequest{Environment: cfg.Environment, ConfigJson: cfg.Raw, Env: env, RepoRoot: cfg.RepoRoot})
	return c.wrap("Configure", err)
}

// Preflight runs the plugin's read-only checks.
func (c *Client) Preflight(ctx context.Context) ([]Check, error) {
	if err := c.need(CapPreflight); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Preflight(ctx, &pb.PreflightRequest{})
	if err != nil {
		return nil, c.wrap("Preflight", err)
	}
	var out []Check
	for _, x := range resp.GetChecks() {
		out = append(out, Check{Name: x.GetName(), OK: x.GetOk(), Message: x.GetMessage(), Remedy: x.GetRemedy()})
	}
	return out, nil
}

// KindConfig asks for the plugin's additions to the kind cluster config.
func (c *Client) KindConfig(ctx context.Context) (KindConfig, error) {
	if err := c.need(CapKindConfig); err != nil {
		return KindConfig{}, err
	}
	resp, err := c.rpc.KindConfig(ctx, &pb.KindConfigRequest{})
	if err != nil {
		return KindConfig{}, c.wrap("KindConfig", err)
	}
	kc := KindConfig{ContainerdConfigPatches: resp.GetContainerdConfigPatches()}
	for _, m := range resp.GetRegistryMirrors() {
		kc.RegistryMirrors = append(kc.RegistryMirrors, RegistryMirror{Registry: m.GetRegistry(), Endpoints: m.GetEndpoints()})
	}
	return kc, nil
}

// Hook runs the plugin's hook for phase. A plugin that declares hooks but not
// this phase is not called.
func (c *Client) Hook(ctx context.Context, req HookRequest) (HookResult, error) {
	if err := c.need(CapHooks); err != nil {
		return HookResult{}, err
	}
	handled := false
	for _, p := range c.desc.Phases {
		handled = handled || p == req.Phase
	}
	if !handled {
		return HookResult{}, nil
	}
	resp, err := c.rpc.Hook(ctx, &pb.HookRequest{Phase: phaseToPB[req.Phase], Kubeconfig: req.Kubeconfig, Context: req.Context})
	if err != nil {
		return HookResult{}, c.wrap("Hook "+string(req.Phase), err)
	}
	return HookResult{Messages: resp.GetMessages(), Manifests: resp.GetManifests()}, nil
}

// PivotInputs asks what the pivot must apply and how to reach the target.
func (c *Client) PivotInputs(ctx context.Context, req PivotInputsRequest) (PivotInputs, error) {
	if err := c.need(CapPivotInputs); err != nil {
		return PivotInputs{}, err
	}
	resp, err := c.rpc.PivotInputs(ctx, &pb.PivotInputsRequest{Kubeconfig: req.Kubeconfig, InToolbox: req.InToolbox, Cluster: req.Cluster})
	if err != nil {
		return PivotInputs{}, c.wrap("PivotInputs", err)
	}
	return PivotInputs{Manifests: resp.GetManifests(), Server: resp.GetServer()}, nil
}

// TeardownPolicy asks how the environment is torn down.
func (c *Client) TeardownPolicy(ctx context.Context) (TeardownPolicy, error) {
	if err := c.need(CapTeardownPolicy); err != nil {
		return TeardownPolicy{}, err
	}
	p, err := c.rpc.TeardownPolicy(ctx, &pb.TeardownPolicyRequest{})
	if err != nil {
		return TeardownPolicy{}, c.wrap("TeardownPolicy", err)
	}
	return TeardownPolicy{
		HostRemoval: removalFromPB[p.GetHostRemoval()], ContainerPrefix: p.GetContainerPrefix(),
		CloudOnlySweepAllowed: p.GetCloudOnlySweepAllowed(), Manual: p.GetManual(), Notices: p.GetNotices(),
		DeleteAllClusters: p.GetDeleteAllClusters(), RemoveLast: p.GetRemoveLast(), Secrets: p.GetSecrets(),
	}, nil
}

// Discover streams the plugin's findings to fn as they arrive. An error from
// fn stops the stream and is returned.
func (c *Client) Discover(ctx context.Context, fn func(DiscoverEvent) error) error {
	if err := c.need(CapDiscover); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Discover(ctx, &pb.DiscoverRequest{})
	if err != nil {
		return c.wrap("Discover", err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.wrap("Discover", err)
		}
		var e DiscoverEvent
		if r := ev.GetResource(); r != nil {
			res := resourceFromPB(r)
			e.Resource = &res
		} else if q := ev.GetError(); q != nil {
			e.Error = &QueryError{Kind: q.GetKind(), Region: q.GetRegion(), Message: q.GetMessage()}
		} else if sc := ev.GetScope(); sc != nil {
			e.Scope = &Scope{Account: sc.GetAccount(), Regions: sc.GetRegions()}
		} else if s := ev.GetSuspect(); s != nil {
			res := resourceFromPB(s)
			e.Suspect = &res
		} else {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// SweepStopGrace is how long Sweep waits, once its context ends, for the
// plugin to stop and end the stream before cutting it off. A plugin built
// with this SDK stops at once; one that ignores SIGINT keeps sweeping for
// this long, and everything it reports in that time still reaches fn.
const SweepStopGrace = 5 * time.Second

// Sweep streams the sweep of req.Scope to fn. When ctx ends, Sweep does
// not cut the stream: it asks the plugin to stop (SIGINT, which Serve turns
// into cancelling the sweep's context) and goes on reading until the
// stream ends, so every event the plugin sent before it stopped reaches fn.
// Cancelling the RPC instead drops the events still on the wire, and a
// deletion the plugin announced just before the interrupt would never be
// reported as in flight. The stream is cut after SweepStopGrace, or at once
// when the plugin cannot be signalled (no process id, or a platform
// without SIGINT).
func (c *Client) Sweep(ctx context.Context, req SweepRequest, fn func(SweepEvent) error) error {
	if err := c.need(CapSweep); err != nil {
		return err
	}
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	finished := make(chan struct{})
	defer close(finished)
	stopWatching := context.AfterFunc(ctx, func() {
		if !c.interrupt() {
			cancel()
			return
		}
		t := time.NewTimer(SweepStopGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-finished:
		}
	})
	defer stopWatching()
	ctx = streamCtx
	in := &pb.SweepRequest{DryRun: req.DryRun, MaxIdlePasses: uint32(req.MaxIdlePasses)}
	for _, r := range req.Scope {
		in.Scope = append(in.Scope, resourceToPB(r))
	}
	stream, err := c.rpc.Sweep(ctx, in)
	if err != nil {
		return c.wrap("Sweep", err)
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return c.wrap("Sweep", err)
		}
		if err := fn(SweepEvent{Resource: resourceFromPB(ev.GetResource()), State: stateFromPB[ev.GetState()], Message: ev.GetMessage(), Attempt: int(ev.GetAttempt())}); err != nil {
			return err
		}
	}
}

// interrupt sends the plugin SIGINT, reporting whether it was delivered.
func (c *Client) interrupt() bool {
	if c.pid <= 0 {
		return false
	}
	p, err := os.FindProcess(c.pid)
	if err != nil {
		return false
	}
	return p.Signal(os.Interrupt) == nil
}

// PID is the plugin process id (0 when reattached to a debugged plugin).
func (c *Client) PID() int { return c.pid }

// Probe calls the RPC behind capability directly, skipping the host-side
// capability check, with inputs that change nothing: a hook with no phase, a
// dry-run sweep of an empty scope, a discover cancelled after its first
// event. It returns an error wrapping ErrNotSupported when the plugin answers
// UNIMPLEMENTED, and nil when the call was served (whatever it answered).
// The conformance suite uses it to check that a plugin is honest about its
// capabilities.
func (c *Client) Probe(ctx context.Context, capability Capability) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var err error
	switch capability {
	case CapPreflight:
		_, err = c.rpc.Preflight(ctx, &pb.PreflightRequest{})
	case CapKindConfig:
		_, err = c.rpc.KindConfig(ctx, &pb.KindConfigRequest{})
	case CapHooks:
		_, err = c.rpc.Hook(ctx, &pb.HookRequest{Phase: pb.Phase_PHASE_UNSPECIFIED})
	case CapPivotInputs:
		_, err = c.rpc.PivotInputs(ctx, &pb.PivotInputsRequest{})
	case CapTeardownPolicy:
		_, err = c.rpc.TeardownPolicy(ctx, &pb.TeardownPolicyRequest{})
	case CapDiscover:
		var s pb.Provider_DiscoverClient
		if s, err = c.rpc.Discover(ctx, &pb.DiscoverRequest{}); err == nil {
			_, err = s.Recv()
		}
	case CapSweep:
		var s pb.Provider_SweepClient
		if s, err = c.rpc.Sweep(ctx, &pb.SweepRequest{DryRun: true}); err == nil {
			_, err = s.Recv()
		}
	default:
		return fmt.Errorf("unknown capability %q", capability)
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		return c.wrap(string(capability), err)
	}
	return nil
}
