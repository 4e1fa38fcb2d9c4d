//go:build tools

// Package capioperator only pins the Cluster API operator's module graph
// (go.mod) for tools/realengine/images.sh; it builds nothing itself.
package capioperator

import _ "sigs.k8s.io/cluster-api-operator/cmd"
