#!/usr/bin/env bash
# Builds STAND-INS for the toolbox Dockerfile's two base images, which
# cannot be pulled on a machine that reaches no image registry, and prints
# the build arguments that select them (the last two lines):
#
#   RUNTIME_IMAGE  docker.io/library/debian:<release>-slim: debootstrap
#                  --variant=minbase of the release the Dockerfile names.
#   GO_IMAGE       docker.io/library/golang:<go>-<release>: that base with
#                  ca-certificates and git, and this machine's Go toolchain
#                  in /usr/local/go; refused unless its version is the one
#                  the Dockerfile names.
#
# Both carry the host's own CA certificates (/usr/local/share/ca-certificates):
# where the network intercepts TLS, as on the machines the lane runs on, the
# build stage's go mod download and the runtime stage's npm install trust
# what the host trusts. THIS MACHINE'S WORKAROUND; a pulled base has none.
#
# `task toolbox:build` runs it with KROPS_TOOLBOX_LOCAL_BASES=1; the
# Dockerfile is the one users build. Cached under
# $XDG_CACHE_HOME/krops/realengine, keyed by release and Go version.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${KROPS_REAL_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/realengine}"
mkdir -p "$cache"
engine="${CONTAINER_ENGINE:-docker}"
# shellcheck source=lib.sh
. "$here/lib.sh"

arg() { # arg <name>: the default of a Dockerfile ARG
	local v
	v="$(sed -n "s/^ARG $1=\(.*\)$/\1/p" "$root/Dockerfile" | head -1)"
	[[ -n "$v" ]] || { echo "toolboxbases: the Dockerfile has no ARG $1" >&2; exit 1; }
	printf '%s\n' "$v"
}
runtime="$(arg RUNTIME_IMAGE)" # docker.io/library/debian:trixie-slim
golang="$(arg GO_IMAGE)"       # docker.io/library/golang:1.26.8-trixie
release="${runtime##*:}"
release="${release%-slim}"
go_want="${golang##*:}"
go_want="${go_want%-"$release"}"
go_have="$(go env GOVERSION)"
if [[ "go$go_want" != "$go_have" ]]; then
	echo "toolboxbases: the Dockerfile builds with Go $go_want ($golang); this machine has $go_have: the stand-in must carry the same version" >&2
	exit 1
fi

# debootstrap <dir> <packages>
bootstrap() {
	command -v debootstrap >/dev/null || {
		on "${CI:-}" || on "${KROPS_REAL_ENGINE:-}" || on "${KROPS_TOOLBOX_LOCAL_BASES:-}" ||
			{ echo "toolboxbases: debootstrap is missing: apt-get install debootstrap" >&2; exit 2; }
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >"$cache/apt-debootstrap.log" 2>&1
	}
	rm -rf "$1"
	debootstrap --variant=minbase ${2:+--include="$2"} "$release" "$1" http://deb.debian.org/debian >"$cache/toolboxbases-debootstrap.log" 2>&1 ||
		{ tail -20 "$cache/toolboxbases-debootstrap.log" >&2; exit 1; }
	if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
		mkdir -p "$1/usr/local/share/ca-certificates"
		cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/"
		[[ ! -x "$1/usr/sbin/update-ca-certificates" ]] || chroot "$1" update-ca-certificates >/dev/null
	fi
	chroot "$1" apt-get clean
	rm -rf "$1/var/lib/apt/lists"/* "$1/var/cache/apt"/*
}

label="built by tools/realengine/toolboxbases.sh from debootstrap $release"
key="$(sha256sum "$0" | cut -c1-12)"
runtime_local="krops.local/toolbox-runtime-base:$release-$key"
go_local="krops.local/toolbox-go-base:$go_want-$release-$key"

runtime_base() {
	local fs="$cache/toolbox-runtime.tmp"
	bootstrap "$fs" ""
	tar -C "$fs" -c . | "$engine" import --change "LABEL krops.dev/stand-in=\"$label, not $runtime\"" --change 'CMD ["bash"]' - "$runtime_local" >/dev/null
	rm -rf "$fs"
}
go_base() {
	local fs="$cache/toolbox-go.tmp"
	bootstrap "$fs" "ca-certificates,git"
	cp -a "$(go env GOROOT)" "$fs/usr/local/go"
	tar -C "$fs" -c . | "$engine" import --change "LABEL krops.dev/stand-in=\"$label and this machine's $go_have, not $golang\"" \
		--change 'ENV PATH=/usr/local/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change "ENV GOTOOLCHAIN=local GOPROXY=$(go env GOPROXY) GOSUMDB=$(go env GOSUMDB)" \
		--change 'CMD ["bash"]' - "$go_local" >/dev/null
	rm -rf "$fs"
}
"$engine" image inspect "$runtime_local" >/dev/null 2>&1 || timed "$runtime_local (stand-in for $runtime)" runtime_base
"$engine" image inspect "$go_local" >/dev/null 2>&1 || timed "$go_local (stand-in for $golang)" go_base
echo "RUNTIME_IMAGE=$runtime_local"
echo "GO_IMAGE=$go_local"
