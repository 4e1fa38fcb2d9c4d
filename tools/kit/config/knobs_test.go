package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func parseKnobs(t *testing.T, env map[string]string) (*Knobs, error) {
	t.Helper()
	return ParseKnobs(KnobOptions{Lookup: mapLookup(env), WorkDir: "/work", Home: "/home/u"})
}

func TestKnobDefaults(t *testing.T) {
	k, err := parseKnobs(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Knobs{
		RegistryPort: 5001, RegistryReadyRetries: 120, LocalReconcileTimeout: 15 * time.Minute,
		GitHubUser: "git", AgeKeyFile: "/work/age.agekey", OCIRepository: "krops", OCITag: "latest",
		Pivot: true, MgmtKubeconfig: "/home/u/.kube/krops-aws-mgmt.yaml", MgmtPollInterval: 10 * time.Second,
		ClusterDeleteTimeout: 1200 * time.Second, ProviderDeleteTimeout: 300 * time.Second, OrphanMinAgeHours: 6,
		mgmtKubeconfigDefault: true, home: "/home/u",
	}
	if err := k.ForEnvironment("aws"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", *k) != fmt.Sprintf("%+v", want) {
		t.Errorf("defaults\n got %+v\nwant %+v", *k, want)
	}
	// The default follows the environment; a value that was set does not.
	if err := k.ForEnvironment("local-host"); err != nil || k.MgmtKubeconfig != "/home/u/.kube/krops-local-host-mgmt.yaml" {
		t.Errorf("default for local-host: %q, %v", k.MgmtKubeconfig, err)
	}
	set, err := parseKnobs(t, map[string]string{"MGMT_KUBECONFIG": "/x/m.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.ForEnvironment("aws"); err != nil || set.MgmtKubeconfig != "/x/m.yaml" {
		t.Errorf("a set MGMT_KUBECONFIG moved: %q, %v", set.MgmtKubeconfig, err)
	}
}

func TestKnobValues(t *testing.T) {
	cases := []struct {
		env   map[string]string
		check func(*Knobs) bool
	}{
		{map[string]string{"REGISTRY_PORT": "65535"}, func(k *Knobs) bool { return k.RegistryPort == 65535 }},
		{map[string]string{"REGISTRY_PORT": ""}, func(k *Knobs) bool { return k.RegistryPort == 5001 }},
		{map[string]string{"REGISTRY_READY_RETRIES": "0"}, func(k *Knobs) bool { return k.RegistryReadyRetries == 0 }},
		{map[string]string{"MGMT_READY_TIMEOUT": " 40m "}, func(k *Knobs) bool { return k.MgmtReadyTimeout == 40*time.Minute }},
		{map[string]string{"MGMT_POLL_INTERVAL": "3"}, func(k *Knobs) bool { return k.MgmtPollInterval == 3*time.Second }},
		{map[string]string{"CLUSTER_DELETE_TIMEOUT": "2h"}, func(k *Knobs) bool { return k.ClusterDeleteTimeout == 2*time.Hour }},
		{map[string]string{"BOOTSTRAP_PIVOT": "0"}, func(k *Knobs) bool { return !k.Pivot }},
		{map[string]string{"BOOTSTRAP_PIVOT": ""}, func(k *Knobs) bool { return k.Pivot }},
		{map[string]string{"BOOTSTRAP_PIVOT": "1"}, func(k *Knobs) bool { return k.Pivot }},
		{map[string]string{"AWS_ONLY": "1"}, func(k *Knobs) bool { return k.AWSOnly }},
		{map[string]string{"FORCE_KIND_DELETE": "1"}, func(k *Knobs) bool { return k.ForceKindDelete }},
		{map[string]string{"PIVOT_SKIP_DELETE": "1"}, func(k *Knobs) bool { return k.PivotSkipDelete }},
		{map[string]string{"PIVOT_SKIP_DELETE": "0"}, func(k *Knobs) bool { return !k.PivotSkipDelete }},
		{map[string]string{"KROPS_RUN_ID": "local-host-20261201t191333z"}, func(k *Knobs) bool { return k.RunID == "local-host-20261201t191333z" }},
		{map[string]string{"KROPS_RUN_TTL": "none"}, func(k *Knobs) bool { return k.RunTTL == "none" }},
		{map[string]string{"KROPS_TOOLBOX": "1"}, func(k *Knobs) bool { return k.Toolbox }},
		{map[string]string{"CONTAINER_ENGINE": "podman"}, func(k *Knobs) bool { return k.ContainerEngine == "podman" }},
		{map[string]string{"ORPHAN_MIN_AGE_HOURS": "0"}, func(k *Knobs) bool { return k.OrphanMinAgeHours == 0 }},
		{map[string]string{"AGE_PUBLIC_KEY": " age1xyz \n"}, func(k *Knobs) bool { return k.AgePublicKey == "age1xyz" }},
		{map[string]string{"GITHUB_TOKEN": "ghp_secret"}, func(k *Knobs) bool { return k.GitHubToken.Reveal() == "ghp_secret" }},
		{map[string]string{"KROPS_PROFILE": "aws"}, func(k *Knobs) bool { return k.Profile == "aws" }},
		{map[string]string{"KROPS_CHART_REPOSITORY": "oci://mirror.example:8443/charts/"}, func(k *Knobs) bool { return k.ChartRepository == "oci://mirror.example:8443/charts/" }},
		{map[string]string{"KROPS_CHART_REPOSITORY": "https://charts.example/flux"}, func(k *Knobs) bool { return k.ChartRepository == "https://charts.example/flux" }},
		{map[string]string{"KROPS_PROVIDER_REPOSITORY": " oci://mirror.example:8443/capi "}, func(k *Knobs) bool { return k.ProviderRepository == "oci://mirror.example:8443/capi" }},
		{map[string]string{}, func(k *Knobs) bool { return k.ProviderRepository == "" && k.FluxRegistry == "" }},
		{map[string]string{"KROPS_FLUX_REGISTRY": "localhost:5001/fluxcd/"}, func(k *Knobs) bool { return k.FluxRegistry == "localhost:5001/fluxcd" }},
		{map[string]string{"KROPS_CHART_REPOSITORY": ""}, func(k *Knobs) bool {
			return k.ChartRepository == "" && k.ChartRepositoryOr(DefaultChartRepository) == DefaultChartRepository
		}},
		{map[string]string{"KROPS_CHART_REPOSITORY": "oci://mirror.example/charts"}, func(k *Knobs) bool {
			return k.ChartRepositoryOr("https://charts.jetstack.io") == "oci://mirror.example/charts"
		}},
	}
	for _, tc := range cases {
		k, err := parseKnobs(t, tc.env)
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if !tc.check(k) {
			t.Errorf("%v: unexpected knobs %+v", tc.env, *k)
		}
	}
}

func TestInvalidKnobsAreNamedWithWhatIsAccepted(t *testing.T) {
	cases := []struct {
		name, value, want string
	}{
		{"REGISTRY_PORT", "65536", "from 0 to 65535"},
		{"REGISTRY_PORT", "0", "from 1 to 65535"},
		{"REGISTRY_PORT", "-1", "REGISTRY_PORT"},
		{"REGISTRY_PORT", "http", "REGISTRY_PORT"},
		{"REGISTRY_READY_RETRIES", "4294967296", "REGISTRY_READY_RETRIES"},
		{"MGMT_READY_TIMEOUT", "m", "whole number"},
		{"MGMT_READY_TIMEOUT", "40x", "MGMT_READY_TIMEOUT"},
		{"MGMT_READY_TIMEOUT", "4-0m", "MGMT_READY_TIMEOUT"},
		{"MGMT_READY_TIMEOUT", "forty", "MGMT_READY_TIMEOUT"},
		{"MGMT_READY_TIMEOUT", "0", "greater than zero"},
		{"MGMT_POLL_INTERVAL", "0", "greater than zero"},
		{"MGMT_POLL_INTERVAL", "-3", "MGMT_POLL_INTERVAL"},
		{"LOCAL_RECONCILE_TIMEOUT", "1.5h", "LOCAL_RECONCILE_TIMEOUT"},
		{"CLUSTER_DELETE_TIMEOUT", "20 m", "CLUSTER_DELETE_TIMEOUT"},
		{"PROVIDER_DELETE_TIMEOUT", "5d", "PROVIDER_DELETE_TIMEOUT"},
		{"ORPHAN_MIN_AGE_HOURS", "six", "ORPHAN_MIN_AGE_HOURS"},
		{"ORPHAN_MIN_AGE_HOURS", "-1", "ORPHAN_MIN_AGE_HOURS"},
		{"CONTAINER_ENGINE", "nerdctl", "docker or podman"},
		// A gate that is neither 1 nor 0 is refused, never read as off.
		{"PIVOT_SKIP_DELETE", "true", "1 to enable or 0 to disable"},
		{"PIVOT_SKIP_DELETE", "yes", "1 to enable or 0 to disable"},
		{"BOOTSTRAP_PIVOT", "true", "1 to enable or 0 to disable"},
		{"AWS_ONLY", "yes", "1 to enable or 0 to disable"},
		{"FORCE_KIND_DELETE", "on", "1 to enable or 0 to disable"},
		{"KROPS_TOOLBOX", "true", "1 to enable or 0 to disable"},
		{"KROPS_RUN_ID", "has space", "label value"},
		{"KROPS_RUN_TTL", "-1h", "KROPS_RUN_TTL"},
		{"KROPS_CHART_REPOSITORY", "ghcr.io/controlplaneio-fluxcd/charts", "oci://<registry>/<path>"},
		{"KROPS_CHART_REPOSITORY", "oci://Upper.example/Charts", "oci://<registry>/<path>"},
		{"KROPS_CHART_REPOSITORY", "https:///charts", "no host"},
		{"KROPS_PROVIDER_REPOSITORY", "https://github.com/kubernetes-sigs", "no oci:// scheme"},
		{"KROPS_FLUX_REGISTRY", "oci://localhost:5001/fluxcd", "a registry path without a scheme"},
		{"KROPS_FLUX_REGISTRY", "Mirror.example/FluxCD", "a registry path without a scheme"},
		{"KROPS_PROVIDER_REPOSITORY", "oci://Upper.example/Capi", "<GitHub repository>/releases:<version>"},
	}
	for _, tc := range cases {
		_, err := parseKnobs(t, map[string]string{tc.name: tc.value})
		if err == nil {
			t.Errorf("%s=%q: want an error", tc.name, tc.value)
			continue
		}
		for _, w := range []string{tc.name, fmt.Sprintf("%q", tc.value), tc.want} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s=%q: error %q lacks %q", tc.name, tc.value, err, w)
			}
		}
	}
	// All invalid knobs in one error.
	_, err := parseKnobs(t, map[string]string{"REGISTRY_PORT": "x", "MGMT_POLL_INTERVAL": "0"})
	if err == nil || !strings.Contains(err.Error(), "REGISTRY_PORT") || !strings.Contains(err.Error(), "MGMT_POLL_INTERVAL") {
		t.Errorf("want both knobs named: %v", err)
	}
}

// Path knobs name files client-go and the age library read later: a FIFO
// would block that read forever, and a device or a huge file fill memory,
// so anything but a regular file of a sane size is refused up front.
func TestPathKnobsMustBeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxKubeconfigSize + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	for _, knob := range []string{"KUBECONFIG", "MGMT_KUBECONFIG", "AGE_KEY_FILE"} {
		for path, want := range map[string]string{fifo: "not a named pipe", dir: "not a directory", loop: "too many levels of symbolic links", "/dev/zero": "not a device", huge: "KiB"} {
			_, err := parseKnobs(t, map[string]string{knob: path})
			if err == nil || !strings.Contains(err.Error(), knob+"=") || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%s: %v, want it refused (%q)", knob, path, err, want)
			}
		}
	}
	// A kubeconfig must parse as one: client-go reading it later made a
	// broken file look like a cluster that does not answer.
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: [\x00 not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, knob := range []string{"KUBECONFIG", "MGMT_KUBECONFIG"} {
		_, err := parseKnobs(t, map[string]string{knob: garbage})
		if err == nil || !strings.Contains(err.Error(), knob+"=") || !strings.Contains(err.Error(), "want a kubeconfig") || !strings.Contains(err.Error(), "point "+knob+" at another") {
			t.Errorf("%s=%s: %v, want it refused as not a kubeconfig", knob, garbage, err)
		}
	}
	// Absent files are fine: they are written later.
	if _, err := parseKnobs(t, map[string]string{"MGMT_KUBECONFIG": filepath.Join(dir, "not-yet.yaml"), "KUBECONFIG": filepath.Join(dir, "a") + string(filepath.ListSeparator) + filepath.Join(dir, "b")}); err != nil {
		t.Errorf("absent kubeconfigs: %v", err)
	}
}

func TestSecretsNeverFormat(t *testing.T) {
	k, err := parseKnobs(t, map[string]string{"GITHUB_TOKEN": "ghp_topsecret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%v", *k), fmt.Sprintf("%+v", *k), fmt.Sprintf("%#v", *k), fmt.Sprint(k.GitHubToken)} {
		if strings.Contains(s, "ghp_topsecret") {
			t.Errorf("secret leaked: %s", s)
		}
	}
}

func TestEveryKnobIsMappedFlaggedAndDocumented(t *testing.T) {
	// The lifecycle's environment interface, as listed in the foundation issue.
	iface := strings.Fields(`KROPS_KIND_CLUSTER BOOTSTRAP_KUBECONTEXT REGISTRY_PORT KROPS_REGISTRY_NAME
		REGISTRY_READY_RETRIES LOCAL_RECONCILE_TIMEOUT CONTAINER_ENGINE ENGINE_SOCK KROPS_TOOLBOX GIT_REPO_URL
		GITHUB_TOKEN GITHUB_USER AGE_KEY_FILE AGE_PUBLIC_KEY OCI_REPOSITORY OCI_TAG BOOTSTRAP_PIVOT
		PIVOT_SKIP_DELETE MGMT_KUBECONFIG MGMT_READY_TIMEOUT MGMT_POLL_INTERVAL AWS_ONLY FORCE_KIND_DELETE
		CLUSTER_DELETE_TIMEOUT PROVIDER_DELETE_TIMEOUT ORPHAN_MIN_AGE_HOURS ORPHAN_REPORT_JSON KROPS_RUN_ID
		KROPS_RUN_TTL KROPS_REVISION KROPS_RUN_KIND KROPS_PROFILE BOOTSTRAP_CONFIG`)
	table := map[string]Knob{}
	for _, k := range KnobTable() {
		if _, dup := table[k.Env]; dup {
			t.Errorf("%s listed twice", k.Env)
		}
		table[k.Env] = k
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatalf("docs/configuration.md documents every knob: %v", err)
	}
	for _, name := range iface {
		k, ok := table[name]
		if !ok {
			t.Errorf("%s is not in KnobTable", name)
			continue
		}
		if k.Usage == "" || k.Default == "" {
			t.Errorf("%s lacks usage or default", name)
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not documented in docs/configuration.md", name)
		}
	}
	if table["GITHUB_TOKEN"].Flag != "" {
		t.Error("GITHUB_TOKEN must not be a flag: secrets never travel in argv")
	}
}

// The environment's default MGMT_KUBECONFIG is checked like a set one: a
// FIFO there is refused naming the knob and the environment, not opened.
func TestDefaultMgmtKubeconfigIsChecked(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(DefaultMgmtKubeconfig(home, "aws"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := ParseKnobs(KnobOptions{Lookup: mapLookup(nil), WorkDir: home, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.ForEnvironment("local-host"); err != nil {
		t.Errorf("local-host's default is not the FIFO: %v", err)
	}
	err = k.ForEnvironment("aws")
	if err == nil || !strings.Contains(err.Error(), "MGMT_KUBECONFIG") || !strings.Contains(err.Error(), "environment aws") || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("FIFO default: %v", err)
	}
}

// In the toolbox the home directory dies with the container: the default
// management kubeconfig lives beside KUBECONFIG (the repository's .kube/).
func TestTheToolboxKeepsTheMgmtKubeconfigInTheRepository(t *testing.T) {
	home, repo := t.TempDir(), t.TempDir()
	kc := filepath.Join(repo, ".kube", "config")
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"KUBECONFIG": kc}, DefaultMgmtKubeconfig(home, "local-host")},
		{map[string]string{"KUBECONFIG": kc, "KROPS_TOOLBOX": "1"}, filepath.Join(repo, ".kube", "krops-local-host-mgmt.yaml")},
		{map[string]string{"KUBECONFIG": kc, "KROPS_TOOLBOX": "1", "MGMT_KUBECONFIG": "/set/by/user.yaml"}, "/set/by/user.yaml"},
	} {
		k, err := ParseKnobs(KnobOptions{Lookup: mapLookup(tc.env), WorkDir: repo, Home: home})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.ForEnvironment("local-host"); err != nil || k.MgmtKubeconfig != tc.want {
			t.Errorf("%v: MGMT_KUBECONFIG %q (%v), want %q", tc.env, k.MgmtKubeconfig, err, tc.want)
		}
	}
}
