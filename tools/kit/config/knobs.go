package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/kropsdev/krops/plugins/sdk/duration"
	"github.com/kropsdev/krops/tools/kit/runmeta"
	"k8s.io/client-go/tools/clientcmd"
)

// Knob describes one setting of the lifecycle's environment interface.
type Knob struct {
	// Env is the environment variable, the knob's canonical name.
	Env string
	// Flag is the long flag name bound to Env; empty for secrets, which must
	// never travel in argv where ps and shell history can read them.
	Flag string
	// Usage is the help text.
	Usage string
	// Default is the effective default as shown in help.
	Default string
}

// KnobTable lists every knob, in the order documentation shows them. The
// cli package builds flags from it and docs/configuration.md documents it
// (a test keeps the two in step).
func KnobTable() []Knob {
	return []Knob{
		{"KROPS_PROFILE", "profile", "environment to work on; wins over the positional argument", "positional argument, then bootstrap.default-environment"},
		{"BOOTSTRAP_CONFIG", "config", "path of the configuration file", DefaultFile + " in the working directory"},
		{"KROPS_KIND_CLUSTER", "kind-cluster", "name of the kind bootstrap cluster (overrides bootstrap.kind-cluster)", "krops-<env>"},
		{"BOOTSTRAP_KUBECONTEXT", "kind-context", "kubeconfig context of the kind cluster (overrides bootstrap.kind-context)", "kind-<kind cluster>"},
		{"KROPS_KIND_NODE_IMAGE", "node-image", "kind node image to run instead of the one pinned in airgap/images.txt (a private mirror's copy, or one built locally); local-host's CAPD machines run it too, at the Kubernetes version its tag starts with", "the kindest/node entry of airgap/images.txt"},
		{"KROPS_REGISTRY_NAME", "registry-name", "container name of the local OCI registry (overrides bootstrap.registry-name)", "krops-registry"},
		{"REGISTRY_PORT", "registry-port", "host port the local registry publishes on 127.0.0.1", "5001"},
		{"REGISTRY_READY_RETRIES", "registry-ready-retries", "extra one-second attempts of the registry readiness probe", "120"},
		{"KROPS_CHART_REPOSITORY", "chart-repository", "one repository every chart krops installs comes from (flux-operator, cert-manager, cluster-api-operator, at <repository>/<chart>): the seed's and the pivot's installs and the trees' HelmRepositories; oci://host/path (a mirror, an air-gap registry; the local registry speaks plain HTTP) or an https:// chart repository", "each chart's upstream repository"},
		{"KROPS_FLUX_REGISTRY", "flux-registry", "where the clusters pull the Flux controllers from (the FluxInstance's distribution.registry, <registry>/<controller>:<tag>): on kind, the management cluster and local-host's workload cluster; a registry holding them by tag, such as the local registry as localhost:<REGISTRY_PORT>/fluxcd", "ghcr.io/fluxcd (the Flux Operator pins each image's digest)"},
		{"KROPS_PROVIDER_REPOSITORY", "provider-repository", "one OCI repository the Cluster API operator fetches every provider's components from instead of its GitHub release (oci://host/path, each release at <path>/<GitHub repository>/releases:<version>; the local registry speaks plain HTTP): a mirror for air-gapped hosts or GitHub's API rate limit", "each provider's GitHub release"},
		{"LOCAL_RECONCILE_TIMEOUT", "local-reconcile-timeout", "how long local-host waits for Flux to reconcile", "15m"},
		{"CONTAINER_ENGINE", "container-engine", "container engine: docker or podman", "docker if it answers, else podman"},
		{"ENGINE_SOCK", "engine-sock", "engine socket mounted into kind nodes", "detected from the engine"},
		{"KROPS_TOOLBOX", "toolbox", "1 when running inside the toolbox image (kind network, internal kubeconfig)", "0"},
		{"GIT_REPO_URL", "git-repo-url", "https://github.com/<owner>/<repo> that Flux syncs (sync = github)", "none"},
		{"GITHUB_TOKEN", "", "GitHub token Flux reads the repository with (environment only: never a flag)", "none"},
		{"GITHUB_USER", "github-user", "user name sent with GITHUB_TOKEN", "git"},
		{"AGE_KEY_FILE", "age-key-file", "SOPS age private key file, relative to the working directory", "age.agekey"},
		{"AGE_PUBLIC_KEY", "age-public-key", "expected age public key; must match AGE_KEY_FILE", "read from AGE_KEY_FILE"},
		{"OCI_REPOSITORY", "oci-repository", "repository of the configuration artifact (sync = oci)", "krops"},
		{"OCI_TAG", "oci-tag", "tag of the configuration artifact (sync = oci)", "latest"},
		{"BOOTSTRAP_PIVOT", "pivot", "1 pivots to the management cluster after bootstrap; anything else stops on kind", "1"},
		{"PIVOT_SKIP_DELETE", "pivot-skip-delete", "1 keeps the kind cluster after a successful pivot", "0"},
		{"KUBECONFIG", "kubeconfig", "kubeconfig file of the kind cluster, relative to the working directory", "~/.kube/config"},
		{"MGMT_KUBECONFIG", "mgmt-kubeconfig", "kubeconfig file written for the management cluster, relative to the working directory", "~/.kube/krops-<env>-mgmt.yaml; toolbox: beside KUBECONFIG"},
		{"MGMT_READY_TIMEOUT", "mgmt-ready-timeout", "how long the pivot waits for the management cluster", "environments.<env>.mgmt-ready-timeout"},
		{"MGMT_POLL_INTERVAL", "mgmt-poll-interval", "interval of status reports while waiting for the management cluster (> 0)", "10s"},
		{"AWS_ONLY", "aws-only", "1 makes teardown sweep the cloud only, leaving Kubernetes alone", "0"},
		{"FORCE_KIND_DELETE", "force-kind-delete", "1 deletes kind even when it still manages infrastructure", "0"},
		{"CLUSTER_DELETE_TIMEOUT", "cluster-delete-timeout", "how long teardown waits for CAPI Clusters to go; also bounds the whole cloud sweep", "1200s"},
		{"PROVIDER_DELETE_TIMEOUT", "provider-delete-timeout", "how long teardown waits for CAPI providers to go", "300s"},
		{"ORPHAN_MIN_AGE_HOURS", "orphan-min-age-hours", "resources younger than this many hours are reported as recent, not orphaned", "6"},
		{"ORPHAN_REPORT_JSON", "orphan-report-json", "also write the orphan report as JSON to this path", "none"},
		{"KROPS_RUN_ID", "run-id", "run tag, a label value; when set, an existing krops-run ConfigMap is kept", "<env>-<UTC time, 20261201t191333z>"},
		{"KROPS_RUN_TTL", "run-ttl", "how long the run's resources may live, or none", "24h"},
		{"KROPS_REVISION", "revision", "run tag: the Git revision deployed", "discovered, else unknown"},
		{"KROPS_RUN_KIND", "run-kind", "run tag: what started the run (manual, ci, ...)", "manual"},
		{"KROPS_PLUGIN_DIR", "plugin-dir", "directory searched first for krops-provider-<name> plugins", "bin/, then the binary's own directory, then ~/.local/share/krops/plugins, then PATH"},
		{"KROPS_REATTACH_PROVIDERS", "", "attach to provider plugins started in debug mode (JSON printed by the plugin; see docs/plugins.md)", "none"},
	}
}

// Secret is a value that must not be printed: String and GoString redact it,
// so it stays out of logs and error text even when formatted by accident.
type Secret struct{ v string }

// NewSecret wraps v.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal returns the value, for the one place that sends it on.
func (s Secret) Reveal() string { return s.v }

// IsSet reports whether the secret has a value.
func (s Secret) IsSet() bool { return s.v != "" }

func (s Secret) String() string {
	if s.v == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts under %#v too.
func (s Secret) GoString() string { return s.String() }

// Knobs are the parsed, validated knob values of one run.
type Knobs struct {
	Profile string
	// NodeImage is empty when unset: the inventory's pin applies.
	NodeImage string
	// ChartRepository is empty when unset: each chart's upstream
	// (ChartRepositoryOr).
	ChartRepository string
	// ProviderRepository is empty when unset: the Cluster API providers'
	// GitHub releases (the trees' default).
	ProviderRepository string
	// FluxRegistry is empty when unset: DefaultFluxRegistry.
	FluxRegistry          string
	RegistryPort          uint16
	RegistryReadyRetries  uint32
	LocalReconcileTimeout time.Duration
	ContainerEngine       string
	EngineSock            string
	Toolbox               bool
	GitRepoURL            string
	GitHubToken           Secret
	GitHubUser            string
	AgeKeyFile            string
	AgePublicKey          string
	OCIRepository         string
	OCITag                string
	Pivot                 bool
	PivotSkipDelete       bool
	Kubeconfig            string
	MgmtKubeconfig        string
	// MgmtReadyTimeout is zero when unset: the environment's value applies.
	MgmtReadyTimeout      time.Duration
	MgmtPollInterval      time.Duration
	AWSOnly               bool
	ForceKindDelete       bool
	ClusterDeleteTimeout  time.Duration
	ProviderDeleteTimeout time.Duration
	OrphanMinAgeHours     uint32
	OrphanReportJSON      string
	// Run tags stay raw: the runmeta package owns their grammar.
	RunID, RunTTL, Revision, RunKind string

	// mgmtKubeconfigDefault is set when MGMT_KUBECONFIG was not given: its
	// default names the environment (ForEnvironment fills it in).
	mgmtKubeconfigDefault bool
	home                  string
}

// DefaultMgmtKubeconfig is MGMT_KUBECONFIG's default for an environment:
// one file per environment, so two environments' management clusters never
// share (or overwrite) a kubeconfig.
func DefaultMgmtKubeconfig(home, env string) string {
	return filepath.Join(home, ".kube", "krops-"+env+"-mgmt.yaml")
}

// ForEnvironment completes the knobs whose defaults depend on the selected
// environment (MGMT_KUBECONFIG) and checks them as ParseKnobs checks the
// rest. Calling it again for another environment moves the default along.
func (k *Knobs) ForEnvironment(env string) error {
	if !k.mgmtKubeconfigDefault {
		return nil
	}
	k.MgmtKubeconfig = DefaultMgmtKubeconfig(k.home, env)
	if k.Toolbox && k.Kubeconfig != "" {
		// The toolbox container's home is gone when it exits; the
		// repository's .kube/ (where KUBECONFIG points) persists, so the
		// management kubeconfig is kept beside it.
		k.MgmtKubeconfig = filepath.Join(filepath.Dir(k.Kubeconfig), "krops-"+env+"-mgmt.yaml")
	}
	var errs []error
	checkFileKnob(func(name, v, want string) {
		errs = append(errs, fmt.Errorf("%s=%q (the default for environment %s) is not valid: want %s", name, v, env, want))
	}, "MGMT_KUBECONFIG", k.MgmtKubeconfig, MaxKubeconfigSize, parseKubeconfig)
	return errors.Join(errs...)
}

// KnobOptions are the inputs ParseKnobs needs besides the values.
type KnobOptions struct {
	Lookup Lookup
	// WorkDir resolves caller-supplied relative paths.
	WorkDir string
	// Home resolves default paths under the user's home directory.
	Home string
}

// ParseKnobs reads every knob and reports all invalid ones at once, each
// naming the variable, the value and what is accepted. Empty values are unset;
// boolean gates enable only on a literal 1, and take no value but 0 and 1.
func ParseKnobs(opts KnobOptions) (*Knobs, error) {
	get := opts.Lookup.Get
	str := func(name, def string) string {
		if v, ok := get(name); ok {
			return v
		}
		return def
	}
	var errs []error
	bad := func(name, v, want string) {
		errs = append(errs, fmt.Errorf("%s=%q is not valid: want %s", name, v, want))
	}
	// A gate is 1 or 0. Anything else is refused rather than read as off:
	// PIVOT_SKIP_DELETE=true meant "keep kind" to whoever wrote it, and
	// reading it as 0 deleted kind.
	gate := func(name string, def bool) bool {
		v, ok := get(name)
		if !ok {
			return def
		}
		switch strings.TrimSpace(v) {
		case "1":
			return true
		case "0":
			return false
		}
		bad(name, v, "1 to enable or 0 to disable (or unset for the default)")
		return def
	}
	dur := func(name string, def time.Duration, positive bool) time.Duration {
		v, ok := get(name)
		if !ok {
			return def
		}
		d, err := duration.Parse(v)
		if err != nil {
			bad(name, v, duration.Grammar)
			return def
		}
		if positive && d == 0 {
			bad(name, v, "a duration greater than zero")
			return def
		}
		return d
	}
	uintKnob := func(name string, def uint64, bits int) uint64 {
		v, ok := get(name)
		if !ok {
			return def
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, bits)
		if err != nil {
			bad(name, v, fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<bits-1))
			return def
		}
		return n
	}
	home := opts.Home
	k := &Knobs{
		Profile:               str("KROPS_PROFILE", ""),
		NodeImage:             strings.TrimSpace(str("KROPS_KIND_NODE_IMAGE", "")),
		ChartRepository:       strings.TrimSpace(str("KROPS_CHART_REPOSITORY", "")),
		ProviderRepository:    strings.TrimSpace(str("KROPS_PROVIDER_REPOSITORY", "")),
		FluxRegistry:          strings.TrimSuffix(strings.TrimSpace(str("KROPS_FLUX_REGISTRY", "")), "/"),
		RegistryReadyRetries:  uint32(uintKnob("REGISTRY_READY_RETRIES", 120, 32)),
		LocalReconcileTimeout: dur("LOCAL_RECONCILE_TIMEOUT", 15*time.Minute, true),
		ContainerEngine:       str("CONTAINER_ENGINE", ""),
		EngineSock:            str("ENGINE_SOCK", ""),
		Toolbox:               gate("KROPS_TOOLBOX", false),
		GitRepoURL:            str("GIT_REPO_URL", ""),
		GitHubToken:           NewSecret(str("GITHUB_TOKEN", "")),
		GitHubUser:            str("GITHUB_USER", "git"),
		AgeKeyFile:            CallerPath(opts.WorkDir, str("AGE_KEY_FILE", "age.agekey")),
		AgePublicKey:          strings.TrimSpace(str("AGE_PUBLIC_KEY", "")),
		OCIRepository:         str("OCI_REPOSITORY", "krops"),
		OCITag:                str("OCI_TAG", "latest"),
		Pivot:                 gate("BOOTSTRAP_PIVOT", true),
		PivotSkipDelete:       gate("PIVOT_SKIP_DELETE", false),
		Kubeconfig:            callerPathList(opts.WorkDir, str("KUBECONFIG", "")),
		MgmtKubeconfig:        CallerPath(opts.WorkDir, str("MGMT_KUBECONFIG", "")),
		MgmtReadyTimeout:      dur("MGMT_READY_TIMEOUT", 0, true),
		MgmtPollInterval:      dur("MGMT_POLL_INTERVAL", 10*time.Second, true),
		AWSOnly:               gate("AWS_ONLY", false),
		ForceKindDelete:       gate("FORCE_KIND_DELETE", false),
		ClusterDeleteTimeout:  dur("CLUSTER_DELETE_TIMEOUT", 1200*time.Second, true),
		ProviderDeleteTimeout: dur("PROVIDER_DELETE_TIMEOUT", 300*time.Second, true),
		OrphanMinAgeHours:     uint32(uintKnob("ORPHAN_MIN_AGE_HOURS", 6, 32)),
		OrphanReportJSON:      CallerPath(opts.WorkDir, str("ORPHAN_REPORT_JSON", "")),
		RunID:                 str("KROPS_RUN_ID", ""),
		RunTTL:                str("KROPS_RUN_TTL", ""),
		Revision:              str("KROPS_REVISION", ""),
		RunKind:               str("KROPS_RUN_KIND", ""),
	}
	// The run tags are checked here, in every preflight, and not first
	// when the seed writes them onto a cluster it has already changed.
	if k.RunID != "" {
		if err := runmeta.CheckRunID(k.RunID); err != nil {
			bad("KROPS_RUN_ID", k.RunID, "a Kubernetes label value (letters, digits, '-', '_' and '.', at most 63, starting and ending alphanumeric)")
		}
	}
	if _, err := runmeta.ParseTTL(k.RunTTL); err != nil {
		bad("KROPS_RUN_TTL", k.RunTTL, duration.Grammar+", or none")
	}
	// Path knobs are read later, by client-go and the age library, which
	// would block forever on a FIFO and read a device or a huge file into
	// memory: anything there but a regular file of a sane size is refused
	// now. A path that does not exist yet is fine (the pivot writes
	// MGMT_KUBECONFIG; KUBECONFIG may be new).
	// A kubeconfig that does not parse is refused here too: read later, it
	// looked like a cluster that does not answer (exit 1 or 3, and advice
	// to sweep the cloud), not like the broken file it is.
	for _, p := range filepath.SplitList(k.Kubeconfig) {
		checkFileKnob(bad, "KUBECONFIG", p, MaxKubeconfigSize, parseKubeconfig)
	}
	if k.MgmtKubeconfig != "" {
		checkFileKnob(bad, "MGMT_KUBECONFIG", k.MgmtKubeconfig, MaxKubeconfigSize, parseKubeconfig)
	} else {
		k.mgmtKubeconfigDefault = true
	}
	k.home = home
	checkFileKnob(bad, "AGE_KEY_FILE", k.AgeKeyFile, MaxAgeKeySize, nil)
	port := uintKnob("REGISTRY_PORT", 5001, 16)
	if port == 0 {
		bad("REGISTRY_PORT", "0", "a port from 1 to 65535")
	}
	k.RegistryPort = uint16(port)
	if k.NodeImage != "" {
		if _, err := name.ParseReference(k.NodeImage); err != nil {
			bad("KROPS_KIND_NODE_IMAGE", k.NodeImage, "an image reference such as registry.example.com/kindest/node:v1.37.0 ("+err.Error()+")")
		}
	}
	if err := CheckChartRepository(k.ChartRepository); k.ChartRepository != "" && err != nil {
		bad("KROPS_CHART_REPOSITORY", k.ChartRepository, "oci://<registry>/<path> or an http(s):// chart repository URL ("+err.Error()+")")
	}
	if err := CheckProviderRepository(k.ProviderRepository); k.ProviderRepository != "" && err != nil {
		bad("KROPS_PROVIDER_REPOSITORY", k.ProviderRepository, "oci://<registry>/<path>, where each provider release is an OCI artifact <path>/<GitHub repository>/releases:<version> ("+err.Error()+")")
	}
	if k.FluxRegistry != "" {
		if _, err := name.NewRepository(k.FluxRegistry); err != nil || strings.Contains(k.FluxRegistry, "://") {
			bad("KROPS_FLUX_REGISTRY", k.FluxRegistry, "a registry path without a scheme, such as localhost:5001/fluxcd or mirror.example.com/fluxcd, holding <path>/source-controller and the other controllers")
		}
	}
	switch k.ContainerEngine {
	case "", "docker", "podman":
	default:
		bad("CONTAINER_ENGINE", k.ContainerEngine, "docker or podman (or unset to detect)")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return k, nil
}

// DefaultFluxRegistry is where the Flux controllers are published; the
// Flux Operator pins their digests only there (elsewhere it names them by
// tag). An unset KROPS_FLUX_REGISTRY means this one.
const DefaultFluxRegistry = "ghcr.io/fluxcd"

// DefaultChartRepository is where the flux-operator chart is published.
const DefaultChartRepository = "oci://ghcr.io/controlplaneio-fluxcd/charts"

// ChartRepositoryOr is where a chart comes from: KROPS_CHART_REPOSITORY
// when the run sets it, else the chart's upstream repository.
func (k *Knobs) ChartRepositoryOr(upstream string) string {
	if k.ChartRepository != "" {
		return k.ChartRepository
	}
	return upstream
}

// CheckChartRepository accepts an oci:// repository or an http(s):// chart
// repository URL, the two kinds Helm installs from.
func CheckChartRepository(repo string) error {
	if rest, ok := strings.CutPrefix(repo, "oci://"); ok {
		_, err := name.NewRepository(strings.TrimSuffix(rest, "/"))
		return err
	}
	u, err := url.Parse(repo)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("no oci://, http:// or https:// scheme")
	case u.Host == "":
		return errors.New("no host")
	}
	return nil
}

// CheckProviderRepository accepts oci://<registry>/<path>: the Cluster API
// operator fetches a provider's components from an OCI artifact only.
func CheckProviderRepository(repo string) error {
	rest, ok := strings.CutPrefix(repo, "oci://")
	if !ok {
		return errors.New("no oci:// scheme")
	}
	_, err := name.NewRepository(strings.TrimSuffix(rest, "/"))
	return err
}

// Size limits of the files path knobs name. A kubeconfig with many
// clusters is some hundred KiB; an age identity file a few lines.
const (
	MaxKubeconfigSize = 16 << 20
	MaxAgeKeySize     = 64 << 10
)

// checkFileKnob reports, through bad, a path knob's file that exists and is
// not a regular file of at most max bytes (a directory, a FIFO, a device, a
// symlink loop or one that cannot be read), or whose content parse, when
// given, rejects.
func checkFileKnob(bad func(name, v, want string), name, path string, max int64, parse func([]byte) error) {
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return
	case err != nil:
		bad(name, path, fmt.Sprintf("a readable regular file (%v)", err))
		return
	case !fi.Mode().IsRegular():
		bad(name, path, "a regular file, not a "+fileKind(fi.Mode()))
		return
	case fi.Size() > max:
		bad(name, path, fmt.Sprintf("a file of at most %d KiB, not %d KiB", max>>10, fi.Size()>>10))
		return
	}
	if parse == nil {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		bad(name, path, fmt.Sprintf("a readable regular file (%v)", err))
		return
	}
	if err := parse(b); err != nil {
		bad(name, path, fmt.Sprintf("a kubeconfig (%v): fix the file, or point %s at another", err, name))
	}
}

// parseKubeconfig is client-go's own reading of a kubeconfig, so what passes
// here is what the tools load later.
func parseKubeconfig(b []byte) error {
	_, err := clientcmd.Load(b)
	return err
}

// fileKind names what a non-regular file is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// callerPathList resolves each entry of a KUBECONFIG-style list.
func callerPathList(workDir, list string) string {
	if list == "" {
		return ""
	}
	parts := filepath.SplitList(list)
	for i, p := range parts {
		parts[i] = CallerPath(workDir, p)
	}
	return strings.Join(parts, string(os.PathListSeparator))
}
