package testenv

import (
	"fmt"
	"strings"
)

// Env is one environment of a test bootstrap.toml. Unset fields get the
// values the tests share: sync "oci", sync-path "mgmt/<name>", mgmt-cluster
// "<name>-management", mgmt-ready-timeout "15m", infrastructure provider
// "x" in namespace "x", provider-manifests ["x.yaml"].
type Env struct {
	Name, Provider                            string
	Sync, SyncPath, MgmtCluster, ReadyTimeout string
	InfraNamespace, InfraName                 string
	ProviderManifests                         []string
	// Keys are more `key = value` lines of the environment's own table.
	Keys []string
	// Tables are its sub-tables as TOML text, such as
	// "[environments.<name>.teardown]\ncapi-workloads = [...]".
	Tables string
}

// LocalHost is the local-host environment as the repository declares it
// (the docker provider, CAPD, local-management).
func LocalHost() Env {
	return Env{Name: "local-host", Provider: "docker", MgmtCluster: "local-management", InfraNamespace: "capd-system", InfraName: "docker"}
}

// BootstrapTOML is a whole bootstrap.toml: [bootstrap] naming the first
// environment the default, the chart pins, and envs.
func BootstrapTOML(envs ...Env) string {
	var b strings.Builder
	def := ""
	if len(envs) > 0 {
		def = envs[0].Name
	}
	fmt.Fprintf(&b, "[bootstrap]\ndefault-environment = %q\n\n[charts]\nflux-operator = \"0.61.0\"\ncert-manager = \"1.21.2\"\ncapi-operator = \"0.29.0\"\n", def)
	for _, e := range envs {
		b.WriteString("\n" + e.TOML())
	}
	return b.String()
}

// TOML is the environment's tables alone, to append to another file.
func (e Env) TOML() string {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	manifests := e.ProviderManifests
	if len(manifests) == 0 {
		manifests = []string{"x.yaml"}
	}
	quoted := make([]string, len(manifests))
	for i, m := range manifests {
		quoted[i] = fmt.Sprintf("%q", m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[environments.%s]\n", e.Name)
	fmt.Fprintf(&b, "provider = %q\nsync = %q\nsync-path = %q\nmgmt-cluster = %q\nmgmt-ready-timeout = %q\n",
		e.Provider, or(e.Sync, "oci"), or(e.SyncPath, "mgmt/"+e.Name), or(e.MgmtCluster, e.Name+"-management"), or(e.ReadyTimeout, "15m"))
	fmt.Fprintf(&b, "infra-provider-namespace = %q\ninfra-provider-name = %q\nprovider-manifests = [%s]\n",
		or(e.InfraNamespace, "x"), or(e.InfraName, "x"), strings.Join(quoted, ", "))
	for _, k := range e.Keys {
		b.WriteString(k + "\n")
	}
	if e.Tables != "" {
		b.WriteString("\n" + strings.TrimSpace(e.Tables) + "\n")
	}
	return b.String()
}
