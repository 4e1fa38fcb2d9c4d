#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that envtest runs, from the pinned
# versions in tools/testbin/{apiserver,etcd}/go.mod, and caches them per version.
#
# Why a build and not a download: this project's machines reach only the Go
# module proxy, and `go install pkg@version` is refused for both programs
# because their go.mod files carry replace directives. The nested modules here
# are outside go.work so their ~170 dependencies never touch the product.
#
# The last line of output is the directory to use as KUBEBUILDER_ASSETS.
# Cold: about 10 min for kube-apiserver and 1 min for etcd on 2 cores; cached: 0 s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"
# These modules are deliberately outside go.work.
export GOWORK=off

k8s_version="$(modversion "$here/apiserver" k8s.io/kubernetes)"
etcd_version="$(modversion "$here/etcd" go.etcd.io/etcd/server/v3)"
cache_root="${KROPS_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/testbin}"
dest="$cache_root/k8s-$k8s_version-etcd-$etcd_version"
mkdir -p "$dest"

minor="${k8s_version#v1.}"
minor="${minor%%.*}"

if [[ "$("$dest/kube-apiserver" --version 2>/dev/null || true)" != "Kubernetes $k8s_version" ]]; then
	echo "building kube-apiserver $k8s_version into $dest (about 10 min cold)" >&2
	start=$SECONDS
	(cd "$here/apiserver" && CGO_ENABLED=0 go build -trimpath -o "$dest/kube-apiserver.tmp" \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
		k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$dest/kube-apiserver.tmp" "$dest/kube-apiserver"
	echo "built kube-apiserver in $((SECONDS - start)) s" >&2
fi

# The output is read whole: `| grep -q` under pipefail fails whenever grep
# exits before etcd finishes writing (SIGPIPE), and that rebuilt etcd.
if [[ "$("$dest/etcd" --version 2>/dev/null || true)" != *"etcd Version: ${etcd_version#v}"* ]]; then
	echo "building etcd $etcd_version into $dest (about 1 min cold)" >&2
	start=$SECONDS
	(cd "$here/etcd" && CGO_ENABLED=0 go build -trimpath -o "$dest/etcd.tmp" \
		-ldflags "-s -w" go.etcd.io/etcd/server/v3)
	mv "$dest/etcd.tmp" "$dest/etcd"
	echo "built etcd in $((SECONDS - start)) s" >&2
fi

# Plain `go test` finds the binaries through this file when KUBEBUILDER_ASSETS is unset
# (kit/testenv reads it).
printf '%s\n' "$dest" > "$cache_root/KUBEBUILDER_ASSETS"
echo "$dest"
