package sdk

import (
	"context"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/kropsdev/krops/plugins/sdk/proto/providerv1"
)

// grpcServer adapts a Provider to the generated gRPC service. It enforces
// capability honesty: an undeclared capability answers UNIMPLEMENTED whatever
// the provider's method would do.
type grpcServer struct {
	pb.UnimplementedProviderServer
	impl    Provider
	desc    Description
	version int
	// intr stops sweeps gracefully on SIGINT (see interrupts); nil in
	// servers not started by Serve.
	intr *interrupts
}

func newGRPCServer(impl Provider, version int) (*grpcServer, error) {
	d, err := impl.Describe(context.Background())
	if err != nil {
		return nil, fmt.Errorf("describing the provider: %w", err)
	}
	d.ProtocolVersion = version
	return &grpcServer{impl: impl, desc: d, version: version}, nil
}

func (s *grpcServer) require(c Capability) error {
	if !s.desc.Has(c) {
		return status.Errorf(codes.Unimplemented, "provider %s does not support %s", s.desc.Name, c)
	}
	return nil
}

// toStatus maps provider errors onto gRPC codes the host understands.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotSupported):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrUnknownState):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, ErrRefused):
		return status.Error(codes.PermissionDenied, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}

// ErrInvalidArgument marks a request the provider cannot act on (for
// example a hook phase it does not handle).
var ErrInvalidArgument = errors.New("invalid argument")

func (s *grpcServer) Describe(ctx context.Context, _ *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	out := &pb.DescribeResponse{Name: s.desc.Name, Version: s.desc.Version, ProtocolVersion: uint32(s.version), ConfigKeys: s.desc.ConfigKeys, Env: s.desc.Env}
	for _, c := range s.desc.Capabilities {
		if v, ok := capToPB[c]; ok {
			out.Capabilities = append(out.Capabilities, v)
		}
	}
	for _, p := range s.desc.Phases {
		if v, ok := phaseToPB[p]; ok {
			out.Phases = append(out.Phases, v)
		}
	}
	return out, nil
}

func (s *grpcServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	env := map[string]string{}
	declared := map[string]bool{}
	for _, n := range s.desc.Env {
		declared[n] = true
	}
	for k, v := range req.GetEnv() {
		if !declared[k] {
			return nil, status.Errorf(codes.InvalidArgument, "variable %s was not declared by provider %s", k, s.desc.Name)
		}
		env[k] = v
		// SDKs such as AWS's read their settings from the process
		// environment; the plugin process serves exactly one host.
		if err := os.Setenv(k, v); err != nil {
			return nil, status.Errorf(codes.Internal, "setting %s: %v", k, err)
		}
	}
	err := s.impl.Configure(ctx, Config{Environment: req.GetEnvironment(), Raw: req.GetConfigJson(), Env: env, RepoRoot: req.GetRepoRoot()})
	return &pb.ConfigureResponse{}, toStatus(err)
}

func (s *grpcServer) Preflight(ctx context.Context, _ *pb.PreflightRequest) (*pb.PreflightResponse, error) {
	if err := s.require(CapPreflight); err != nil {
		return nil, err
	}
	checks, err := s.impl.Preflight(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.PreflightResponse{}
	for _, c := range checks {
		out.Checks = append(out.Checks, &pb.Check{Name: c.Name, Ok: c.OK, Message: c.Message, Remedy: c.Remedy})
	}
	return out, nil
}

func (s *grpcServer) KindConfig(ctx context.Context, _ *pb.KindConfigRequest) (*pb.KindConfigResponse, error) {
	if err := s.require(CapKindConfig); err != nil {
		return nil, err
	}
	kc, err := s.impl.KindConfig(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.KindConfigResponse{ContainerdConfigPatches: kc.ContainerdConfigPatches}
	for _, m := range kc.RegistryMirrors {
		resp.RegistryMirrors = append(resp.RegistryMirrors, &pb.RegistryMirror{Registry: m.Registry, Endpoints: m.Endpoints})
	}
	return resp, nil
}

func (s *grpcServer) Hook(ctx context.Context, req *pb.HookRequest) (*pb.HookResponse, error) {
	if err := s.require(CapHooks); err != nil {
		return nil, err
	}
	phase, ok := phaseFromPB[req.GetPhase()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "unknown hook phase %v", req.GetPhase())
	}
	res, err := s.impl.Hook(ctx, HookRequest{Phase: phase, Kubeconfig: req.GetKubeconfig(), Context: req.GetContext()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.HookResponse{Messages: res.Messages, Manifests: res.Manifests}, nil
}

func (s *grpcServer) PivotInputs(ctx context.Context, req *pb.PivotInputsRequest) (*pb.PivotInputsResponse, error) {
	if err := s.require(CapPivotInputs); err != nil {
		return nil, err
	}
	in, err := s.impl.PivotInputs(ctx, PivotInputsRequest{Kubeconfig: req.GetKubeconfig(), InToolbox: req.GetInToolbox(), Cluster: req.GetCluster()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PivotInputsResponse{Manifests: in.Manifests, Server: in.Server}, nil
}

func (s *grpcServer) TeardownPolicy(ctx context.Context, _ *pb.TeardownPolicyRequest) (*pb.TeardownPolicyResponse, error) {
	if err := s.require(CapTeardownPolicy); err != nil {
		return nil, err
	}
	p, err := s.impl.TeardownPolicy(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.TeardownPolicyResponse{
		HostRemoval: removalToPB[p.HostRemoval], ContainerPrefix: p.ContainerPrefix,
		CloudOnlySweepAllowed: p.CloudOnlySweepAllowed, Manual: p.Manual, Notices: p.Notices,
		DeleteAllClusters: p.DeleteAllClusters, RemoveLast: p.RemoveLast, Secrets: p.Secrets,
	}, nil
}

func (s *grpcServer) Discover(_ *pb.DiscoverRequest, stream pb.Provider_DiscoverServer) error {
	if err := s.require(CapDiscover); err != nil {
		return err
	}
	err := s.impl.Discover(stream.Context(), func(e DiscoverEvent) error {
		ev := &pb.DiscoverEvent{}
		switch {
		case e.Resource != nil:
			ev.Event = &pb.DiscoverEvent_Resource{Resource: resourceToPB(*e.Resource)}
		case e.Error != nil:
			ev.Event = &pb.DiscoverEvent_Error{Error: &pb.QueryError{Kind: e.Error.Kind, Region: e.Error.Region, Message: e.Error.Message}}
		case e.Scope != nil:
			ev.Event = &pb.DiscoverEvent_Scope{Scope: &pb.Scope{Account: e.Scope.Account, Regions: e.Scope.Regions}}
		case e.Suspect != nil:
			ev.Event = &pb.DiscoverEvent_Suspect{Suspect: resourceToPB(*e.Suspect)}
		default:
			return errors.New("empty discover event")
		}
		return stream.Send(ev)
	})
	return toStatus(err)
}

func (s *grpcServer) Sweep(req *pb.SweepRequest, stream pb.Provider_SweepServer) error {
	if err := s.require(CapSweep); err != nil {
		return err
	}
	in := SweepRequest{DryRun: req.GetDryRun(), MaxIdlePasses: int(req.GetMaxIdlePasses())}
	for _, r := range req.GetScope() {
		in.Scope = append(in.Scope, resourceFromPB(r))
	}
	ctx, release := s.intr.stopOnInterrupt(stream.Context())
	defer release()
	err := s.impl.Sweep(ctx, in, func(e SweepEvent) error {
		return stream.Send(&pb.SweepEvent{Resource: resourceToPB(e.Resource), State: stateToPB[e.State], Message: e.Message, Attempt: uint32(e.Attempt)})
	})
	return toStatus(err)
}
