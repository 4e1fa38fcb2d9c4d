#!/usr/bin/env bash
# Builds the Cluster API managers that tests run as real processes against
# envtest (core, kubeadm bootstrap, kubeadm control plane, and CAPD, whose
# in-memory backend needs no Docker), and clusterctl (krops-pivot's benchmark
# baseline), all at the version tools/testbin/capi/go.mod pins from its one
# module graph, and caches them with the webhook configuration each serves.
#
# The last line of output is the directory to use as KROPS_CAPI_BIN.
# Cold: about 6 min on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
export GOWORK=off GOFLAGS=-mod=mod

version="$(modversion "$here/capi" sigs.k8s.io/cluster-api)"
cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/cluster-api-$version"

# name:package:webhook manifest (relative to the package's module directory, "" for none)
managers=(
	capi:sigs.k8s.io/cluster-api/core:core/config/webhook/manifests.yaml
	clusterctl:sigs.k8s.io/cluster-api/cmd/clusterctl:
	kubeadm-bootstrap:sigs.k8s.io/cluster-api/bootstrap/kubeadm:bootstrap/kubeadm/config/webhook/manifests.yaml
	kubeadm-control-plane:sigs.k8s.io/cluster-api/controlplane/kubeadm:controlplane/kubeadm/config/webhook/manifests.yaml
	capd:sigs.k8s.io/cluster-api/test/infrastructure/docker:infrastructure/docker/config/webhook/manifests.yaml
)
binary() { [[ "$1" == clusterctl ]] && echo "$dest/clusterctl" || echo "$dest/$1-manager"; }
webhooks() { [[ "$1" == capi ]] && echo "$dest/webhooks.yaml" || echo "$dest/$1-webhooks.yaml"; }

ready() {
	local m name hook
	for m in "${managers[@]}"; do
		name="${m%%:*}"; hook="${m##*:}"
		[[ -x "$(binary "$name")" ]] || return 1
		[[ -z "$hook" || -f "$(webhooks "$name")" ]] || return 1
	done
}

if ! ready; then
	echo "building the Cluster API managers $version (core, kubeadm bootstrap and control plane, CAPD) and clusterctl into $dest (about 6 min cold)" >&2
	start=$SECONDS
	mkdir -p "$dest"
	core_dir="$(moddir "$here/capi" sigs.k8s.io/cluster-api)"
	test_dir="$(moddir "$here/capi" sigs.k8s.io/cluster-api/test)"
	tmp="$(mktemp -d "$dest/.build.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	# One go build per output name: two main packages are both called
	# kubeadm, so -o <dir>/ cannot take them in one invocation. The second and
	# later builds reuse the first's compiled packages from the build cache.
	for m in "${managers[@]}"; do
		name="${m%%:*}"; rest="${m#*:}"; pkg="${rest%%:*}"; hook="${rest#*:}"
		(cd "$here/capi" && CGO_ENABLED=0 go build -trimpath -gcflags "$controller_gcflags" -ldflags "-s -w" -o "$tmp/$name" "$pkg")
		if [[ -n "$hook" ]]; then
			src="$core_dir"
			[[ "$pkg" == sigs.k8s.io/cluster-api/test/* ]] && src="$test_dir"
			copyfile "$src/$hook" "$(webhooks "$name")"
		fi
		mv "$tmp/$name" "$(binary "$name")"
	done
	echo "built the Cluster API managers in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds the binaries through this file when KROPS_CAPI_BIN is unset
# (kit/testenv reads it).
printf '%s\n' "$dest" > "$cache_root/KROPS_CAPI_BIN"
echo "$dest"
