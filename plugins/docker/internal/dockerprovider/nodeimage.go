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

// clusterVars is what the tree's Clusters need to run the node image kind
// runs: flux-system/cluster-vars with the image and its Kubernetes version,
// and the namespace it lives in. Without an override it is nothing: the
// tree's defaults are kind's pinned image.
func (p *Provider) clusterVars() ([][]byte, []string, error) {
	if p.s.nodeImage == "" {
		return nil, nil, nil
	}
	docs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": fluxNamespace}},
		{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": clusterVarsName, "namespace": fluxNamespace,
				"labels": map[string]any{"app.kubernetes.io/managed-by": "krops"}},
			"data": map[string]any{varNodeImage: p.s.nodeImage, varKubernetes: p.s.nodeKubernetes}},
	}
	out := make([][]byte, 0, len(docs))
	for _, d := range docs {
		b, err := json.Marshal(d) // JSON is YAML: no YAML library for two objects
		if err != nil {
			return nil, nil, fmt.Errorf("encoding %s/%s: %w", fluxNamespace, clusterVarsName, err)
		}
		out = append(out, b)
	}
	msg := fmt.Sprintf("CAPD machines run %s (Kubernetes %s, %s/%s)", p.s.nodeImage, p.s.nodeKubernetes, fluxNamespace, clusterVarsName)
	return out, []string{msg}, nil
}
