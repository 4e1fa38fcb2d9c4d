#!/usr/bin/env bash
# Makes a Docker engine answer on this machine for the real-engine lane
# (`task e2e:real`): uses one that already answers, otherwise installs
# Debian's docker.io (when CI is set or KROPS_REAL_ENGINE=1: it changes the
# machine) and starts dockerd, and leaves it running.
#
# THIS MACHINE'S WORKAROUND, not the product's: the VMs these tests run on
# lack CAP_SYS_RESOURCE in their capability bounding set, so runc cannot
# start a `--privileged` container (kind's nodes always are). When the
# bounding set lacks it, dockerd's default runtime becomes a wrapper that
# removes that one capability from each container's and exec's process
# before runc runs (runc-nosysres below). Users' machines have the
# capability and never get the wrapper. See docs/testing.md.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
state="${KROPS_REAL_ENGINE_STATE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/realengine}"
mkdir -p "$state"
cache="$state"
# shellcheck source=lib.sh
. "$here/lib.sh"

answers() { timeout 20 docker info >/dev/null 2>&1; }

# cap_sys_resource_missing: CAP_SYS_RESOURCE is bit 24 of CapBnd.
cap_sys_resource_missing() {
	local bnd
	bnd="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
	(((16#$bnd >> 24 & 1) == 0))
}

if answers; then
	echo "engine: docker answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))" >&2
else
	if ! on "${CI:-}" && ! on "${KROPS_REAL_ENGINE:-}"; then
		echo "engine: no docker engine answers; rerun with KROPS_REAL_ENGINE=1 to install Debian's docker.io and start dockerd (needs root)" >&2
		exit 2
	fi
	if ! command -v dockerd >/dev/null; then
		echo "engine: installing Debian's docker.io" >&2
		# The package must not start a daemon of its own: this script starts
		# it with the options below.
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io jq iptables >"$state/apt.log" 2>&1 ||
			{ tail -20 "$state/apt.log" >&2; exit 1; }
	fi
	args=(--log-level=warn)
	if cap_sys_resource_missing; then
		install -m 0755 "$here/runc-nosysres" "$state/runc-nosysres"
		args+=(--add-runtime "runc-nosysres=$state/runc-nosysres" --default-runtime runc-nosysres)
		echo "engine: this machine lacks CAP_SYS_RESOURCE: dockerd runs privileged containers through $state/runc-nosysres (a test-machine workaround)" >&2
	fi
	echo "engine: starting dockerd (log: $state/dockerd.log)" >&2
	setsid nohup dockerd "${args[@]}" >"$state/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 1 60); do
		answers && break
		sleep 1
	done
	answers || { tail -20 "$state/dockerd.log" >&2; echo "engine: dockerd did not answer within 60 s" >&2; exit 1; }
	echo "engine: dockerd $(docker version --format '{{.Server.Version}}') answers" >&2
fi

# BuildKit, which the toolbox Dockerfile needs (RUN --mount): a Docker CLI
# newer than 23 builds through the buildx plugin only, and Debian's
# docker.io ships none. Built from the module proxy, like every program the
# lane runs, and installed where the CLI looks for plugins.
buildx_version=v0.38.2
if ! docker buildx version >/dev/null 2>&1; then
	if ! on "${CI:-}" && ! on "${KROPS_REAL_ENGINE:-}"; then
		echo "engine: docker has no buildx plugin (BuildKit); rerun with KROPS_REAL_ENGINE=1 to build buildx $buildx_version and install it" >&2
		exit 2
	fi
	bin="$state/bin/buildx-$buildx_version"
	if [[ ! -x "$bin/buildx" ]]; then
		rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
		timed "buildx $buildx_version" env GOWORK=off GOBIN="$bin.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 \
			go install -trimpath -ldflags "-s -w" "github.com/docker/buildx/cmd/buildx@$buildx_version"
		mv "$bin.tmp" "$bin"
	fi
	mkdir -p /usr/local/lib/docker/cli-plugins
	ln -sf "$bin/buildx" /usr/local/lib/docker/cli-plugins/docker-buildx
	echo "engine: docker buildx $buildx_version installed" >&2
fi
