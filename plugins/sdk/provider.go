// Package sdk is the Go SDK of the krops provider protocol: the interface a
// provider implements, Serve for plugin mains, and Load for hosts. The gRPC
// adapters live apart (grpc_server.go, grpc_client.go) so provider authors
// only see plain Go types.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ProtocolVersion is the provider protocol version this SDK speaks.
const ProtocolVersion = 1

// Handshake values. They never change: a host and a plugin that disagree on
// them refuse each other before any call, which is what keeps an unrelated
// program named krops-provider-x from being driven as a provider.
const (
	MagicCookieKey   = "KROPS_PROVIDER_PLUGIN"
	MagicCookieValue = "c3b1f6a4-krops-provider-e8d2"
)

// pluginName is the go-plugin plugin-set key.
const pluginName = "provider"

// Capability is something a provider can do beyond Describe and Configure.
type Capability string

// Capabilities.
const (
	CapPreflight      Capability = "preflight"
	CapHooks          Capability = "hooks"
	CapPivotInputs    Capability = "pivot-inputs"
	CapTeardownPolicy Capability = "teardown-policy"
	CapDiscover       Capability = "discover"
	CapSweep          Capability = "sweep"
	CapKindConfig     Capability = "kind-config"
)

// Phase is a lifecycle moment a hook runs at.
type Phase string

// Phases.
const (
	PhaseAfterKindCreate Phase = "after-kind-create"
)

// Description is what Describe returns.
type Description struct {
	Name    string
	Version string
	// ProtocolVersion is filled in by the SDK.
	ProtocolVersion int
	Capabilities    []Capability
	Phases          []Phase
	// ConfigKeys are the keys the provider adds to bootstrap.toml, which
	// the host's schema does not know: "environments.*.<key>" in the table
	// of every environment the provider serves (teardown.<key> for its
	// [teardown] table), "providers.*.<key>" in its own [providers.<name>]
	// table. A key declared as a table or an array covers what is inside.
	// The host refuses, with exit 2, a key of this provider's that is
	// neither krops's nor declared here; Configure checks the values.
	ConfigKeys []string
	// Env names the environment variables the provider needs. The host sends
	// their values with Configure and starts the plugin without the rest of
	// its environment.
	Env []string
}

// Has reports whether the description declares c.
func (d Description) Has(c Capability) bool {
	for _, x := range d.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Config is what Configure receives.
type Config struct {
	Environment string
	// Raw is {"bootstrap": {...}, "environment": {...}, "provider": {...}}
	// with bootstrap.toml's kebab-case keys; Decode reads it into a
	// provider's own struct.
	Raw      json.RawMessage
	Env      map[string]string
	RepoRoot string
}

// Decode unmarshals the configuration into v.
func (c Config) Decode(v any) error {
	if len(c.Raw) == 0 {
		return errors.New("no configuration was sent")
	}
	if err := json.Unmarshal(c.Raw, v); err != nil {
		return fmt.Errorf("decoding the configuration of environment %s: %w", c.Environment, err)
	}
	return nil
}

// Check is one preflight result.
type Check struct {
	Name    string
	OK      bool
	Message string
	Remedy  string
}

// KindConfig is a provider's contribution to the kind cluster config.
type KindConfig struct {
	// ContainerdConfigPatches are TOML snippets for the nodes' containerd.
	// Not for registry mirrors: the host refuses a patch with a
	// `registry.mirrors` or `registry.configs` table (containerd refuses it
	// beside the hosts directory the host configures).
	ContainerdConfigPatches []string
	// RegistryMirrors send a registry's pulls to other endpoints.
	RegistryMirrors []RegistryMirror
}

// RegistryMirror sends image pulls for Registry ("docker.io",
// "localhost:5001") to Endpoints (http:// or https:// URLs, no
// credentials), tried in order before the registry itself.
type RegistryMirror struct {
	Registry  string
	Endpoints []string
}

// HookRequest is the input of a hook.
type HookRequest struct {
	Phase      Phase
	Kubeconfig string
	Context    string
}

// HookResult is what a hook did and what it asks the host to apply.
type HookResult struct {
	// Messages are shown to the user, one line each.
	Messages []string
	// Manifests are YAML documents the host server-side applies on the
	// cluster the phase concerns once the hook returns (the Secrets and
	// ConfigMaps the provider's controllers read, for example). They may
	// hold secrets: they travel only over the plugin connection, and the
	// host names the objects, never their data.
	Manifests [][]byte
}

// PivotInputsRequest is the input of PivotInputs.
type PivotInputsRequest struct {
	Kubeconfig []byte
	InToolbox  bool
	// Cluster is the Cluster the kubeconfig belongs to; "" is the
	// management cluster. For another cluster only Server is read.
	Cluster string
}

// PivotInputs is what the pivot needs from the provider.
type PivotInputs struct {
	Manifests [][]byte
	// Server replaces the kubeconfig's server when non-empty.
	Server string
}

// HostRemoval says how the management cluster's host goes away.
type HostRemoval string

// Host removal modes.
const (
	RemoveByDeletingCluster HostRemoval = "delete-cluster"
	RemoveContainers        HostRemoval = "remove-containers"
	RemoveManually          HostRemoval = "manual"
)

// TeardownPolicy is how an environment is torn down.
type TeardownPolicy struct {
	HostRemoval           HostRemoval
	ContainerPrefix       string
	CloudOnlySweepAllowed bool
	Manual                string
	Notices               []string
	DeleteAllClusters     bool
	RemoveLast            []string
	// Secrets are the Secrets ("namespace/name") the provider's Hook and
	// PivotInputs write on the controller host: teardown deletes them after
	// the providers that read them.
	Secrets []string
}

// Resource is a cloud resource a provider found.
type Resource struct {
	Kind    string
	ID      string
	Region  string
	Cluster string
	// CreatedAt is nil when the cloud does not say.
	CreatedAt *time.Time
	Tags      map[string]string
	Evidence  []string
	DependsOn []string
}

// QueryError is a discovery query that failed: that kind in that region is
// unknown, not empty.
type QueryError struct {
	Kind    string
	Region  string
	Message string
}

// Scope says what a discovery covers: the account and regions scanned.
type Scope struct {
	Account string
	Regions []string
}

// DiscoverEvent carries one of a resource, a query error, the scope (sent
// first) or a suspect.
type DiscoverEvent struct {
	Resource *Resource
	Error    *QueryError
	Scope    *Scope
	// Suspect looks like the environment's but carries no evidence that it
	// is (a name that merely begins like ours, or a tag naming a cluster
	// outside the environment). Its Evidence says why it is suspect. Hosts
	// report suspects for review and never put them in a sweep's scope.
	Suspect *Resource
}

// SweepRequest asks for deletion of exactly Scope.
type SweepRequest struct {
	DryRun        bool
	Scope         []Resource
	MaxIdlePasses int
}

// SweepState is a resource's state during a sweep.
type SweepState string

// Sweep states.
const (
	SweepPlanned  SweepState = "planned"
	SweepDeleting SweepState = "deleting"
	SweepDeleted  SweepState = "deleted"
	SweepSkipped  SweepState = "skipped"
	SweepRetrying SweepState = "retrying"
	SweepFailed   SweepState = "failed"
)

// SweepEvent is one state change.
type SweepEvent struct {
	Resource Resource
	State    SweepState
	Message  string
	Attempt  int
}

// Provider is what a provider implements. Embed Unimplemented to answer
// "not supported" for every capability the provider does not declare.
type Provider interface {
	Describe(ctx context.Context) (Description, error)
	Configure(ctx context.Context, cfg Config) error
	Preflight(ctx context.Context) ([]Check, error)
	KindConfig(ctx context.Context) (KindConfig, error)
	Hook(ctx context.Context, req HookRequest) (HookResult, error)
	PivotInputs(ctx context.Context, req PivotInputsRequest) (PivotInputs, error)
	TeardownPolicy(ctx context.Context) (TeardownPolicy, error)
	// Discover calls emit for each event; emit fails when the host has gone
	// or cancelled, and Discover should then return that error.
	Discover(ctx context.Context, emit func(DiscoverEvent) error) error
	Sweep(ctx context.Context, req SweepRequest, emit func(SweepEvent) error) error
}

// Unimplemented answers ErrNotSupported for every optional method.
type Unimplemented struct{}

// ErrUnknownState is returned when a provider could not read the cloud well
// enough to act safely: nothing destructive was done.
var ErrUnknownState = errors.New("unknown state: nothing destructive was done")

// ErrRefused is returned when a provider refuses to work where it was
// pointed (an account outside the allow-list, say): nothing was read or
// changed. Hosts exit 2, as for a configuration error.
var ErrRefused = errors.New("refused")

// ErrNotSupported is returned for an undeclared capability.
var ErrNotSupported = errors.New("not supported by this provider")

// Preflight is not supported.
func (Unimplemented) Preflight(context.Context) ([]Check, error) { return nil, ErrNotSupported }

// KindConfig is not supported.
func (Unimplemented) KindConfig(context.Context) (KindConfig, error) {
	return KindConfig{}, ErrNotSupported
}

// Hook is not supported.
func (Unimplemented) Hook(context.Context, HookRequest) (HookResult, error) {
	return HookResult{}, ErrNotSupported
}

// PivotInputs is not supported.
func (Unimplemented) PivotInputs(context.Context, PivotInputsRequest) (PivotInputs, error) {
	return PivotInputs{}, ErrNotSupported
}

// TeardownPolicy is not supported.
func (Unimplemented) TeardownPolicy(context.Context) (TeardownPolicy, error) {
	return TeardownPolicy{}, ErrNotSupported
}

// Discover is not supported.
func (Unimplemented) Discover(context.Context, func(DiscoverEvent) error) error {
	return ErrNotSupported
}

// Sweep is not supported.
func (Unimplemented) Sweep(context.Context, SweepRequest, func(SweepEvent) error) error {
	return ErrNotSupported
}

// CapabilityError is returned by a host asking for a capability the plugin
// does not declare.
type CapabilityError struct {
	Plugin     string
	Capability Capability
}

func (e *CapabilityError) Error() string {
	return fmt.Sprintf("provider plugin %s does not support %s: it does not declare that capability", e.Plugin, e.Capability)
}
