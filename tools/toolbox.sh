#!/usr/bin/env bash
# Builds the toolbox image and smoke-tests it: tools/toolbox.sh build VERSION,
# tools/toolbox.sh smoke. Both need Docker or Podman; where neither answers
# they say so and exit 2 (nothing was built or checked).
#
# KROPS_TOOLBOX_LOCAL_BASES=1 builds from STAND-IN base images made here
# (tools/realengine/toolboxbases.sh: debootstrap and this machine's Go), for
# machines that reach no image registry; the Dockerfile is the same.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
image="${KROPS_TOOLBOX_IMAGE:-krops-toolbox:dev}"

engine="${CONTAINER_ENGINE:-}"
if [[ -z "$engine" ]]; then
	if docker info >/dev/null 2>&1; then engine=docker
	elif podman info >/dev/null 2>&1; then engine=podman
	fi
fi

case "${1:-}" in
build)
	if [[ -z "$engine" ]]; then
		echo "toolbox: no container engine answers (docker info, podman info): the image cannot be built here" >&2
		exit 2
	fi
	args=(--build-arg "VERSION=${2:-dev}" -t "$image")
	case "${KROPS_TOOLBOX_LOCAL_BASES:-}" in
	"" | 0 | false) ;;
	*)
		while IFS= read -r line; do args+=(--build-arg "$line"); done < <(CONTAINER_ENGINE="$engine" tools/realengine/toolboxbases.sh | tail -2)
		;;
	esac
	# RUN --mount needs BuildKit, which Docker 23+ uses by default.
	DOCKER_BUILDKIT=1 "$engine" build "${args[@]}" .
	;;
smoke)
	if [[ -z "$engine" ]]; then
		echo "toolbox:smoke: no container engine answers here (docker info, podman info); nothing was checked. Run it where Docker or Podman runs." >&2
		exit 2
	fi
	# Inside the image: every krops binary answers --help, every plugin
	# refuses to run without a host (go-plugin's handshake check), and every
	# program a task calls is on PATH.
	"$engine" run --rm --entrypoint sh "$image" -euc '
		for b in /usr/local/bin/krops-*; do
			case "$b" in
			*/krops-provider-*) out="$("$b" 2>&1 || true)"
				case "$out" in *plugin*) ;; *) echo "$b: no handshake refusal: $out" >&2; exit 1 ;; esac ;;
			*/krops-entrypoint) ;;
			*) "$b" --help >/dev/null ;;
			esac
			echo "ok $b"
		done
		for p in task mise docker podman-remote git; do
			command -v "$p" >/dev/null || { echo "missing on PATH: $p" >&2; exit 1; }
			echo "ok $p"
		done
	'
	;;
*)
	echo "usage: tools/toolbox.sh build VERSION | smoke" >&2
	exit 2
	;;
esac
