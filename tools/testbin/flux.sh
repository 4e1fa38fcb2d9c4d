#!/usr/bin/env bash
# Builds the Flux source-controller and kustomize-controller that tests run as
# real processes against envtest, at the versions tools/testbin/flux/go.mod
# pins, and caches them per version. Built, not downloaded, for the same
# reason as install.sh: only the Go module proxy is reachable.
#
# The last line of output is the directory to use as KROPS_FLUX_BIN.
# Cold: about 8 min on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
export GOWORK=off

version="$(modversion "$here/flux" github.com/fluxcd/source-controller)"
kversion="$(modversion "$here/flux" github.com/fluxcd/kustomize-controller)"
cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/flux-source-$version-kustomize-$kversion"
mkdir -p "$dest"

if [[ ! -x "$dest/source-controller" || ! -x "$dest/kustomize-controller" ]]; then
	echo "building Flux source-controller $version and kustomize-controller $kversion into $dest (about 8 min cold)" >&2
	start=$SECONDS
	tmp="$(mktemp -d "$dest/.build.XXXXXX")"
	# -mod=mod: the controllers' test-only dependencies are not served, so
	# go.sum is completed by the build rather than by go mod tidy.
	(cd "$here/flux" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -gcflags "$controller_gcflags" -ldflags "-s -w" -o "$tmp/" \
		github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)
	mv "$tmp/source-controller" "$tmp/kustomize-controller" "$dest/"
	rmdir "$tmp"
	echo "built the Flux controllers in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds the binaries through this file when KROPS_FLUX_BIN is unset
# (kit/testenv reads it).
printf '%s\n' "$dest" > "$cache_root/KROPS_FLUX_BIN"
echo "$dest"
