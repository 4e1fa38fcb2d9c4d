#!/usr/bin/env bash
# Builds the Flux Operator that tests run as a real process against envtest,
# and caches it with the Flux distribution manifests it renders from.
#
# Only v0.59.0 is served by the module proxy here, and building it needs
# three workarounds: Go 1.27 (GOTOOLCHAIN), an older go-containerregistry
# authn/kubernetes (the pinned pseudo-version is not served), and a
# placeholder for the web UI the module zip leaves out (its go:embed would
# fail). The module is copied to a scratch directory for that; nothing in the
# repository or the module cache is changed.
#
# The last line of output is the directory to use as KROPS_FLUX_OPERATOR_BIN.
# Cold: about 6 min on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

# renovate: datasource=github-releases depName=controlplaneio-fluxcd/flux-operator
version=v0.59.0
module=github.com/controlplaneio-fluxcd/flux-operator
authn_kubernetes=github.com/google/go-containerregistry/pkg/authn/kubernetes@v0.0.0-20250225234217-098045d5e61f
export GOWORK=off GOTOOLCHAIN=go1.27.3

cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/flux-operator-$version"

if [[ ! -x "$dest/flux-operator" || ! -d "$dest/data/flux" ]]; then
	echo "building the Flux Operator $version into $dest (about 6 min cold)" >&2
	start=$SECONDS
	mkdir -p "$dest"
	src_dir="$(cd "$(mktemp -d)" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[[ -d "$src_dir" ]] || { echo "go mod download $module@$version gave no directory" >&2; exit 1; }
	work="$(mktemp -d)"
	trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
	cp -r "$src_dir" "$work/src"
	chmod -R u+w "$work/src"
	mkdir -p "$work/src/web/dist"
	echo '<!-- web UI not built: tests do not use it -->' > "$work/src/web/dist/index.html"
	(cd "$work/src" &&
		go mod edit -replace "${authn_kubernetes%@*}=$authn_kubernetes" &&
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -gcflags "$controller_gcflags" -ldflags "-s -w" -o "$dest/flux-operator.tmp" ./cmd/operator)
	rm -rf "$dest/data"
	cp -r "$work/src/config/data" "$dest/data"
	mv "$dest/flux-operator.tmp" "$dest/flux-operator"
	echo "built the Flux Operator in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds the binaries through this file when KROPS_FLUX_OPERATOR_BIN is unset
# (kit/testenv reads it).
printf '%s\n' "$dest" > "$cache_root/KROPS_FLUX_OPERATOR_BIN"
echo "$dest"
