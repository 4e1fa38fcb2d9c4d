package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/kropsdev/krops/plugins/sdk/proto/providerv1"
)

// grpcPlugin is the go-plugin glue for one protocol version.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl    Provider
	version int
	intr    *interrupts
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	srv, err := newGRPCServer(p.impl, p.version)
	if err != nil {
		return err
	}
	srv.intr = p.intr
	pb.RegisterProviderServer(s, srv)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return pb.NewProviderClient(cc), nil
}

func handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		// ProtocolVersion is only the fallback for hosts without
		// VersionedPlugins; both sides here always negotiate.
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// ServeOptions tune Serve; the zero value is right for real plugins.
type ServeOptions struct {
	// Versions are the protocol versions offered; default {1}. Tests offer
	// more to exercise negotiation.
	Versions []int
	// ParentPoll is how often the plugin checks its host is alive; default
	// 250 ms, so the plugin is gone within 2 s of its host.
	ParentPoll time.Duration
}

// DebugEnv, set to 1, serves the plugin in debug mode: it prints a reattach
// line to stderr and waits for a host started with KROPS_REATTACH_PROVIDERS
// set to that line, so the plugin can run under a debugger.
const DebugEnv = "KROPS_PROVIDER_DEBUG"

// Serve serves p as a provider plugin and never returns. Call it from main.
// Logs go to stderr as JSON (the host re-levels them); nothing may be
// written to stdout, which carries the handshake.
func Serve(p Provider, opts ServeOptions) {
	versions := opts.Versions
	if len(versions) == 0 {
		versions = []int{ProtocolVersion}
	}
	intr := watchInterrupts()
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		sets[v] = plugin.PluginSet{pluginName: &grpcPlugin{impl: p, version: v, intr: intr}}
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Trace})
	cfg := &plugin.ServeConfig{
		HandshakeConfig:  handshake(),
		VersionedPlugins: sets,
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           logger,
	}
	if os.Getenv(DebugEnv) == "1" {
		name := "<name>"
		if d, err := p.Describe(context.Background()); err == nil {
			name = d.Name
		}
		serveDebug(cfg, name)
		return
	}
	poll := opts.ParentPoll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	go exitWithParent(poll)
	plugin.Serve(cfg)
}

// exitWithParent ends the plugin when its host dies. go-plugin notices a
// closed connection only when a call is in flight; a host killed with
// SIGKILL between calls would otherwise leave the plugin running.
func exitWithParent(poll time.Duration) {
	parent := os.Getppid()
	for {
		time.Sleep(poll)
		if os.Getppid() != parent {
			os.Exit(3)
		}
	}
}

func serveDebug(cfg *plugin.ServeConfig, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan *plugin.ReattachConfig, 1)
	cfg.Test = &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: ch}
	go plugin.Serve(cfg)
	rc := <-ch
	line, _ := json.Marshal(map[string]reattach{name: reattachFromConfig(rc)})
	fmt.Fprintf(os.Stderr, "krops provider %s in debug mode; run the host with:\n%s=%s\n", name, ReattachEnv, line)
	<-ctx.Done()
}
