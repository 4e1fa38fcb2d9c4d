// Package jsoncloud is the example third-party provider of docs/plugins.md:
// a small fake cloud whose resources live in a JSON file (JSONCLOUD_STATE).
// It shows every part of a provider: Describe, Configure, a read-only
// Preflight, a teardown policy, streamed Discover, and a Sweep that deletes
// only its scope, in dependency order, and honours dry-run. The plugin main
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
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
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
}

func (p *provider) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name:         "jsoncloud",
		Version:      p.version,
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapTeardownPolicy, sdk.CapDiscover, sdk.CapSweep},
		ConfigKeys:   []string{"mgmt-cluster", "teardown.capi-workloads"},
		Env:          []string{"JSONCLOUD_STATE", "JSONCLOUD_DISCOVER_DELAY"},
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

// Sweep deletes the scope in passes: each pass deletes every resource whose
// dependencies are gone; it stops when the scope is empty or after
// MaxIdlePasses passes without progress.
func (p *provider) Sweep(ctx context.Context, req sdk.SweepRequest, emit func(sdk.SweepEvent) error) error {
	st, err := p.load()
	if err != nil {
		return err
	}
	inScope := map[string]sdk.Resource{}
	for _, r := range req.Scope {
		inScope[r.ID] = r
	}
	exists := map[string]bool{}
	for _, r := range st.Resources {
		exists[r.ID] = true
	}
	for _, r := range req.Scope {
		if !exists[r.ID] {
			if err := emit(sdk.SweepEvent{Resource: r, State: sdk.SweepSkipped, Message: "already gone"}); err != nil {
				return err
			}
			delete(inScope, r.ID)
			continue
		}
		if err := emit(sdk.SweepEvent{Resource: r, State: sdk.SweepPlanned}); err != nil {
			return err
		}
	}
	if req.DryRun {
		return nil
	}
	maxIdle := req.MaxIdlePasses
	if maxIdle <= 0 {
		maxIdle = 3
	}
	for idle := 0; len(inScope) > 0 && idle < maxIdle; {
		if err := ctx.Err(); err != nil {
			return err
		}
		progress := false
		for _, r := range st.Resources {
			sr, ok := inScope[r.ID]
			if !ok {
				continue
			}
			blocked := slices.ContainsFunc(r.DependsOn, func(id string) bool { return exists[id] })
			if blocked {
				if err := emit(sdk.SweepEvent{Resource: sr, State: sdk.SweepRetrying, Message: "waiting for its dependencies"}); err != nil {
					return err
				}
				continue
			}
			if err := emit(sdk.SweepEvent{Resource: sr, State: sdk.SweepDeleting}); err != nil {
				return err
			}
			exists[r.ID] = false
			delete(inScope, r.ID)
			progress = true
			if err := emit(sdk.SweepEvent{Resource: sr, State: sdk.SweepDeleted}); err != nil {
				return err
			}
		}
		st.Resources = slices.DeleteFunc(st.Resources, func(r resource) bool { return !exists[r.ID] })
		if err := p.save(st); err != nil {
			return err
		}
		if progress {
			idle = 0
		} else {
			idle++
		}
	}
	for _, r := range inScope {
		if err := emit(sdk.SweepEvent{Resource: r, State: sdk.SweepFailed, Message: "still blocked by resources outside the scope"}); err != nil {
			return err
		}
	}
	return nil
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
