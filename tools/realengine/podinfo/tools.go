//go:build tools

// Package podinfo only pins Podinfo's module graph (go.mod) for
// tools/realengine/images.sh; it builds nothing itself.
package podinfo

import _ "github.com/stefanprodan/podinfo/cmd/podinfo"
