// Package kindcfg renders the kind cluster configuration krops creates, with
// kind's own v1alpha4 types, finds the node image pinned in
// airgap/images.txt, and says how a recorded configuration differs from the
// one an environment needs now.
package kindcfg

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/kropsdev/krops/tools/kit/imageinventory"
)

// NodeImageRepo is kind's node image repository.
const NodeImageRepo = "docker.io/kindest/node"

// SocketInNode is where the engine socket is mounted in the node: CAPD's
// controllers reach the engine through it.
const SocketInNode = "/var/run/docker.sock"

// RunLabel is the Kubernetes label on every node naming the krops run that
// created the cluster.
const RunLabel = "krops.io/run"

// Input is what a cluster needs.
type Input struct {
	Name string
	// NodeImage is repo:tag@sha256:<digest>.
	NodeImage string
	// EngineSock is the daemon-side engine socket mounted into the node.
	EngineSock string
	// ContainerdPatches come from the provider's KindConfig (CheckPatches
	// has accepted them).
	ContainerdPatches []string
	RunID             string
}

// Render returns the cluster configuration and its YAML. Its first
// containerd patch points the CRI at HostsDir, where Up writes the
// registry mirrors (MirrorFiles).
func Render(in Input) (*v1alpha4.Cluster, []byte, error) {
	if in.Name == "" || in.NodeImage == "" || in.EngineSock == "" {
		return nil, nil, fmt.Errorf("rendering the kind configuration: name, node image and engine socket are required")
	}
	if err := CheckPatches(in.ContainerdPatches); err != nil {
		return nil, nil, err
	}
	node := v1alpha4.Node{
		Role:        v1alpha4.ControlPlaneRole,
		Image:       in.NodeImage,
		ExtraMounts: []v1alpha4.Mount{{HostPath: in.EngineSock, ContainerPath: SocketInNode}},
	}
	if in.RunID != "" {
		node.Labels = map[string]string{RunLabel: labelValue(in.RunID)}
	}
	c := &v1alpha4.Cluster{
		TypeMeta:                v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:                    in.Name,
		Nodes:                   []v1alpha4.Node{node},
		ContainerdConfigPatches: append([]string{HostsPatch}, in.ContainerdPatches...),
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the kind configuration: %w", err)
	}
	return c, b, nil
}

// labelValue fits a run id into a label value: at most 63 characters of
// [A-Za-z0-9._-], starting and ending alphanumeric.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	out := strings.Trim(string(b), "._-")
	if len(out) > 63 {
		out = strings.Trim(out[:63], "._-")
	}
	return out
}

// Parse reads a configuration Render wrote.
func Parse(b []byte) (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("reading the recorded kind configuration: %w", err)
	}
	return &c, nil
}

// Drift lists how have differs from want in what matters to krops: the
// node image, the mounts, the containerd patches (the hosts directory and
// the provider's) and the number of nodes. The run label is not drift,
// and neither are the mirrors: Up writes them into the nodes every time.
func Drift(have, want *v1alpha4.Cluster) []string {
	var out []string
	if len(have.Nodes) != len(want.Nodes) {
		return []string{fmt.Sprintf("%d nodes, want %d", len(have.Nodes), len(want.Nodes))}
	}
	for i := range want.Nodes {
		h, w := have.Nodes[i], want.Nodes[i]
		if h.Image != w.Image {
			out = append(out, fmt.Sprintf("node image %s, want %s", h.Image, w.Image))
		}
		if hm, wm := mounts(h.ExtraMounts), mounts(w.ExtraMounts); !slices.Equal(hm, wm) {
			out = append(out, fmt.Sprintf("mounts [%s], want [%s]", strings.Join(hm, ", "), strings.Join(wm, ", ")))
		}
	}
	if !slices.Equal(have.ContainerdConfigPatches, want.ContainerdConfigPatches) {
		out = append(out, fmt.Sprintf("containerd patches %q, want %q", have.ContainerdConfigPatches, want.ContainerdConfigPatches))
	}
	return out
}

func mounts(ms []v1alpha4.Mount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.HostPath+":"+m.ContainerPath)
	}
	return out
}

// NodeImage returns the kind node image pinned in an image inventory
// (airgap/images.txt): the one the air-gap package carries is the one that
// runs.
func NodeImage(inventory []byte, source string) (string, error) {
	inv, problems := imageinventory.Parse(inventory)
	if len(problems) > 0 {
		return "", fmt.Errorf("%s: %v", source, problems[0])
	}
	var found []imageinventory.Entry
	for _, e := range inv.Entries() {
		if repo, _, _ := imageinventory.SplitTag(e.Image); repo == NodeImageRepo {
			found = append(found, e)
		}
	}
	switch {
	case len(found) == 0:
		return "", fmt.Errorf("%s lists no %s image: add the node image of sigs.k8s.io/kind v0.33.0, pinned by digest", source, NodeImageRepo)
	case len(found) > 1:
		return "", fmt.Errorf("%s lists %d %s images (lines %d and %d): keep exactly one, the one kind runs", source, len(found), NodeImageRepo, found[0].Line, found[1].Line)
	case found[0].Pinned() == "":
		return "", fmt.Errorf("%s line %d: %s has no digest yet: run `task airgap:pin` on a machine with registry access", source, found[0].Line, found[0].Image)
	}
	return found[0].Pinned(), nil
}
