#!/usr/bin/env bash
# Builds the images the local-host path runs besides the kind node, offline,
# from the Go module proxy, under the names the product runs them by (so
# nothing is pulled: the engine has them), and prints nothing but progress.
#
#   registry:2   the docker plugin's local registry. STAND-IN: built from
#                github.com/distribution/distribution/v3 (the registry:2
#                image on Docker Hub carries distribution 2.8), with the
#                same command, port and storage path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOWORK=off
cache="${KROPS_REAL_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/realengine}"
mkdir -p "$cache"
distribution_version="${KROPS_REAL_ENGINE_DISTRIBUTION:-v3.1.2}"
# The image's label carries this script's hash: a change here rebuilds it.
script_key="$(sha256sum "$0" | cut -c1-12)"

registry_image() {
	local work="$cache/registry.tmp" bin="$cache/bin/registry-$distribution_version"
	if [[ ! -x "$bin/registry" ]]; then
		rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
		GOBIN="$bin.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
			"github.com/distribution/distribution/v3/cmd/registry@$distribution_version"
		mv "$bin.tmp" "$bin"
	fi
	rm -rf "$work" && mkdir -p "$work/fs/bin" "$work/fs/etc/distribution" "$work/fs/var/lib/registry" "$work/fs/tmp"
	cp "$bin/registry" "$work/fs/bin/registry"
	cat >"$work/fs/etc/distribution/config.yml" <<'YAML'
version: 0.1
log: {fields: {service: registry}}
storage:
  filesystem: {rootdirectory: /var/lib/registry}
  delete: {enabled: true}
http: {addr: ":5000"}
YAML
	tar -C "$work/fs" -c . | docker import \
		--change 'ENTRYPOINT ["/bin/registry"]' --change 'CMD ["serve", "/etc/distribution/config.yml"]' \
		--change 'EXPOSE 5000' --change 'VOLUME ["/var/lib/registry"]' \
		--change "LABEL krops.dev/stand-in=\"distribution $distribution_version built by tools/realengine/images.sh ($script_key), not Docker Hub's registry:2\"" \
		- registry:2 >/dev/null
	rm -rf "$work"
}
if [[ "$(docker image inspect -f '{{index .Config.Labels "krops.dev/stand-in"}}' registry:2 2>/dev/null)" != *"distribution $distribution_version built by tools/realengine/images.sh ($script_key)"* ]]; then
	start=$SECONDS
	echo "realengine: building registry:2 from distribution $distribution_version" >&2
	registry_image
	printf '%s %-40s %5ds\n' "$(date -u +%FT%TZ)" "registry:2 (distribution $distribution_version)" $((SECONDS - start)) | tee -a "$cache/timings.log" >&2
fi
