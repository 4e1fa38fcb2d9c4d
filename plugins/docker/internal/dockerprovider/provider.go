// Package dockerprovider is the docker provider: the local-host environment,
// where Cluster API's Docker provider (CAPD) runs clusters as containers on
// the same Docker or Podman engine as kind. It contributes the kind registry
// mirror, runs the local OCI registry, rewrites the management cluster's
// kubeconfig endpoint to the published port, and removes containers on
// teardown; it has no cloud to discover or sweep.
package dockerprovider

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kropsdev/krops/plugins/sdk"
	"github.com/kropsdev/krops/plugins/sdk/engine"
	"github.com/kropsdev/krops/plugins/sdk/proc"
)

// Defaults of the knobs this provider reads.
const (
	DefaultRegistryName  = "krops-registry"
	DefaultRegistryPort  = 5001
	DefaultReadyRetries  = 120
	RegistryImage        = "registry:2"
	registryInternalPort = 5000
	kindNetwork          = "kind"
)

// Options inject what tests replace; the zero value is production.
type Options struct {
	Runner        proc.Runner
	HTTPClient    *http.Client
	ProbeInterval time.Duration
}

// Provider is the docker provider.
type Provider struct {
	sdk.Unimplemented
	version string
	opts    Options
	s       settings
}

type settings struct {
	mgmtCluster     string
	containerPrefix string
	registryName    string
	registryPort    int
	readyRetries    int
	engineName      string
	engineSock      string
	toolbox         bool
	containerHost   string
	engineEnv       []string
	// nodeImage overrides kind's pinned node image for CAPD's machines
	// too; nodeKubernetes is its Kubernetes version.
	nodeImage, nodeKubernetes string
	// mirrors are the configuration's [[mirrors]], which CAPD's machines
	// pull through as kind's node does.
	mirrors []registryMirror
}

// registryMirror is one mirror as the host sends [[mirrors]] and as the
// ClusterClasses' registryMirrors variable takes it.
type registryMirror struct {
	Registry  string   `json:"registry"`
	Endpoints []string `json:"endpoints"`
}

// New returns the provider.
func New(version string, o Options) *Provider {
	if o.Runner == nil {
		o.Runner = proc.Exec{}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	return &Provider{version: version, opts: o}
}

// env lists the variables the provider needs from the host.
var env = []string{
	"CONTAINER_ENGINE", "ENGINE_SOCK", "KROPS_TOOLBOX", "CONTAINER_HOST", "DOCKER_HOST",
	"REGISTRY_PORT", "KROPS_REGISTRY_NAME", "REGISTRY_READY_RETRIES", nodeImageVariable,
}

// Describe declares the provider.
func (p *Provider) Describe(context.Context) (sdk.Description, error) {
	return sdk.Description{
		Name:    "docker",
		Version: p.version,
		Capabilities: []sdk.Capability{
			sdk.CapPreflight, sdk.CapKindConfig, sdk.CapHooks, sdk.CapPivotInputs, sdk.CapTeardownPolicy,
		},
		Phases:     []sdk.Phase{sdk.PhaseAfterKindCreate},
		ConfigKeys: []string{"environments.*.teardown.mgmt-container-prefix"},
		Env:        env,
	}, nil
}

type fileConfig struct {
	Bootstrap struct {
		RegistryName string `json:"registry-name"`
	} `json:"bootstrap"`
	Environment struct {
		MgmtCluster string `json:"mgmt-cluster"`
		Teardown    struct {
			MgmtContainerPrefix string `json:"mgmt-container-prefix"`
		} `json:"teardown"`
	} `json:"environment"`
	Mirrors []registryMirror `json:"mirrors"`
}

// Configure reads the environment and knobs.
func (p *Provider) Configure(_ context.Context, cfg sdk.Config) error {
	var fc fileConfig
	if err := cfg.Decode(&fc); err != nil {
		return err
	}
	s := settings{
		mgmtCluster:     fc.Environment.MgmtCluster,
		containerPrefix: fc.Environment.Teardown.MgmtContainerPrefix,
		registryName:    fc.Bootstrap.RegistryName,
		registryPort:    DefaultRegistryPort,
		readyRetries:    DefaultReadyRetries,
		engineName:      cfg.Env["CONTAINER_ENGINE"],
		engineSock:      cfg.Env["ENGINE_SOCK"],
		toolbox:         cfg.Env["KROPS_TOOLBOX"] == "1",
		containerHost:   cfg.Env["CONTAINER_HOST"],
	}
	s.mirrors = fc.Mirrors
	if v := cfg.Env["KROPS_REGISTRY_NAME"]; v != "" {
		s.registryName = v
	}
	if s.registryName == "" {
		s.registryName = DefaultRegistryName
	}
	if s.containerPrefix == "" {
		s.containerPrefix = s.mgmtCluster
	}
	if v := strings.TrimSpace(cfg.Env[nodeImageVariable]); v != "" {
		k, err := kubernetesVersionOf(v)
		if err != nil {
			return err
		}
		s.nodeImage, s.nodeKubernetes = v, k
	}
	if v := cfg.Env["REGISTRY_PORT"]; v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: REGISTRY_PORT=%q: want a port from 1 to 65535", sdk.ErrInvalidArgument, v)
		}
		s.registryPort = n
	}
	if v := cfg.Env["REGISTRY_READY_RETRIES"]; v != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return fmt.Errorf("%w: REGISTRY_READY_RETRIES=%q: want a whole number", sdk.ErrInvalidArgument, v)
		}
		s.readyRetries = int(n)
	}
	// The engine commands get the plugin's own environment: PATH from the
	// host's base environment plus the engine variables declared above.
	s.engineEnv = os.Environ()
	p.s = s
	return nil
}

func (p *Provider) engine(ctx context.Context) (*engine.Engine, error) {
	return engine.Detect(ctx, engine.Options{
		Engine: p.s.engineName, Sock: p.s.engineSock, Toolbox: p.s.toolbox,
		ContainerHost: p.s.containerHost, Env: p.s.engineEnv, Runner: p.opts.Runner,
	})
}

// Preflight checks that an engine answers.
func (p *Provider) Preflight(ctx context.Context) ([]sdk.Check, error) {
	e, err := p.engine(ctx)
	if err != nil {
		return []sdk.Check{{Name: "container engine", OK: false, Message: err.Error(), Remedy: "start Docker or Podman, or set CONTAINER_ENGINE and ENGINE_SOCK"}}, nil
	}
	msg := fmt.Sprintf("%s (socket %s)", e.Name, e.Sock)
	if len(e.Warnings) > 0 {
		msg += "; " + strings.Join(e.Warnings, "; ")
	}
	return []sdk.Check{{Name: "container engine", OK: true, Message: msg}}, nil
}

// KindConfig makes kind's containerd pull localhost:<port>/... from the
// registry container over the kind network: the name the host publishes
// the registry under is the name images carry inside the cluster too.
func (p *Provider) KindConfig(context.Context) (sdk.KindConfig, error) {
	return sdk.KindConfig{RegistryMirrors: []sdk.RegistryMirror{p.localRegistryMirror()}}, nil
}

func (p *Provider) localRegistryMirror() sdk.RegistryMirror {
	return sdk.RegistryMirror{
		Registry:  fmt.Sprintf("localhost:%d", p.s.registryPort),
		Endpoints: []string{fmt.Sprintf("http://%s:%d", p.s.registryName, registryInternalPort)},
	}
}

// Hook runs the local registry once kind exists.
func (p *Provider) Hook(ctx context.Context, req sdk.HookRequest) (sdk.HookResult, error) {
	if req.Phase != sdk.PhaseAfterKindCreate {
		return sdk.HookResult{}, fmt.Errorf("%w: the docker provider has no %s hook", sdk.ErrInvalidArgument, req.Phase)
	}
	e, err := p.engine(ctx)
	if err != nil {
		return sdk.HookResult{}, err
	}
	action, err := p.ensureRegistry(ctx, e)
	if err != nil {
		return sdk.HookResult{}, err
	}
	url := p.registryURL()
	if err := p.probeRegistry(ctx, url); err != nil {
		return sdk.HookResult{}, err
	}
	vars, msgs, err := p.clusterVars()
	if err != nil {
		return sdk.HookResult{}, err
	}
	return sdk.HookResult{Messages: append([]string{
		fmt.Sprintf("registry %s %s (%s, 127.0.0.1:%d, network %s)", p.s.registryName, action, RegistryImage, p.s.registryPort, kindNetwork),
		"registry ready at " + url,
	}, msgs...), Manifests: vars}, nil
}

func (p *Provider) registryURL() string {
	if p.s.toolbox {
		return fmt.Sprintf("http://%s:%d/v2/", p.s.registryName, registryInternalPort)
	}
	return fmt.Sprintf("http://localhost:%d/v2/", p.s.registryPort)
}

// PivotInputs rewrites a cluster's API endpoint (the management cluster's
// unless the request names another) to the port its load balancer container
// publishes on the host: the address CAPD records is only reachable from
// inside the kind network. The management cluster gets the node image
// override kind had, so the Clusters it takes over keep their machines'
// image.
func (p *Provider) PivotInputs(ctx context.Context, req sdk.PivotInputsRequest) (sdk.PivotInputs, error) {
	var vars [][]byte
	if req.Cluster == "" {
		var err error
		if vars, _, err = p.clusterVars(); err != nil {
			return sdk.PivotInputs{}, err
		}
	}
	if req.InToolbox || p.s.toolbox {
		return sdk.PivotInputs{Manifests: vars}, nil
	}
	e, err := p.engine(ctx)
	if err != nil {
		return sdk.PivotInputs{}, err
	}
	cluster := req.Cluster
	if cluster == "" {
		cluster = p.s.mgmtCluster
	}
	lb := cluster + "-lb"
	res, err := e.Run(ctx, "port", lb, "6443/tcp")
	if err != nil {
		return sdk.PivotInputs{}, fmt.Errorf("finding the published API port of %s: %w", lb, err)
	}
	port, err := publishedPort(string(res.Stdout))
	if err != nil {
		return sdk.PivotInputs{}, fmt.Errorf("container %s: %w", lb, err)
	}
	return sdk.PivotInputs{Server: fmt.Sprintf("https://127.0.0.1:%d", port), Manifests: vars}, nil
}

// publishedPort reads `<engine> port` output such as "0.0.0.0:55001" (one
// line per address family).
func publishedPort(out string) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		i := strings.LastIndex(line, ":")
		if i < 0 {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(line[i+1:])); err == nil && n > 0 && n < 65536 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no published port in %q", out)
}

// TeardownPolicy: no cloud; remove the management containers by prefix and
// the registry last.
func (p *Provider) TeardownPolicy(context.Context) (sdk.TeardownPolicy, error) {
	return sdk.TeardownPolicy{
		HostRemoval:           sdk.RemoveContainers,
		ContainerPrefix:       p.s.containerPrefix,
		CloudOnlySweepAllowed: false,
		RemoveLast:            []string{p.s.registryName},
	}, nil
}
