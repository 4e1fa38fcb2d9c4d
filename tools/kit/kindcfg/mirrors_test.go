package kindcfg

import (
	"strings"
	"testing"
)

func TestMirrorFilesWriteOneHostsFilePerRegistry(t *testing.T) {
	files, err := MirrorFiles([]Mirror{
		{Registry: "localhost:5001", Endpoints: []string{"http://krops-registry:5000"}, Source: "provider docker"},
		{Registry: "docker.io", Endpoints: []string{"https://mirror.example.com", "http://10.0.0.5:5000/v2-cache"}, Source: "bootstrap.toml [[mirrors]] entry 1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"localhost:5001/hosts.toml": "# written by krops-kind (provider docker)\nserver = \"https://localhost:5001\"\n\n[host.\"http://krops-registry:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		// docker.io's own endpoint is registry-1.docker.io.
		"docker.io/hosts.toml": "# written by krops-kind (bootstrap.toml [[mirrors]] entry 1)\nserver = \"https://registry-1.docker.io\"\n\n" +
			"[host.\"https://mirror.example.com\"]\n  capabilities = [\"pull\", \"resolve\"]\n\n[host.\"http://10.0.0.5:5000/v2-cache\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		Manifest: "docker.io\nlocalhost:5001\n",
	}
	if len(files) != len(want) {
		t.Errorf("files %v, want %d", files, len(want))
	}
	for name, content := range want {
		if files[name] != content {
			t.Errorf("%s:\n%s\nwant:\n%s", name, files[name], content)
		}
	}
	// No mirror at all still writes the (empty) record, so a later run
	// knows an earlier one's mirrors are gone.
	none, err := MirrorFiles(nil)
	if err != nil || len(none) != 1 || none[Manifest] != "\n" {
		t.Errorf("no mirrors: %v %v", none, err)
	}
}

func TestMirrorMistakesAreNamed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mirrors []Mirror
		want    []string
		secret  string
	}{
		{"scheme in the registry", []Mirror{{Registry: "https://docker.io", Endpoints: []string{"https://m"}, Source: "f entry 1"}}, []string{"f entry 1", `"https://docker.io" is not a registry host`}, ""},
		{"upper case", []Mirror{{Registry: "Docker.io", Endpoints: []string{"https://m"}, Source: "f entry 1"}}, []string{"lower case"}, ""},
		{"no endpoints", []Mirror{{Registry: "quay.io", Source: "f entry 2"}}, []string{"f entry 2", "quay.io has no endpoints"}, ""},
		{"not a URL", []Mirror{{Registry: "quay.io", Endpoints: []string{"mirror.example.com"}, Source: "s"}}, []string{`endpoint "mirror.example.com" is not an http:// or https:// URL`}, ""},
		{"credentials", []Mirror{{Registry: "ghcr.io", Endpoints: []string{"https://bob:hunter2@mirror.example.com"}, Source: "s"}}, []string{"ghcr.io", "carries credentials", "REDACTED@mirror.example.com"}, "hunter2"},
		{"query", []Mirror{{Registry: "ghcr.io", Endpoints: []string{"https://m.example.com/?token=abc"}, Source: "s"}}, []string{"query or fragment"}, ""},
		{"quote", []Mirror{{Registry: "ghcr.io", Endpoints: []string{"https://m.example.com/\"x"}, Source: "s"}}, []string{"quote"}, ""},
		{"single quote", []Mirror{{Registry: "ghcr.io", Endpoints: []string{"https://m.example.com/it's"}, Source: "s"}}, []string{"quote", "percent-encode"}, ""},
		{"twice", []Mirror{
			{Registry: "localhost:5001", Endpoints: []string{"http://a:5000"}, Source: "provider docker"},
			{Registry: "localhost:5001", Endpoints: []string{"http://b:5000"}, Source: "bootstrap.toml [[mirrors]] entry 1"},
		}, []string{"localhost:5001 is mirrored twice, by provider docker and by bootstrap.toml [[mirrors]] entry 1"}, ""},
	} {
		_, err := MirrorFiles(tc.mirrors)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
		if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("%s: the error shows the password: %q", tc.name, err)
		}
	}
}

// Only what an earlier manifest names is removed, and only when it is no
// longer mirrored; a line that is not a registry host is never a path.
func TestStaleComesFromTheRecordOnly(t *testing.T) {
	files, err := MirrorFiles([]Mirror{{Registry: "localhost:5001", Endpoints: []string{"http://r:5000"}, Source: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	got := Stale("docker.io\nlocalhost:5001\n../../etc\n\nquay.io\n", files)
	if strings.Join(got, ",") != "docker.io,quay.io" {
		t.Errorf("stale %q, want docker.io,quay.io", got)
	}
	if got := Stale("", files); len(got) != 0 {
		t.Errorf("no record: stale %q", got)
	}
}

func TestRegistryPatchesAreRefused(t *testing.T) {
	for _, p := range []string{
		"[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"localhost:5001\"]\n  endpoint = [\"http://krops-registry:5000\"]\n",
		"[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r:5000\".tls]\n  insecure_skip_verify = true\n",
		"[plugins.\"io.containerd.cri.v1.images\".registry]\n  config_path = \"/elsewhere\"\n",
	} {
		_, _, err := Render(Input{Name: "mgmt", NodeImage: image, EngineSock: "/var/run/docker.sock", ContainerdPatches: []string{p}})
		if err == nil || !strings.Contains(err.Error(), "RegistryMirrors") {
			t.Errorf("patch %q: %v, want a refusal pointing at RegistryMirrors", p, err)
		}
	}
	c, _, err := Render(Input{Name: "mgmt", NodeImage: image, EngineSock: "/var/run/docker.sock", ContainerdPatches: []string{patch}})
	if err != nil || len(c.ContainerdConfigPatches) != 2 || c.ContainerdConfigPatches[0] != HostsPatch || c.ContainerdConfigPatches[1] != patch {
		t.Errorf("patches %q (%v), want the hosts directory then the provider's", c.ContainerdConfigPatches, err)
	}
}
