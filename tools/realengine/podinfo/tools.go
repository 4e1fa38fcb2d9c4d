//go:build tools

// Package podinfo only pins Podinfo's module graph (go.mod) for
// tools/realengine/images.sh, which builds both programs its image ships
// (podinfo and podcli, the chart's probes' client); it builds nothing itself.
package podinfo

import (
	_ "github.com/stefanprodan/podinfo/cmd/podcli"
	_ "github.com/stefanprodan/podinfo/cmd/podinfo"
)
