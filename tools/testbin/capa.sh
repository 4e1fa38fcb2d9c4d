#!/usr/bin/env bash
# Builds the Cluster API Provider AWS manager that tests run as a real
# process against envtest, with moto behind every AWS endpoint
# (--service-endpoints), at the version tools/testbin/capa/go.mod pins (the
# one mgmt/aws/capi-providers installs), and caches it with the webhook
# configuration it serves (its CRDs are tools/crds's CAPA set).
#
# The last line of output is the directory to use as KROPS_CAPA_BIN.
# Cold: about 8 min on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
export GOWORK=off GOFLAGS=-mod=mod

module=sigs.k8s.io/cluster-api-provider-aws/v2
version="$(modversion "$here/capa" "$module")"
cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/cluster-api-provider-aws-$version"

if [[ ! -x "$dest/capa-manager" || ! -f "$dest/webhooks.yaml" ]]; then
	echo "building the Cluster API Provider AWS manager $version into $dest (about 8 min cold)" >&2
	start=$SECONDS
	mkdir -p "$dest"
	src="$(moddir "$here/capa" "$module")"
	tmp="$(mktemp -d "$dest/.build.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	(cd "$here/capa" && CGO_ENABLED=0 go build -trimpath -gcflags "$controller_gcflags" -ldflags "-s -w" -o "$tmp/capa-manager" "$module")
	copyfile "$src/config/webhook/manifests.yaml" "$tmp/webhooks.yaml"
	mv "$tmp/webhooks.yaml" "$dest/webhooks.yaml"
	mv "$tmp/capa-manager" "$dest/capa-manager"
	echo "built the Cluster API Provider AWS manager in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds it through this file when KROPS_CAPA_BIN is unset
# (testenv.Testbin reads it).
printf '%s\n' "$dest" > "$cache_root/KROPS_CAPA_BIN"
echo "$dest"
