// Package talos is the talos provider: the local-talos environment, where
// Talos Linux machines are provisioned by Tinkerbell through Cluster API
// (CAPT with the Talos bootstrap and control plane providers). Bare metal
// has no cloud to sweep: teardown deletes every CAPI Cluster, the management
// one included, which releases the hardware, and says plainly that the
// machines are not wiped.
package talos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/plugins/sdk"
)

// Provider is the talos provider.
type Provider struct {
	sdk.Unimplemented
	version     string
	repoRoot    string
	syncPath    string
	mgmtCluster string
}

// New returns the provider.
func New(version string) *Provider { return &Provider{version: version} }

// Describe declares preflight and the teardown policy.
func (p *Provider) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name: "talos", Version: p.version,
		Capabilities: []sdk.Capability{sdk.CapPreflight, sdk.CapTeardownPolicy},
		ConfigKeys:   []string{"environments.*.teardown.hardware-release"},
	}, nil
}

// Configure reads where the management cluster's manifests are.
func (p *Provider) Configure(_ context.Context, cfg sdk.Config) error {
	var fc struct {
		Environment struct {
			SyncPath    string `json:"sync-path"`
			MgmtCluster string `json:"mgmt-cluster"`
		} `json:"environment"`
	}
	if err := cfg.Decode(&fc); err != nil {
		return err
	}
	p.repoRoot, p.syncPath, p.mgmtCluster = cfg.RepoRoot, fc.Environment.SyncPath, fc.Environment.MgmtCluster
	return nil
}

// ClusterDir is where the management cluster's manifests live.
func (p *Provider) ClusterDir() string {
	return filepath.Join(p.repoRoot, p.syncPath, "clusters", p.mgmtCluster)
}

// object is the part of a manifest the checks read.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Interfaces []struct {
			DHCP struct {
				MAC string `json:"mac"`
			} `json:"dhcp"`
		} `json:"interfaces"`
		Template struct {
			Spec struct {
				HardwareAffinity struct {
					Required []struct {
						LabelSelector struct {
							MatchLabels map[string]string `json:"matchLabels"`
						} `json:"labelSelector"`
					} `json:"required"`
				} `json:"hardwareAffinity"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// Preflight checks the management cluster's Tinkerbell Hardware: every
// TinkerbellMachineTemplate's hardware affinity must select a Hardware
// defined in the manifests, and that Hardware must carry a real MAC address,
// not a site-specific placeholder left unfilled.
func (p *Provider) Preflight(context.Context) ([]sdk.Check, error) {
	dir := p.ClusterDir()
	objs, err := readObjects(dir)
	if err != nil {
		return []sdk.Check{{Name: "management cluster manifests", OK: false, Message: err.Error(),
			Remedy: "define the management cluster under " + dir}}, nil
	}
	var hardware, templates []object
	for _, o := range objs {
		switch o.Kind {
		case "Hardware":
			hardware = append(hardware, o)
		case "TinkerbellMachineTemplate":
			templates = append(templates, o)
		}
	}
	var checks []sdk.Check
	for _, h := range hardware {
		c := sdk.Check{Name: "Hardware " + h.Metadata.Name, OK: true, Message: "configured"}
		if len(h.Spec.Interfaces) == 0 || placeholder(h.Spec.Interfaces[0].DHCP.MAC) {
			c = sdk.Check{Name: c.Name, OK: false, Message: "has no real MAC address in spec.interfaces[0].dhcp.mac",
				Remedy: "fill in the machine's MAC address (a site-specific value) in " + dir}
		}
		checks = append(checks, c)
	}
	if len(templates) == 0 {
		checks = append(checks, sdk.Check{Name: "TinkerbellMachineTemplate", OK: false,
			Message: "no TinkerbellMachineTemplate in " + dir, Remedy: "define the management cluster's machine templates"})
	}
	for _, tpl := range templates {
		for _, term := range tpl.Spec.Template.Spec.HardwareAffinity.Required {
			sel := term.LabelSelector.MatchLabels
			name := "TinkerbellMachineTemplate " + tpl.Metadata.Name + " hardware " + formatLabels(sel)
			if matched := matching(hardware, sel); matched != "" {
				checks = append(checks, sdk.Check{Name: name, OK: true, Message: "selects Hardware " + matched})
			} else {
				checks = append(checks, sdk.Check{Name: name, OK: false, Message: "selects no Hardware defined in " + dir,
					Remedy: "add a Hardware with labels " + formatLabels(sel) + " or fix the affinity"})
			}
		}
	}
	return checks, nil
}

// TeardownPolicy deletes every CAPI Cluster, the management one included,
// and never sweeps a cloud.
func (p *Provider) TeardownPolicy(context.Context) (sdk.TeardownPolicy, error) {
	return sdk.TeardownPolicy{
		HostRemoval:           sdk.RemoveByDeletingCluster,
		DeleteAllClusters:     true,
		CloudOnlySweepAllowed: false,
		Notices: []string{
			"The machines are released back to Tinkerbell but not wiped: their disks still hold Talos and cluster data. Wipe or reprovision them before reuse.",
		},
	}, nil
}

func placeholder(v string) bool {
	v = strings.TrimSpace(strings.ToLower(v))
	return v == "" || v == "00:00:00:00:00:00" || strings.ContainsAny(v, "<>${}") || strings.Contains(v, "change") || strings.Contains(v, "xx")
}

func matching(hw []object, sel map[string]string) string {
	for _, h := range hw {
		ok := len(sel) > 0
		for k, v := range sel {
			ok = ok && h.Metadata.Labels[k] == v
		}
		if ok {
			return h.Metadata.Name
		}
	}
	return ""
}

func formatLabels(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// readObjects reads every YAML document under dir.
func readObjects(dir string) ([]object, error) {
	var objs []object
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(b, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var o object
			if err := yaml.Unmarshal(doc, &o); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			objs = append(objs, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the management cluster manifests: %w", err)
	}
	return objs, nil
}
