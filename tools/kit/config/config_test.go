package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// minimal is the smallest valid file; cases append or replace lines.
const minimal = `
[bootstrap]
default-environment = "one"

[charts]
flux-operator = "0.61.0"
cert-manager = "1.21.2"
capi-operator = "0.29.0"

[environments.one]
provider = "docker"
sync = "oci"
sync-path = "mgmt/one"
mgmt-cluster = "one-management"
mgmt-ready-timeout = "15m"
infra-provider-namespace = "capd-system"
infra-provider-name = "docker"
provider-manifests = ["mgmt/one/providers.yaml"]
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "bootstrap.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, body string, env map[string]string) (*Config, error) {
	t.Helper()
	p := writeConfig(t, body)
	return Load(LoadOptions{Path: p, Lookup: mapLookup(env)})
}

func mapLookup(m map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func TestRepositoryConfigIsValid(t *testing.T) {
	c, err := Load(LoadOptions{Path: "../../../bootstrap.toml"})
	if err != nil {
		t.Fatalf("the checked-in bootstrap.toml must load: %v", err)
	}
	want := []string{"local-host", "aws", "local-talos", "azure", "gcp"}
	if strings.Join(c.EnvironmentOrder, ",") != strings.Join(want, ",") {
		t.Errorf("environments = %v, want %v in file order", c.EnvironmentOrder, want)
	}
	if c.Bootstrap.DefaultEnvironment != "local-host" {
		t.Errorf("default environment = %q, want local-host (it needs no cloud account)", c.Bootstrap.DefaultEnvironment)
	}
	aws := c.Environments["aws"]
	if aws.MgmtCluster != "eu-north-1-management" || aws.MgmtReadyTimeout != 40*time.Minute {
		t.Errorf("aws = %+v", aws)
	}
	// The aws provider's own keys are set aside for it, the host reads none.
	wantAWS := []string{
		"environments.aws.teardown.aws-workloads", "environments.aws.teardown.mgmt-eks-cluster-name",
		"environments.aws.teardown.mgmt-iam-role-prefix", "providers.aws.teardown.cfn-stack-name",
		"providers.aws.teardown.global-iam-roles", "providers.aws.teardown.global-iam-users",
		"providers.aws.teardown.s3-bucket-pattern",
	}
	if got := c.ProviderKeys("aws"); strings.Join(got, ",") != strings.Join(wantAWS, ",") {
		t.Errorf("aws provider keys = %v, want %v", got, wantAWS)
	}
	if c.Charts.FluxOperator != "0.61.0" || c.Charts.CertManager != "1.21.2" || c.Charts.CAPIOperator < "0.29.0" {
		t.Errorf("chart pins = %+v", c.Charts)
	}
	lh := c.Environments["local-host"]
	if lh.MgmtCluster != "local-management" || strings.Join(lh.Teardown.CAPIWorkloads, ",") != "local-workload" {
		t.Errorf("local-host = %+v", lh)
	}
	if c.Root != filepath.Dir(c.Path) || !filepath.IsAbs(c.Root) {
		t.Errorf("root %q must be the absolute directory of %q", c.Root, c.Path)
	}
}

func TestValidationErrorsNameFileKeyAndAllowedValues(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"unknown top-level key", "extra = 1\n" + minimal, []string{"bootstrap.toml", `unknown key "extra"`, "at the top level", "allowed: bootstrap, charts, providers, environments"}},
		{"unknown bootstrap key", strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nkind-clustr = \"x\"", 1), []string{`unknown key "bootstrap.kind-clustr"`, "in [bootstrap]", "kind-cluster"}},
		{"unknown chart", strings.Replace(minimal, "[charts]", "[charts]\nflux = \"1.0.0\"", 1), []string{`"charts.flux"`, "flux-operator, cert-manager, capi-operator"}},
		{"unknown move-fallback key", minimal + "[[environments.one.move-fallbacks]]\nkind = \"x\"\n", []string{`"environments.one.move-fallbacks[0].kind"`, "resource, name, manifest"}},
		{"unknown mirror key", minimal + "[[mirrors]]\nregistry = \"docker.io\"\nendpoint = [\"https://m.example.com\"]\n", []string{`"mirrors[0].endpoint"`, "registry, endpoints"}},
		{"unknown default environment", strings.Replace(minimal, `default-environment = "one"`, `default-environment = "two"`, 1), []string{"bootstrap.default-environment", `"two" is not a defined environment`, "one of: one"}},
		{"no environments", minimal[:strings.Index(minimal, "[environments.one]")], []string{"no environments are defined"}},
		{"bad sync", strings.Replace(minimal, `sync = "oci"`, `sync = "git"`, 1), []string{"environments.one.sync", `"git" is not allowed`, "allowed: github, oci"}},
		{"sops file in pivot-manifests", minimal + "pivot-manifests = [\"a.yaml\", \"creds.sops.yaml\"]\n", []string{"environments.one.pivot-manifests[1]", "SOPS-encrypted", "pivot-sops-secrets"}},
		{"plain file in pivot-sops-secrets", minimal + "pivot-sops-secrets = [\"creds.yaml\"]\n", []string{"environments.one.pivot-sops-secrets[0]", "not a *.sops.yaml file"}},
		{"bad mgmt-ready-timeout", strings.Replace(minimal, `"15m"`, `"15 minutes"`, 1), []string{"environments.one.mgmt-ready-timeout", "15 minutes"}},
		{"missing provider", strings.Replace(minimal, `provider = "docker"`, "", 1), []string{"environments.one.provider", "is required"}},
		{"bad sha256", minimal + "[providers.docker]\nsha256 = \"abc\"\n", []string{"providers.docker.sha256", "64 lower-case hex"}},
		{"bad chart version", strings.Replace(minimal, `"0.61.0"`, `"latest"`, 1), []string{"charts.flux-operator", `"latest"`}},
		{"lower-case manifest var", minimal + "[environments.one.pivot-manifest-vars]\ngcp_thing = \"x\"\n", []string{"pivot-manifest-vars.gcp_thing", "UPPER_SNAKE_CASE"}},
		{"bad seed wait name", minimal + "[environments.one.seed]\nwait = [\"addons\", \"Flux_Apps\"]\nworkloads = [\"w/1\"]\n", []string{"environments.one.seed.wait[1]", `"Flux_Apps" is not a Kubernetes object name`, "environments.one.seed.workloads[0]"}},
		{"unknown seed key", minimal + "[environments.one.seed]\nwait-for = [\"a\"]\n", []string{`"environments.one.seed.wait-for"`, "wait, workloads"}},
		{"unquoted duration", strings.Replace(minimal, `"15m"`, `15`, 1), []string{"environments[one].mgmt-ready-timeout", `write the value in quotes: a duration as "40m"`}},
		{"empty account id", minimal + "allowed-accounts = [\" \"]\n", []string{"environments.one.allowed-accounts[0]", "is empty"}},
		{"old global teardown table", minimal + "[teardown]\ncfn-stack-name = \"x\"\n", []string{`unknown key "teardown"`, "at the top level"}},
		{"wrong type", strings.Replace(minimal, `sync = "oci"`, `sync = 1`, 1), []string{"bootstrap.toml", "sync"}},
		{"not toml", "[bootstrap\n", []string{"bootstrap.toml", "not valid TOML"}},
		{"kind cluster name with a path", strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nkind-cluster = \"../etc\"", 1), []string{"bootstrap.toml: bootstrap.kind-cluster", `"../etc" is not a kind cluster name`, "lower-case letters"}},
		{"registry name with upper case", strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nregistry-name = \"Reg\"", 1), []string{"bootstrap.registry-name", `"Reg" is not a container name`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.body, nil)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestAllProblemsAreReportedTogether(t *testing.T) {
	body := strings.Replace(minimal, `sync = "oci"`, `sync = "svn"`, 1)
	body = strings.Replace(body, `"15m"`, `"forty"`, 1)
	_, err := load(t, body+"pivot-sops-secrets = [\"x.yaml\"]\n", nil)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, w := range []string{"sync", "mgmt-ready-timeout", "pivot-sops-secrets"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %s: %v", w, err)
		}
	}
}

func TestPrecedenceDefaultsFileEnvironment(t *testing.T) {
	// Defaults fill what the file leaves out.
	c, err := load(t, minimal, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bootstrap.KindCluster != "krops-{env}" || c.Bootstrap.KindContext != "kind-krops-{env}" || c.Bootstrap.RegistryName != "krops-registry" ||
		c.Bootstrap.MgmtContext != "krops-{env}-mgmt" {
		t.Errorf("defaults not applied: %+v", c.Bootstrap)
	}
	// Selecting the environment resolves its names.
	if _, err := c.SelectEnvironment("", "one"); err != nil {
		t.Fatal(err)
	}
	if c.Bootstrap.KindCluster != "krops-one" || c.Bootstrap.KindContext != "kind-krops-one" || c.Bootstrap.MgmtContext != "krops-one-mgmt" {
		t.Errorf("names not resolved for environment one: %+v", c.Bootstrap)
	}
	// The file beats defaults.
	body := strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nkind-cluster = \"boot\"\nregistry-name = \"reg\"", 1)
	c, err = load(t, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bootstrap.KindCluster != "boot" || c.Bootstrap.KindContext != "kind-boot" || c.Bootstrap.RegistryName != "reg" {
		t.Errorf("file values not applied: %+v", c.Bootstrap)
	}
	// The environment beats the file; empty counts as unset.
	c, err = load(t, body, map[string]string{"KROPS_KIND_CLUSTER": "envcluster", "KROPS_REGISTRY_NAME": ""})
	if err != nil {
		t.Fatal(err)
	}
	if c.Bootstrap.KindCluster != "envcluster" || c.Bootstrap.RegistryName != "reg" {
		t.Errorf("environment override: %+v", c.Bootstrap)
	}
}

// A bad name from the environment is reported under the variable the user
// set, not under a file key that holds a good value.
func TestBadOverrideNamesTheVariable(t *testing.T) {
	for _, v := range []string{"../../etc", "a\nb", "Blue", strings.Repeat("x", 50), "-x"} {
		_, err := load(t, minimal, map[string]string{"KROPS_KIND_CLUSTER": v})
		if err == nil || !strings.Contains(err.Error(), "KROPS_KIND_CLUSTER (which overrides bootstrap.kind-cluster in") || !strings.Contains(err.Error(), "is not a kind cluster name") {
			t.Errorf("KROPS_KIND_CLUSTER=%q: %v", v, err)
		}
	}
	if _, err := load(t, minimal, map[string]string{"KROPS_KIND_CLUSTER": strings.Repeat("x", 49)}); err != nil {
		t.Errorf("a 49-character name: %v", err)
	}
}

func TestKindContextFollowsRenamedCluster(t *testing.T) {
	withContext := strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nkind-cluster = \"mgmt\"\nkind-context = \"kind-mgmt\"", 1)
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"file context kept", nil, "kind-mgmt"},
		{"renamed cluster derives its context", map[string]string{"KROPS_KIND_CLUSTER": "other"}, "kind-other"},
		{"explicit context wins over derivation", map[string]string{"KROPS_KIND_CLUSTER": "other", "BOOTSTRAP_KUBECONTEXT": "my-ctx"}, "my-ctx"},
		{"explicit context alone", map[string]string{"BOOTSTRAP_KUBECONTEXT": "my-ctx"}, "my-ctx"},
		{"empty context is unset", map[string]string{"KROPS_KIND_CLUSTER": "other", "BOOTSTRAP_KUBECONTEXT": ""}, "kind-other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, withContext, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.Bootstrap.KindContext != tc.want {
				t.Errorf("kind context = %q, want %q", c.Bootstrap.KindContext, tc.want)
			}
		})
	}
}

func TestConfigPathFromBootstrapConfig(t *testing.T) {
	p := writeConfig(t, minimal)
	c, err := Load(LoadOptions{WorkDir: t.TempDir(), Lookup: mapLookup(map[string]string{"BOOTSTRAP_CONFIG": p})})
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p {
		t.Errorf("path = %q, want %q", c.Path, p)
	}
	wd := t.TempDir()
	_, err = Load(LoadOptions{WorkDir: wd})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(wd, "bootstrap.toml")) || !strings.Contains(err.Error(), "BOOTSTRAP_CONFIG") {
		t.Errorf("missing default file: %v", err)
	}
}

func TestEnvironmentSelection(t *testing.T) {
	body := minimal + strings.ReplaceAll(minimal[strings.Index(minimal, "[environments.one]"):], "one", "zeta") +
		strings.ReplaceAll(minimal[strings.Index(minimal, "[environments.one]"):], "one", "alpha")
	c, err := load(t, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ profile, positional, want, wantErr string }{
		{"", "", "one", ""},
		{"", "zeta", "zeta", ""},
		{"alpha", "zeta", "alpha", ""},
		{"", "nope", "", `unknown environment "nope" (from the command-line argument): known environments are one, zeta, alpha`},
		{"nope", "one", "", `unknown environment "nope" (from KROPS_PROFILE)`},
	}
	for _, tc := range cases {
		env, err := c.SelectEnvironment(tc.profile, tc.positional)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("select(%q, %q) err = %v, want %q", tc.profile, tc.positional, err, tc.wantErr)
			}
			continue
		}
		if err != nil || env.Name != tc.want {
			t.Errorf("select(%q, %q) = %v, %v; want %s", tc.profile, tc.positional, env, err, tc.want)
		}
	}
}

func TestRepositoryPathsResolveAgainstTheConfigDirectory(t *testing.T) {
	p := writeConfig(t, minimal)
	root := filepath.Dir(p)
	other := t.TempDir()
	c, err := Load(LoadOptions{Path: p, WorkDir: other})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RepoPath("mgmt/one/providers.yaml"); got != filepath.Join(root, "mgmt/one/providers.yaml") {
		t.Errorf("RepoPath = %q", got)
	}
	_, err = c.RepoFile("environments.one.provider-manifests[0]", "mgmt/one/providers.yaml")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "mgmt/one/providers.yaml")) || !strings.Contains(err.Error(), "environments.one.provider-manifests[0]") {
		t.Errorf("missing repository file: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "mgmt/one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "mgmt/one/providers.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RepoFile("k", "mgmt/one/providers.yaml"); err != nil {
		t.Errorf("existing file: %v", err)
	}
	// Caller paths stay relative to the caller.
	k, err := ParseKnobs(KnobOptions{WorkDir: other, Home: "/home/u", Lookup: mapLookup(map[string]string{
		"AGE_KEY_FILE": "keys/age.agekey", "KUBECONFIG": "a.yaml:/abs/b.yaml", "MGMT_KUBECONFIG": "m.yaml",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if k.AgeKeyFile != filepath.Join(other, "keys/age.agekey") || k.MgmtKubeconfig != filepath.Join(other, "m.yaml") ||
		k.Kubeconfig != filepath.Join(other, "a.yaml")+":/abs/b.yaml" {
		t.Errorf("caller paths: %+v", k)
	}
}

func TestProviderJSONCarriesEffectiveValuesWithFileKeys(t *testing.T) {
	c, err := load(t, minimal+"[environments.one.teardown]\ncapi-workloads = [\"w\"]\n"+
		"[[mirrors]]\nregistry = \"docker.io\"\nendpoints = [\"https://mirror.example.com\"]\n", map[string]string{"KROPS_REGISTRY_NAME": "reg2"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.ProviderJSON("one")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"registry-name":"reg2"`, `"kind-cluster":"krops-one"`, `"kind-context":"kind-krops-one"`, `"mgmt-context":"krops-one-mgmt"`, `"mgmt-cluster":"one-management"`, `"capi-workloads":["w"]`, `"provider":{}`,
		`"mirrors":[{"endpoints":["https://mirror.example.com"],"registry":"docker.io"}]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if _, err := c.ProviderJSON("nope"); err == nil {
		t.Error("unknown environment")
	}
}

// A configuration path that is not a regular file, or is too large, or
// starts with a BOM, is refused naming the path; a FIFO or /dev/zero is
// refused before it is opened, so nothing blocks or grows.
func TestOnlyRegularBoundedFilesAreRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, []byte(strings.Repeat("# padding\n", MaxFileSize/10+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bom := filepath.Join(dir, "bom.toml")
	if err := os.WriteFile(bom, append([]byte("\xef\xbb\xbf"), minimal...), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo:        "is not a regular file (p---------)",
		"/dev/zero": "is not a regular file",
		dir:         "is not a regular file (d---------)",
		big:         "more than the 1048576 a bootstrap.toml can be",
		bom:         "starts with a UTF-8 byte order mark",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(LoadOptions{Path: path, Lookup: mapLookup(nil)})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want %q", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Load blocked", path)
		}
	}
}

// Each environment resolves {env} to its own kind cluster, kind context and
// management context, so two environments never share a cluster or a
// kubeconfig context by default; a name without {env} is shared as written.
func TestNamesPerEnvironment(t *testing.T) {
	two := minimal + strings.NewReplacer("[environments.one]", "[environments.two]", "mgmt/one", "mgmt/two", "one-management", "two-management").Replace(minimal[strings.Index(minimal, "[environments.one]"):])
	c, err := load(t, two, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Bootstrap{}
	for _, env := range []string{"one", "two", "one"} {
		if _, err := c.SelectEnvironment(env, ""); err != nil {
			t.Fatal(err)
		}
		got[env] = c.Bootstrap
	}
	if got["one"].KindCluster != "krops-one" || got["two"].KindCluster != "krops-two" ||
		got["one"].MgmtContext != "krops-one-mgmt" || got["two"].MgmtContext != "krops-two-mgmt" ||
		got["two"].KindContext != "kind-krops-two" {
		t.Errorf("resolved names: %+v", got)
	}
	// An override without {env} names one cluster, whichever environment.
	c, err = load(t, two, map[string]string{"KROPS_KIND_CLUSTER": "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SelectEnvironment("two", ""); err != nil || c.Bootstrap.KindCluster != "shared" || c.Bootstrap.KindContext != "kind-shared" {
		t.Errorf("override: %+v, %v", c.Bootstrap, err)
	}
}

// A name template is checked as every environment resolves it, and an
// unknown placeholder is refused naming the one krops knows.
func TestNamePlaceholderErrors(t *testing.T) {
	long := strings.Replace(minimal, "[environments.one]", "[environments."+strings.Repeat("e", 45)+"]", 1)
	long = strings.Replace(long, `default-environment = "one"`, `default-environment = "`+strings.Repeat("e", 45)+`"`, 1)
	cases := []struct {
		name string
		body string
		env  map[string]string
		want []string
	}{
		{"resolved name too long", long, nil, []string{"bootstrap.kind-cluster", `"krops-{env}" gives "krops-eeee`, "for environment eeee", "{env} stands for the environment's name"}},
		{"unknown placeholder in a context", strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nmgmt-context = \"krops-{environment}\"", 1), nil, []string{"bootstrap.mgmt-context", "placeholder krops does not know", "{env}"}},
		{"unknown placeholder from the environment", minimal, map[string]string{"BOOTSTRAP_KUBECONTEXT": "kind-{cluster}"}, []string{"BOOTSTRAP_KUBECONTEXT (which overrides bootstrap.kind-context", "placeholder"}},
		{"control character in a context", strings.Replace(minimal, "[bootstrap]", "[bootstrap]\nmgmt-context = \"a\\u0007b\"", 1), nil, []string{"bootstrap.mgmt-context", "control character"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.body, tc.env)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// Keys the host's schema does not know belong to the environment's provider:
// Load sets them aside, CheckProviderKeys holds them against what the
// plugin declares, and the plugin receives them.
func TestProviderKeysAreTheProvidersToDeclare(t *testing.T) {
	body := minimal + `syncpath = "typo"
[environments.one.teardown]
capi-workloads = ["w"]
mgmt-container-prefix = "one-management"
[providers.docker]
sha256 = "` + strings.Repeat("a", 64) + `"
[providers.docker.teardown]
extra = ["x"]
[providers.other]
unrelated = "y"
`
	c, err := load(t, body, nil)
	if err != nil {
		t.Fatalf("provider keys must not fail Load: %v", err)
	}
	want := "environments.one.syncpath,environments.one.teardown.mgmt-container-prefix,providers.docker.teardown.extra"
	if got := strings.Join(c.ProviderKeys("one"), ","); got != want {
		t.Errorf("ProviderKeys = %s, want %s", got, want)
	}
	if strings.Join(c.Environments["one"].Teardown.CAPIWorkloads, ",") != "w" {
		t.Error("the host's own teardown key was lost")
	}
	declared := []string{"environments.*.teardown.mgmt-container-prefix", "providers.*.teardown"}
	err = c.CheckProviderKeys("one", declared)
	if err == nil {
		t.Fatal("an undeclared key passed")
	}
	for _, w := range []string{"bootstrap.toml", `unknown key "environments.one.syncpath" in [environments.one]`, "krops reads: provider, sync, sync-path", "provider docker adds environments.*.teardown.mgmt-container-prefix"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "mgmt-container-prefix\"") || strings.Contains(err.Error(), "providers.docker.teardown.extra") || strings.Contains(err.Error(), "unrelated") {
		t.Errorf("declared keys, or another provider's, were refused: %v", err)
	}
	// The plugin receives its keys: the environment's and its own table's,
	// without the host's pins.
	raw, err := c.ProviderJSON("one")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"mgmt-container-prefix":"one-management"`, `"provider":{"teardown":{"extra":["x"]}}`} {
		if !strings.Contains(string(raw), w) {
			t.Errorf("provider JSON %s lacks %s", raw, w)
		}
	}
	if strings.Contains(string(raw), "sha256") || strings.Contains(string(raw), "unrelated") {
		t.Errorf("provider JSON carries the host's pin or another provider's table: %s", raw)
	}
}
