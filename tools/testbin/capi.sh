#!/usr/bin/env bash
# Builds the Cluster API managers that tests run as real processes against
# envtest (core, kubeadm bootstrap, kubeadm control plane, and CAPD, whose
# in-memory backend needs no Docker), and clusterctl (krops-pivot's benchmark
# baseline), all at the version tools/testbin/capi/go.mod pins from its one
# module graph, and caches them with the webhook configuration each serves.
#
# The last line of output is the directory to use as KROPS_CAPI_BIN.
# Cold: about 5 min on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOWORK=off

version="$(cd "$here/capi" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)"
cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/cluster-api-$version"

providers_ready() {
	local b
	for b in kubeadm-bootstrap kubeadm-control-plane capd; do
		[[ -x "$dest/$b-manager" && -f "$dest/$b-webhooks.yaml" ]] || return 1
	done
}

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

# The providers the end-to-end tests add (kubeadm bootstrap and control
# plane, CAPD with its in-memory backend): one more build of the same graph.
if ! providers_ready; then
	echo "building the Cluster API kubeadm and CAPD managers $version into $dest (about 5 min cold)" >&2
	start=$SECONDS
	dir="$(cd "$here/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
	testdir="$(cd "$here/capi" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api/test)"
	for spec in kubeadm-bootstrap:sigs.k8s.io/cluster-api/bootstrap/kubeadm:"$dir/bootstrap/kubeadm" \
		kubeadm-control-plane:sigs.k8s.io/cluster-api/controlplane/kubeadm:"$dir/controlplane/kubeadm" \
		capd:sigs.k8s.io/cluster-api/test/infrastructure/docker:"$testdir/infrastructure/docker"; do
		name="${spec%%:*}"; rest="${spec#*:}"; pkg="${rest%%:*}"; src="${rest#*:}"
		(cd "$here/capi" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dest/$name-manager.tmp" "$pkg")
		cp "$src/config/webhook/manifests.yaml" "$dest/$name-webhooks.yaml"
		chmod u+w "$dest/$name-webhooks.yaml"
		mv "$dest/$name-manager.tmp" "$dest/$name-manager"
	done
	echo "built the kubeadm and CAPD managers in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds the binaries through this file when KROPS_CAPI_BIN is unset
# (kit/testenv reads it).
printf '%s\n' "$dest" > "$cache_root/KROPS_CAPI_BIN"
echo "$dest"
