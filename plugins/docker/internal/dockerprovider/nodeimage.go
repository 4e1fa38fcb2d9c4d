package dockerprovider

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/kropsdev/krops/plugins/sdk"
)

// The ConfigMap the local-host tree's clusters Kustomization substitutes
// from (mgmt/local-host/clusters/flux-ks.yaml), and the variables in it.
const (
	fluxNamespace     = "flux-system"
	clusterVarsName   = "cluster-vars"
	varNodeImage      = "KROPS_NODE_IMAGE"
	varKubernetes     = "KROPS_KUBERNETES_VERSION"
	varMirrors        = "KROPS_REGISTRY_MIRRORS"
	nodeImageVariable = "KROPS_KIND_NODE_IMAGE"
)

// kubernetesTag is the Kubernetes version a kind node image's tag starts
// with: kindest/node:v1.37.0, or a local build's v1.37.2-<hash>.
var kubernetesTag = regexp.MustCompile(`^(v[0-9]+\.[0-9]+\.[0-9]+)(?:$|[-+_])`)

// kubernetesVersionOf reads the Kubernetes version from a node image
// reference's tag (any registry, any digest).
func kubernetesVersionOf(image string) (string, error) {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	m := kubernetesTag.FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("%w: %s=%q: CAPD's machines run this image too, and their Kubernetes version is read from its tag, "+
			"which must start with it (kindest/node:v1.37.0, registry.example.com/kindest/node:v1.37.0@sha256:...): retag the image",
			sdk.ErrInvalidArgument, nodeImageVariable, image)
	}
	return m[1], nil
}

// clusterVars is what the tree's Clusters need to run and pull as kind's
// node does: flux-system/cluster-vars with the registry mirrors (the local
// registry's and the configuration's, as JSON the ClusterClasses'
// registryMirrors variable takes), and, when the run overrides it, the node
// image and its Kubernetes version (the tree's defaults are kind's pinned
// image). The pivot applies the same to the management cluster, so the
// Clusters it takes over keep their machines' image and mirrors: a change
// there would replace every machine.
func (p *Provider) clusterVars() ([][]byte, []string, error) {
	local := p.localRegistryMirror()
	mirrors := append([]registryMirror{{Registry: local.Registry, Endpoints: local.Endpoints}}, p.s.mirrors...)
	var registries []string
	for _, m := range mirrors {
		registries = append(registries, m.Registry)
	}
	encoded, err := json.Marshal(mirrors)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the registry mirrors for %s/%s: %w", fluxNamespace, clusterVarsName, err)
	}
	data := map[string]any{varMirrors: string(encoded)}
	msgs := []string{fmt.Sprintf("CAPD machines pull %s through their mirrors (%s/%s)", strings.Join(registries, ", "), fluxNamespace, clusterVarsName)}
	if p.s.nodeImage != "" {
		data[varNodeImage], data[varKubernetes] = p.s.nodeImage, p.s.nodeKubernetes
		msgs = append(msgs, fmt.Sprintf("CAPD machines run %s (Kubernetes %s, %s/%s)", p.s.nodeImage, p.s.nodeKubernetes, fluxNamespace, clusterVarsName))
	}
	docs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": fluxNamespace}},
		{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": clusterVarsName, "namespace": fluxNamespace,
				"labels": map[string]any{"app.kubernetes.io/managed-by": "krops"}},
			"data": data},
	}
	out := make([][]byte, 0, len(docs))
	for _, d := range docs {
		b, err := json.Marshal(d) // JSON is YAML: no YAML library for two objects
		if err != nil {
			return nil, nil, fmt.Errorf("encoding %s/%s: %w", fluxNamespace, clusterVarsName, err)
		}
		out = append(out, b)
	}
	return out, msgs, nil
}
