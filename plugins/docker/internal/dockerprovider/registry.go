package dockerprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/engine"
	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// containerState is the part of `<engine> container inspect` we read; Docker
// and Podman agree on these fields.
type containerState struct {
	State struct {
		Running bool `json:"Running"`
	} `json:"State"`
	NetworkSettings struct {
		Ports map[string][]struct {
			HostIP   string `json:"HostIp"`
			HostPort string `json:"HostPort"`
		} `json:"Ports"`
		Networks map[string]json.RawMessage `json:"Networks"`
	} `json:"NetworkSettings"`
}

// ensureRegistry makes the registry container exist, run, publish the right
// port and sit on the kind network. It reuses a healthy container, starts a
// stopped one and connects one that is off the kind network. One that
// publishes another port is refused, not recreated: a container cannot
// change its published ports, and a new one would start empty, dropping the
// images the old one holds (an air-gapped install stocks them before the
// bootstrap). The user decides: keep it by configuring its port, or remove
// it.
func (p *Provider) ensureRegistry(ctx context.Context, e *engine.Engine) (string, error) {
	name := p.s.registryName
	res, err := e.Run(ctx, "container", "inspect", name)
	if err != nil {
		if !isNoSuchContainer(res, err) {
			// Unknown state: do not create a second registry or remove one.
			return "", fmt.Errorf("inspecting registry container %s: %w", name, err)
		}
		if err := p.createRegistry(ctx, e); err != nil {
			return "", err
		}
		return "created", nil
	}
	var states []containerState
	if err := json.Unmarshal(res.Stdout, &states); err != nil || len(states) != 1 {
		return "", fmt.Errorf("reading `%s container inspect %s`: unexpected output %q", e.Name, name, truncate(res.Stdout))
	}
	st := states[0]
	wantPort := strconv.Itoa(p.s.registryPort)
	var published []string
	portOK := false
	for _, b := range st.NetworkSettings.Ports[fmt.Sprintf("%d/tcp", registryInternalPort)] {
		if b.HostPort != "" {
			portOK = portOK || b.HostPort == wantPort
			published = append(published, b.HostPort)
		}
	}
	if !portOK {
		has := "publishes no host port for the registry"
		keep := ""
		if len(published) > 0 {
			has = "publishes host port " + strings.Join(published, ", ")
			keep = fmt.Sprintf("set REGISTRY_PORT=%s (--registry-port) to use it as it is, or ", published[0])
		}
		return "", fmt.Errorf("registry container %s %s, not REGISTRY_PORT=%s, and a container's published ports cannot change: recreating it would drop the images it holds. Either %sremove it yourself (`%s rm -f %s`) and run again: %w",
			name, has, wantPort, keep, e.Name, name, sdk.ErrRefused)
	}
	var done []string
	if _, onKind := st.NetworkSettings.Networks[kindNetwork]; !onKind {
		if _, err := e.Run(ctx, "network", "connect", kindNetwork, name); err != nil {
			return "", fmt.Errorf("connecting registry container %s to the %s network: %w", name, kindNetwork, err)
		}
		done = append(done, "connected to the "+kindNetwork+" network")
	}
	if !st.State.Running {
		if _, err := e.Run(ctx, "start", name); err != nil {
			return "", fmt.Errorf("starting registry container %s: %w", name, err)
		}
		done = append(done, "restarted")
	}
	if len(done) == 0 {
		return "reused", nil
	}
	return "reused, " + strings.Join(done, " and "), nil
}

func (p *Provider) createRegistry(ctx context.Context, e *engine.Engine) error {
	_, err := e.Run(ctx, "run", "-d", "--restart=always", "--name", p.s.registryName, "--network", kindNetwork,
		"-p", fmt.Sprintf("127.0.0.1:%d:%d", p.s.registryPort, registryInternalPort), RegistryImage)
	if err != nil {
		return fmt.Errorf("creating registry container %s: %w", p.s.registryName, err)
	}
	return nil
}

func isNoSuchContainer(res proc.Result, err error) bool {
	var pe *proc.Error
	if !errors.As(err, &pe) {
		return false
	}
	s := strings.ToLower(string(res.Stderr) + string(res.Stdout))
	return strings.Contains(s, "no such container") || strings.Contains(s, "no such object") || strings.Contains(s, "no container with name")
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// probeRegistry waits until GET url answers below 400: 1 + readyRetries
// attempts, ProbeInterval apart. Connection errors and 408, 429, 500, 502,
// 503 and 504 are retried; any other error status fails at once, because
// waiting will not fix it.
func (p *Provider) probeRegistry(ctx context.Context, url string) error {
	var last string
	for attempt := 0; attempt <= p.s.readyRetries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(p.opts.ProbeInterval):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := p.opts.HTTPClient.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			last = err.Error()
			continue
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode < 400:
			return nil
		case transient(resp.StatusCode):
			last = resp.Status
		default:
			return fmt.Errorf("registry %s answered %s: not retrying", url, resp.Status)
		}
	}
	return fmt.Errorf("registry %s not ready after %d attempts (last: %s)", url, p.s.readyRetries+1, last)
}

func transient(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
