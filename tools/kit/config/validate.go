package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/kropsdev/krops/plugins/sdk/duration"
)

var (
	providerName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	upperSnake   = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	sha256Hex    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	objectName   = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)
	// kindName is what kind accepts as a cluster name, without the dots'
	// leading and trailing forms; its nodes are <name>-control-plane and
	// <name>-worker<N>, host names of at most 63 characters.
	kindName     = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,47}[a-z0-9])?$`)
	chartVersion = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$`)
)

const sopsSuffix = ".sops.yaml"

func (c *Config) problem(key, format string, args ...any) error {
	if env := c.overriddenBy[key]; env != "" {
		return fmt.Errorf("%s (which overrides %s in %s): %s", env, key, c.Path, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s: %s: %s", c.Path, key, fmt.Sprintf(format, args...))
}

func (c *Config) validate() []error {
	var errs []error
	req := func(key, v string) {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, c.problem(key, "is required and must not be empty"))
		}
	}
	b := c.Bootstrap
	req("bootstrap.git-branch", b.GitBranch)
	req("bootstrap.kind-cluster", b.KindCluster)
	req("bootstrap.registry-name", b.RegistryName)
	req("bootstrap.flux-namespace", b.FluxNamespace)
	req("bootstrap.github-pat-secret", b.GitHubPATSecret)
	req("bootstrap.sops-age-secret", b.SOPSAgeSecret)
	req("bootstrap.mgmt-namespace", b.MgmtNamespace)
	req("bootstrap.mgmt-context", b.MgmtContext)
	// The kind cluster's name becomes container, network, context and lock
	// names, and status prints it: a path or a newline there is refused
	// before anything is named after it. A name with {env} is checked as
	// every environment resolves it.
	if b.KindCluster != "" {
		for _, env := range c.placeholderEnvironments(b.KindCluster) {
			name := strings.ReplaceAll(b.KindCluster, EnvPlaceholder, env)
			if kindName.MatchString(name) {
				continue
			}
			if name == b.KindCluster {
				errs = append(errs, c.problem("bootstrap.kind-cluster", "%q is not a kind cluster name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 49 characters", b.KindCluster))
			} else {
				errs = append(errs, c.problem("bootstrap.kind-cluster", "%q gives %q for environment %s, which is not a kind cluster name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 49 characters (%s stands for the environment's name)", b.KindCluster, name, env, EnvPlaceholder))
			}
			break
		}
	}
	for _, n := range []struct{ key, v string }{
		{"bootstrap.kind-cluster", b.KindCluster}, {"bootstrap.kind-context", b.KindContext}, {"bootstrap.mgmt-context", b.MgmtContext},
	} {
		if rest := strings.ReplaceAll(n.v, EnvPlaceholder, ""); strings.ContainsAny(rest, "{}") {
			errs = append(errs, c.problem(n.key, "%q has a placeholder krops does not know: the only one is %s, the environment's name", n.v, EnvPlaceholder))
		} else if strings.ContainsFunc(n.v, unicode.IsControl) {
			errs = append(errs, c.problem(n.key, "%q holds a control character: a context name is printed and written to kubeconfig files", n.v))
		}
	}
	if b.RegistryName != "" && !kindName.MatchString(b.RegistryName) {
		errs = append(errs, c.problem("bootstrap.registry-name", "%q is not a container name krops uses: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 49 characters", b.RegistryName))
	}

	for _, ch := range []struct{ key, v string }{
		{"charts.flux-operator", c.Charts.FluxOperator},
		{"charts.cert-manager", c.Charts.CertManager},
		{"charts.capi-operator", c.Charts.CAPIOperator},
	} {
		if !chartVersion.MatchString(ch.v) {
			errs = append(errs, c.problem(ch.key, "%q is not a chart version (want X.Y.Z, for example 1.21.2)", ch.v))
		}
	}

	for _, name := range sortedKeys(c.Providers) {
		p := c.Providers[name]
		key := "providers." + name
		if !providerName.MatchString(name) {
			errs = append(errs, c.problem(key, "provider name %q must be lower-case letters, digits and dashes", name))
		}
		if p.SHA256 != "" && !sha256Hex.MatchString(p.SHA256) {
			errs = append(errs, c.problem(key+".sha256", "%q is not a SHA256 digest (want 64 lower-case hex characters, as printed by sha256sum)", p.SHA256))
		}
	}

	if len(c.Environments) == 0 {
		errs = append(errs, c.problem("environments", "no environments are defined: add at least one [environments.<name>] table"))
		return errs
	}
	if b.DefaultEnvironment == "" {
		errs = append(errs, c.problem("bootstrap.default-environment", "is required (one of: %s)", c.knownEnvironments()))
	} else if _, ok := c.Environments[b.DefaultEnvironment]; !ok {
		errs = append(errs, c.problem("bootstrap.default-environment", "%q is not a defined environment (one of: %s)", b.DefaultEnvironment, c.knownEnvironments()))
	}
	for _, name := range c.EnvironmentOrder {
		env := c.Environments[name]
		errs = append(errs, c.validateEnvironment(&env)...)
		c.Environments[name] = env
	}
	return errs
}

func (c *Config) validateEnvironment(env *Environment) []error {
	var errs []error
	key := func(k string) string { return "environments." + env.Name + "." + k }
	req := func(k, v string) {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, c.problem(key(k), "is required and must not be empty"))
		}
	}
	if !providerName.MatchString(env.Name) {
		errs = append(errs, c.problem("environments."+env.Name, "environment name must be lower-case letters, digits and dashes"))
	}
	if env.Provider == "" {
		errs = append(errs, c.problem(key("provider"), "is required: name the provider plugin (krops-provider-<name>) that serves this environment"))
	} else if !providerName.MatchString(env.Provider) {
		errs = append(errs, c.problem(key("provider"), "%q must be lower-case letters, digits and dashes", env.Provider))
	}
	switch env.Sync {
	case SyncGitHub, SyncOCI:
	default:
		errs = append(errs, c.problem(key("sync"), "%q is not allowed (allowed: %s, %s)", env.Sync, SyncGitHub, SyncOCI))
	}
	req("sync-path", env.SyncPath)
	req("mgmt-cluster", env.MgmtCluster)
	req("infra-provider-namespace", env.InfraProviderNamespace)
	req("infra-provider-name", env.InfraProviderName)
	if env.MgmtReadyTimeoutText == "" {
		errs = append(errs, c.problem(key("mgmt-ready-timeout"), "is required: %s", duration.Grammar))
	} else if d, err := duration.Parse(env.MgmtReadyTimeoutText); err != nil {
		errs = append(errs, c.problem(key("mgmt-ready-timeout"), "%v", err))
	} else if d == 0 {
		errs = append(errs, c.problem(key("mgmt-ready-timeout"), "must be greater than zero"))
	} else {
		env.MgmtReadyTimeout = d
	}
	if len(env.ProviderManifests) == 0 {
		errs = append(errs, c.problem(key("provider-manifests"), "is required: list the CAPI provider manifests the pivot applies on the management cluster"))
	}
	for i, p := range env.PivotManifests {
		if strings.HasSuffix(p, sopsSuffix) {
			errs = append(errs, c.problem(fmt.Sprintf("%s[%d]", key("pivot-manifests"), i), "%q is SOPS-encrypted: list it under pivot-sops-secrets, which decrypts before applying", p))
		}
	}
	for i, p := range env.PivotSOPSSecrets {
		if !strings.HasSuffix(p, sopsSuffix) {
			errs = append(errs, c.problem(fmt.Sprintf("%s[%d]", key("pivot-sops-secrets"), i), "%q is not a *%s file: plain manifests belong in pivot-manifests", p, sopsSuffix))
		}
	}
	for _, v := range sortedKeys(env.PivotManifestVars) {
		if !upperSnake.MatchString(v) {
			errs = append(errs, c.problem(key("pivot-manifest-vars."+v), "variable names must be UPPER_SNAKE_CASE"))
		}
	}
	for i, a := range env.AllowedAccounts {
		// The form of an account id is the provider's to check (aws: 12
		// digits); an empty one would match nothing and hide a slip.
		if strings.TrimSpace(a) == "" {
			errs = append(errs, c.problem(fmt.Sprintf("%s[%d]", key("allowed-accounts"), i), "is empty: write the account id, or remove allowed-accounts"))
		}
	}
	for i, fb := range env.MoveFallbacks {
		k := fmt.Sprintf("move-fallbacks[%d]", i)
		req(k+".resource", fb.Resource)
		req(k+".name", fb.Name)
		req(k+".manifest", fb.Manifest)
	}
	for _, f := range []struct {
		field string
		names []string
	}{{"seed.wait", env.Seed.Wait}, {"seed.workloads", env.Seed.Workloads}} {
		for i, n := range f.names {
			if len(n) > 253 || !objectName.MatchString(n) {
				errs = append(errs, c.problem(fmt.Sprintf("%s[%d]", key(f.field), i), "%q is not a Kubernetes object name (lower-case letters, digits and dashes)", n))
			}
		}
	}
	return errs
}

// placeholderEnvironments lists the environments a name must be checked
// for: all of them when it holds EnvPlaceholder, else one (any) name.
func (c *Config) placeholderEnvironments(v string) []string {
	if !strings.Contains(v, EnvPlaceholder) || len(c.EnvironmentOrder) == 0 {
		return []string{""}
	}
	return c.EnvironmentOrder
}

func (c *Config) knownEnvironments() string {
	return strings.Join(c.EnvironmentOrder, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
