package kindcfg

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// HostsDir is the directory the nodes' containerd reads registry hosts
// from: one <registry>/hosts.toml per mirrored registry. containerd reads
// it at each pull, so a changed mirror needs no restart and no new node.
const HostsDir = "/etc/containerd/certs.d"

// HostsPatch points the CRI plugin at HostsDir. It is written in the
// version 2 form kind's node image uses; containerd 2 migrates it to its
// own form. It replaces `registry.mirrors`, which containerd 2 deprecates,
// 2.4 removes, and which cannot stand beside config_path.
const HostsPatch = "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"" + HostsDir + "\"\n"

// Manifest, inside HostsDir, lists the registries whose hosts.toml krops
// wrote: a mirror removed from the configuration is removed from the
// nodes by that record, never by guessing which directories are krops's.
const Manifest = ".krops-mirrors"

// Mirror sends image pulls for Registry to Endpoints, in order, before
// the registry itself. Source names where it was configured, for errors.
type Mirror struct {
	Registry  string
	Endpoints []string
	Source    string
}

// A registry host as image references carry it: a DNS name or IPv4
// address, with an optional port. docker.io stays docker.io (containerd
// maps it to registry-1.docker.io itself).
var registryHost = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$`)

// CheckMirror says what is wrong with m, naming its source.
func CheckMirror(m Mirror) error {
	if !registryHost.MatchString(m.Registry) {
		return fmt.Errorf("%s: registry %q is not a registry host (a name such as docker.io or localhost:5001, lower case, no scheme or path)", m.Source, m.Registry)
	}
	if len(m.Endpoints) == 0 {
		return fmt.Errorf("%s: registry %s has no endpoints: list at least one http:// or https:// URL", m.Source, m.Registry)
	}
	for _, e := range m.Endpoints {
		if err := checkEndpoint(e); err != nil {
			return fmt.Errorf("%s: registry %s: %w", m.Source, m.Registry, err)
		}
	}
	return nil
}

func checkEndpoint(e string) error {
	u, err := url.Parse(e)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		// Not quoted back in full: a URL with a password would be.
		return fmt.Errorf("endpoint %q is not an http:// or https:// URL", redact(e))
	case u.User != nil:
		return fmt.Errorf("endpoint %s carries credentials: a node's hosts.toml is readable by every pod that mounts the host, so krops writes none; use a mirror that allows anonymous pulls", redact(e))
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("endpoint %s has a query or fragment: give the mirror's base URL (and path, if it serves under one)", redact(e))
	case strings.ContainsAny(e, "\"'\\ \n\r\t"):
		// The local-host ClusterClasses' registryMirrors variable refuses
		// these too (CAPD's machines get the same list): percent-encode.
		return fmt.Errorf("endpoint %q has a quote, backslash, space or control character: percent-encode it", redact(e))
	}
	return nil
}

// redact drops a userinfo part from what looks like a URL.
func redact(e string) string {
	if u, err := url.Parse(e); err == nil && u.User != nil {
		u.User = url.User("REDACTED")
		return u.String()
	}
	if i := strings.Index(e, "@"); i >= 0 {
		return "…" + e[i:]
	}
	return e
}

// MirrorFiles checks mirrors and returns the files to keep in HostsDir of
// every node, by path relative to it: one hosts.toml per registry and the
// Manifest. Two mirrors for one registry are refused, naming both
// sources: which should win is the user's call, not krops's.
func MirrorFiles(mirrors []Mirror) (map[string]string, error) {
	files := map[string]string{}
	seen := map[string]string{}
	var registries []string
	for _, m := range mirrors {
		if err := CheckMirror(m); err != nil {
			return nil, err
		}
		if other, dup := seen[m.Registry]; dup {
			return nil, fmt.Errorf("registry %s is mirrored twice, by %s and by %s: keep one", m.Registry, other, m.Source)
		}
		seen[m.Registry] = m.Source
		registries = append(registries, m.Registry)
		files[path.Join(m.Registry, "hosts.toml")] = HostsTOML(m)
	}
	slices.Sort(registries)
	files[Manifest] = strings.Join(registries, "\n") + "\n"
	return files, nil
}

// HostsTOML is containerd's hosts.toml for m: each endpoint may pull and
// resolve; the registry itself stays the fallback (server). Its first line
// is a comment naming the source. The local-host ClusterClasses write the
// same files on CAPD's machines from a template (validate's tests compare).
func HostsTOML(m Mirror) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by krops-kind (%s)\n", m.Source)
	server := "https://" + m.Registry
	if m.Registry == "docker.io" {
		server = "https://registry-1.docker.io"
	}
	fmt.Fprintf(&b, "server = %q\n", server)
	for _, e := range m.Endpoints {
		fmt.Fprintf(&b, "\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", e)
	}
	return b.String()
}

// Stale returns the registries an earlier manifest lists that files no
// longer mirrors: their directories are krops's to remove.
func Stale(earlierManifest string, files map[string]string) []string {
	var out []string
	for _, r := range strings.Split(earlierManifest, "\n") {
		r = strings.TrimSpace(r)
		if r == "" || !registryHost.MatchString(r) {
			continue
		}
		if _, kept := files[path.Join(r, "hosts.toml")]; !kept {
			out = append(out, r)
		}
	}
	return out
}

// CheckPatches refuses a provider's containerd patch that configures
// registries: containerd will not start with `registry.mirrors` or
// `registry.configs` beside config_path, and HostsPatch sets config_path.
func CheckPatches(patches []string) error {
	for _, p := range patches {
		for _, bad := range []string{".registry.mirrors", ".registry.configs", "config_path"} {
			if strings.Contains(p, bad) {
				return fmt.Errorf("the provider's kind configuration has a containerd patch with %q: containerd refuses registry settings beside the hosts directory krops configures (and 2.4 drops registry.mirrors); a provider sends registry mirrors as RegistryMirrors instead", strings.TrimPrefix(bad, "."))
			}
		}
	}
	return nil
}
