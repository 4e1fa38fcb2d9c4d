// Package enginenet is bootcluster.Network through the engine's command
// line (argv, never a shell string). Membership is read from the network's
// inspection, never inferred from an error message.
package enginenet

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// Runner runs the engine with arguments (plugins/sdk/engine's Engine.Run).
type Runner func(ctx context.Context, args ...string) (proc.Result, error)

// Network talks to one engine.
type Network struct{ Run Runner }

// inspected is the part of `network inspect` output read here; Docker and
// Podman both give Containers keyed by id with a Name.
type inspected struct {
	Containers map[string]struct {
		Name string `json:"Name"`
	} `json:"Containers"`
}

// Members lists the ids and names of the containers on network.
func (n Network) Members(ctx context.Context, network string) ([]string, error) {
	res, err := n.Run(ctx, "network", "inspect", network)
	if err != nil {
		return nil, fmt.Errorf("network inspect %s: %w", network, err)
	}
	var nets []inspected
	if err := json.Unmarshal(res.Stdout, &nets); err != nil {
		return nil, fmt.Errorf("network inspect %s: unreadable output: %w", network, err)
	}
	var out []string
	for _, nw := range nets {
		for id, c := range nw.Containers {
			out = append(out, id)
			if c.Name != "" {
				out = append(out, c.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Connect puts container on network.
func (n Network) Connect(ctx context.Context, network, container string) error {
	_, err := n.Run(ctx, "network", "connect", network, container)
	return err
}

// Disconnect takes container off network.
func (n Network) Disconnect(ctx context.Context, network, container string) error {
	_, err := n.Run(ctx, "network", "disconnect", network, container)
	return err
}
