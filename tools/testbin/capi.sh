#!/usr/bin/env bash
# Builds the Cluster API core manager that tests run as a real process
# against envtest, and clusterctl (krops-pivot's benchmark baseline), at the version tools/testbin/capi/go.mod pins, and caches
# it with the webhook configuration it serves.
#
# The last line of output is the directory to use as KROPS_CAPI_BIN.
# Cold: about 5 min on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOWORK=off

version="$(cd "$here/capi" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)"
cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/cluster-api-$version"

if [[ ! -x "$dest/capi-manager" || ! -f "$dest/webhooks.yaml" || ! -x "$dest/clusterctl" ]]; then
	echo "building the Cluster API core manager $version into $dest (about 5 min cold)" >&2
	start=$SECONDS
	mkdir -p "$dest"
	(cd "$here/capi" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dest/capi-manager.tmp" sigs.k8s.io/cluster-api/core)
	# clusterctl from the same module version: krops-pivot's move benchmark
	# runs it beside the library on the same data.
	(cd "$here/capi" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dest/clusterctl.tmp" sigs.k8s.io/cluster-api/cmd/clusterctl)
	mv "$dest/clusterctl.tmp" "$dest/clusterctl"
	dir="$(cd "$here/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
	cp "$dir/core/config/webhook/manifests.yaml" "$dest/webhooks.yaml"
	chmod u+w "$dest/webhooks.yaml"
	mv "$dest/capi-manager.tmp" "$dest/capi-manager"
	echo "built the Cluster API core manager in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds the binaries through this file when KROPS_CAPI_BIN is unset
# (kit/testenv reads it).
printf '%s\n' "$dest" > "$cache_root/KROPS_CAPI_BIN"
echo "$dest"
