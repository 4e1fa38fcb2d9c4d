// Package fluxbuild builds kustomizations the way Flux's kustomize-controller
// does, so what krops checks before Flux sees a tree is what Flux will build.
package fluxbuild

import (
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomizer returns a kustomizer with Flux's options: files outside a
// kustomization's directory may be loaded (Flux confines a build to its
// source artifact instead), and only built-in plugins run.
func Kustomizer() *krusty.Kustomizer {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustypes.LoadRestrictionsNone
	opts.PluginConfig = kustypes.DisabledPluginConfig()
	return krusty.MakeKustomizer(opts)
}

// Build builds dir on fs with Kustomizer.
func Build(fs filesys.FileSystem, dir string) (resmap.ResMap, error) {
	return Kustomizer().Run(fs, dir)
}
