// Package jsoncloud is the example third-party provider of docs/plugins.md:
// a small fake cloud whose resources live in a JSON file (JSONCLOUD_STATE).
// It shows every part of a provider: Describe, Configure, a read-only
// Preflight, a teardown policy, streamed Discover, and a Sweep on the SDK's
// engine that deletes only its scope, in dependency order, and honours
// dry-run. The plugin main
// is ../krops-provider-jsoncloud.
package jsoncloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/sweep"
)

// state is the fake cloud: everything it holds.
type state struct {
	// Account names the fake cloud account.
	Account   string     `json:"account,omitempty"`
	Resources []resource `json:"resources"`
	// FailingKinds simulates an outage of the API behind these kinds:
	// listing them fails.
	FailingKinds []string `json:"failing_kinds,omitempty"`
}

type resource struct {
	Kind      string            `json:"kind"`
	ID        string            `json:"id"`
	Region    string            `json:"region"`
	CreatedAt *time.Time        `json:"created_at,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
	// DependsOn names resources that must be deleted before this one.
	DependsOn []string `json:"depends_on,omitempty"`
}

// clusterTag marks a resource as belonging to a krops cluster.
const clusterTag = "krops.io/cluster"

// New returns the provider; version is the plugin's release version.
func New(version string) sdk.Provider { return &provider{version: version} }

type provider struct {
	sdk.Unimplemented
	version   string
	statePath string
	clusters  []string
	// delay slows Discover down per resource, to show streaming.
	delay time.Duration
	// mu serialises the engine's parallel deletions on the state file.
	mu sync.Mutex
}

func (p *provider) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name:         "jsoncloud",
		Version:      p.version,
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapTeardownPolicy, sdk.CapDiscover, sdk.CapSweep},
		// It reads only keys krops itself defines (mgmt-cluster,
		// teardown.capi-workloads), so it adds none.
		Env: []string{"JSONCLOUD_STATE", "JSONCLOUD_DISCOVER_DELAY"},
	}, nil
}

// envConfig is the part of bootstrap.toml this provider reads.
type envConfig struct {
	Environment struct {
		MgmtCluster string `json:"mgmt-cluster"`
		Teardown    struct {
			CAPIWorkloads []string `json:"capi-workloads"`
		} `json:"teardown"`
	} `json:"environment"`
}

func (p *provider) Configure(_ context.Context, cfg sdk.Config) error {
	var c envConfig
	if err := cfg.Decode(&c); err != nil {
		return err
	}
	p.clusters = append([]string{c.Environment.MgmtCluster}, c.Environment.Teardown.CAPIWorkloads...)
	p.statePath = cfg.Env["JSONCLOUD_STATE"]
	if p.statePath == "" {
		return errors.New("JSONCLOUD_STATE is not set: point it at the fake cloud's JSON file")
	}
	if d := cfg.Env["JSONCLOUD_DISCOVER_DELAY"]; d != "" {
		delay, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("JSONCLOUD_DISCOVER_DELAY=%q: %w", d, err)
		}
		p.delay = delay
	}
	return nil
}

func (p *provider) Preflight(context.Context) ([]sdk.Check, error) {
	_, err := p.load()
	if err != nil {
		return []sdk.Check{{Name: "state file", OK: false, Message: err.Error(), Remedy: "create the file with {\"resources\": []}"}}, nil
	}
	return []sdk.Check{{Name: "state file", OK: true, Message: p.statePath + " is readable"}}, nil
}

func (p *provider) TeardownPolicy(context.Context) (sdk.TeardownPolicy, error) {
	return sdk.TeardownPolicy{HostRemoval: sdk.RemoveByDeletingCluster, CloudOnlySweepAllowed: true}, nil
}

func (p *provider) Discover(ctx context.Context, emit func(sdk.DiscoverEvent) error) error {
	st, err := p.load()
	if err != nil {
		return emit(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: "*", Message: err.Error()}})
	}
	if err := emit(sdk.DiscoverEvent{Scope: &sdk.Scope{Account: st.Account}}); err != nil {
		return err
	}
	for _, k := range st.FailingKinds {
		if err := emit(sdk.DiscoverEvent{Error: &sdk.QueryError{Kind: k, Message: "listing " + k + " failed: service unavailable"}}); err != nil {
			return err
		}
	}
	for _, r := range st.Resources {
		if slices.Contains(st.FailingKinds, r.Kind) {
			continue
		}
		cluster := r.Tags[clusterTag]
		if !slices.Contains(p.clusters, cluster) {
			continue // not ours: never reported, never swept
		}
		if p.delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(p.delay):
			}
		}
		res := toSDK(r)
		if err := emit(sdk.DiscoverEvent{Resource: &res}); err != nil {
			return err
		}
	}
	return nil
}

func toSDK(r resource) sdk.Resource {
	return sdk.Resource{
		Kind: r.Kind, ID: r.ID, Region: r.Region, Cluster: r.Tags[clusterTag], CreatedAt: r.CreatedAt,
		Tags: r.Tags, Evidence: []string{"tag " + clusterTag + "=" + r.Tags[clusterTag]}, DependsOn: r.DependsOn,
	}
}

// Sweep runs on the SDK's engine (package sweep), which owns the order,
// the passes, concurrency, limits and events. The provider supplies only a
// fresh inventory and how to delete one resource.
func (p *provider) Sweep(ctx context.Context, req sdk.SweepRequest, emit func(sdk.SweepEvent) error) error {
	_, err := sweep.Run(ctx, req, emit, sweep.Options{Inventory: p.inventory, Delete: p.deleteOne, PollInterval: -1})
	return err
}

// inventory is what Discover would report, keyed by kind/id.
func (p *provider) inventory(context.Context) (map[string]sdk.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.load()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrUnknownState, err)
	}
	out := map[string]sdk.Resource{}
	for _, r := range st.Resources {
		if slices.Contains(p.clusters, r.Tags[clusterTag]) && !slices.Contains(st.FailingKinds, r.Kind) {
			out[r.Kind+"/"+r.ID] = toSDK(r)
		}
	}
	return out, nil
}

// deleteOne removes one resource from the state file, unless something it
// depends on is still there (the engine orders the scope; this catches
// dependencies outside it).
func (p *provider) deleteOne(_ context.Context, r sdk.Resource, _ sweep.Attempt) sweep.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.load()
	if err != nil {
		return sweep.Result{Outcome: sweep.Failed, Message: err.Error()}
	}
	i := slices.IndexFunc(st.Resources, func(x resource) bool { return x.Kind == r.Kind && x.ID == r.ID })
	if i < 0 {
		return sweep.Result{Outcome: sweep.Gone}
	}
	for _, dep := range st.Resources[i].DependsOn {
		if slices.ContainsFunc(st.Resources, func(x resource) bool { return x.ID == dep }) {
			return sweep.Result{Outcome: sweep.Blocked, Message: "waiting for " + dep + ", which is outside the scope"}
		}
	}
	st.Resources = slices.Delete(st.Resources, i, i+1)
	if err := p.save(st); err != nil {
		return sweep.Result{Outcome: sweep.Failed, Message: err.Error()}
	}
	return sweep.Result{Outcome: sweep.Deleted}
}

func (p *provider) load() (*state, error) {
	b, err := os.ReadFile(p.statePath)
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", p.statePath, err)
	}
	return &st, nil
}

// save writes the state atomically so a killed sweep never corrupts it.
func (p *provider) save(st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.statePath), ".jsoncloud-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p.statePath)
}
