// Package config loads and validates bootstrap.toml, the repository-owned
// lifecycle configuration, and the environment-variable knobs every krops tool
// shares.
package config

import (
	"strings"
	"time"
)

// File is bootstrap.toml as written. Field tags are the file's kebab-case keys;
// the same tags drive the unknown-key check, so a key added here is accepted
// everywhere at once.
type File struct {
	Bootstrap    Bootstrap              `koanf:"bootstrap"`
	Charts       Charts                 `koanf:"charts"`
	Providers    map[string]Provider    `koanf:"providers"`
	Environments map[string]Environment `koanf:"environments"`
	// Mirrors send the kind nodes' image pulls for a registry to other
	// endpoints (a pull-through cache, an air-gap registry). Every
	// environment's kind cluster uses them.
	Mirrors []Mirror `koanf:"mirrors"`
}

// Mirror is one [[mirrors]] table: pulls of Registry ("docker.io",
// "ghcr.io", "registry.k8s.io", "quay.io", ...) go to Endpoints first, in
// order, then to the registry itself. krops-kind checks the values.
type Mirror struct {
	Registry  string   `koanf:"registry"`
	Endpoints []string `koanf:"endpoints"`
}

// Bootstrap holds the names every environment uses. KindCluster,
// KindContext and MgmtContext may hold EnvPlaceholder; once an environment
// is selected they hold its resolved names (krops-local-host, ...), so two
// environments bootstrap side by side on one machine.
type Bootstrap struct {
	DefaultEnvironment string `koanf:"default-environment"`
	GitBranch          string `koanf:"git-branch"`
	KindCluster        string `koanf:"kind-cluster"`
	// KindContext is empty when the file leaves it to be derived (kind-<cluster>).
	KindContext     string `koanf:"kind-context"`
	RegistryName    string `koanf:"registry-name"`
	FluxNamespace   string `koanf:"flux-namespace"`
	GitHubPATSecret string `koanf:"github-pat-secret"`
	SOPSAgeSecret   string `koanf:"sops-age-secret"`
	MgmtNamespace   string `koanf:"mgmt-namespace"`
	MgmtContext     string `koanf:"mgmt-context"`
}

// EnvPlaceholder in bootstrap.kind-cluster, bootstrap.kind-context or
// bootstrap.mgmt-context stands for the selected environment's name.
const EnvPlaceholder = "{env}"

// ForEnvironment returns b with EnvPlaceholder replaced by env.
func (b Bootstrap) ForEnvironment(env string) Bootstrap {
	b.KindCluster = strings.ReplaceAll(b.KindCluster, EnvPlaceholder, env)
	b.KindContext = strings.ReplaceAll(b.KindContext, EnvPlaceholder, env)
	b.MgmtContext = strings.ReplaceAll(b.MgmtContext, EnvPlaceholder, env)
	return b
}

// Charts pins the Helm charts the imperative tools install before Flux takes
// over; the declarative trees must pin the same versions (task validate checks).
type Charts struct {
	FluxOperator string `koanf:"flux-operator"`
	CertManager  string `koanf:"cert-manager"`
	CAPIOperator string `koanf:"capi-operator"`
}

// Provider optionally pins where a provider plugin lives and what it hashes
// to. Every other key of a [providers.<name>] table belongs to that plugin
// (see ProviderKeys).
type Provider struct {
	Path   string `koanf:"path"`
	SHA256 string `koanf:"sha256"`
}

// Environment is one [environments.<name>] table.
type Environment struct {
	// Name is the table's key; it is not a key inside the table.
	Name string `koanf:"-"`

	Provider               string            `koanf:"provider"`
	Sync                   string            `koanf:"sync"`
	SyncPath               string            `koanf:"sync-path"`
	MgmtCluster            string            `koanf:"mgmt-cluster"`
	MgmtReadyTimeoutText   string            `koanf:"mgmt-ready-timeout"`
	InfraProviderNamespace string            `koanf:"infra-provider-namespace"`
	InfraProviderName      string            `koanf:"infra-provider-name"`
	ProviderManifests      []string          `koanf:"provider-manifests"`
	MoveFallbacks          []MoveFallback    `koanf:"move-fallbacks"`
	PivotManifests         []string          `koanf:"pivot-manifests"`
	PivotManifestVars      map[string]string `koanf:"pivot-manifest-vars"`
	PivotSOPSSecrets       []string          `koanf:"pivot-sops-secrets"`
	PostKindCreateTask     string            `koanf:"post-kind-create-task"`
	// AllowedAccounts, when set, are the only cloud accounts the provider
	// may work in; any other account is refused before anything is listed.
	AllowedAccounts []string    `koanf:"allowed-accounts"`
	Seed            EnvSeed     `koanf:"seed"`
	Teardown        EnvTeardown `koanf:"teardown"`

	// MgmtReadyTimeout is MgmtReadyTimeoutText parsed during validation.
	MgmtReadyTimeout time.Duration `koanf:"-"`
}

// MoveFallback names an object clusterctl move is known to skip and the
// manifest that recreates it on the target.
type MoveFallback struct {
	Resource string `koanf:"resource"`
	Name     string `koanf:"name"`
	Manifest string `koanf:"manifest"`
}

// EnvSeed says how long krops-flux-seed follows Flux after it has taken
// over: beyond the FluxInstance and flux-system, which it always waits for.
type EnvSeed struct {
	// Wait are Kustomizations in the Flux namespace that must be Ready.
	Wait []string `koanf:"wait"`
	// Workloads are Clusters (in mgmt-namespace) whose own flux-system
	// Kustomization must then be Ready, reached through the kubeconfig
	// Secret Cluster API writes for them.
	Workloads []string `koanf:"workloads"`
}

// EnvTeardown says what teardown removes for one environment, as far as
// the host does it; the rest of the table belongs to the provider.
type EnvTeardown struct {
	CAPIWorkloads []string `koanf:"capi-workloads"`
}

// Sync sources an environment may use.
const (
	SyncGitHub = "github"
	SyncOCI    = "oci"
)
