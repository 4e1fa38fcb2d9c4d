package kindcfg

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const image = "docker.io/kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5"

// patch is a provider's containerd patch (registry settings are not
// patches: see mirrors.go).
const patch = "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  discard_unpacked_layers = false\n"

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n%s", name, got)
	}
}

// Every cluster's containerd reads registry hosts from HostsDir; a
// provider's patch comes after that.
func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		file    string
		patches []string
		sock    string
	}{
		{"provider-patch.yaml", []string{patch}, "/var/run/docker.sock"},
		{"aws-podman.yaml", nil, "/run/user/1000/podman/podman.sock"},
	} {
		c, raw, err := Render(Input{Name: "mgmt", NodeImage: image, EngineSock: tc.sock, ContainerdPatches: tc.patches, RunID: "local-2026-12-01T10:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, raw)
		back, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if d := Drift(back, c); len(d) != 0 {
			t.Errorf("%s does not read back as itself: %v", tc.file, d)
		}
	}
}

func TestDriftSaysWhatDiffers(t *testing.T) {
	want, _, _ := Render(Input{Name: "mgmt", NodeImage: image, EngineSock: "/var/run/docker.sock", ContainerdPatches: []string{patch}, RunID: "a"})
	sameButRun, _, _ := Render(Input{Name: "mgmt", NodeImage: image, EngineSock: "/var/run/docker.sock", ContainerdPatches: []string{patch}, RunID: "b"})
	if d := Drift(sameButRun, want); len(d) != 0 {
		t.Errorf("another run id is not drift: %v", d)
	}
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"node image", Input{Name: "mgmt", NodeImage: "docker.io/kindest/node:v1.36.4@sha256:0", EngineSock: "/var/run/docker.sock", ContainerdPatches: []string{patch}}, "node image docker.io/kindest/node:v1.36.4@sha256:0, want " + image},
		{"mount", Input{Name: "mgmt", NodeImage: image, EngineSock: "/run/podman/podman.sock", ContainerdPatches: []string{patch}}, "mounts [/run/podman/podman.sock:/var/run/docker.sock], want [/var/run/docker.sock:/var/run/docker.sock]"},
		{"patch", Input{Name: "mgmt", NodeImage: image, EngineSock: "/var/run/docker.sock"}, "containerd patches"},
	}
	for _, tc := range cases {
		have, _, _ := Render(tc.in)
		d := Drift(have, want)
		if len(d) != 1 || !strings.HasPrefix(d[0], tc.want) {
			t.Errorf("%s: drift %q, want one line starting %q", tc.name, d, tc.want)
		}
	}
	two := *want
	two.Nodes = append(append([]v1alpha4.Node{}, want.Nodes...), want.Nodes[0])
	if d := Drift(&two, want); len(d) != 1 || d[0] != "2 nodes, want 1" {
		t.Errorf("node count drift: %v", d)
	}
}

func TestNodeImageFromTheInventory(t *testing.T) {
	raw, err := os.ReadFile("../../../airgap/images.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := NodeImage(raw, "airgap/images.txt")
	if err != nil || !strings.HasPrefix(got, NodeImageRepo+":v1.37.0@sha256:") {
		t.Fatalf("the repository's pinned node image: %q, %v", got, err)
	}
	for _, tc := range []struct{ inv, want string }{
		{"docker.io/library/busybox:1.0@sha256:" + strings.Repeat("a", 64) + "\n", "lists no docker.io/kindest/node image"},
		{"docker.io/kindest/node:v1.37.0 pending\n", "has no digest yet: run `task airgap:pin`"},
		{"docker.io/kindest/node:v1.37.0@sha256:" + strings.Repeat("a", 64) + "\ndocker.io/kindest/node:v1.36.4@sha256:" + strings.Repeat("b", 64) + "\n", "lists 2 docker.io/kindest/node images"},
	} {
		if _, err := NodeImage([]byte(tc.inv), "images.txt"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("inventory %q: err %v, want %q", tc.inv, err, tc.want)
		}
	}
}

func TestRunIDFitsALabel(t *testing.T) {
	if got := labelValue("local-2026-12-01T10:00:00Z"); got != "local-2026-12-01T10_00_00Z" {
		t.Errorf("label value %q", got)
	}
	if got := labelValue(strings.Repeat("x", 80) + "-"); len(got) > 63 {
		t.Errorf("label value of %d characters", len(got))
	}
}
