#!/usr/bin/env bash
# Builds the binary of every workspace module that has a main package at its
# root into ./bin, stamped with the version. Library modules build too, so a
# compile error anywhere fails the build.
set -euo pipefail
version="${1:-dev}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mkdir -p bin
for mod in $(tools/scripts/modules.sh); do
	(cd "$mod" && go build ./...)
	if [[ "$(cd "$mod" && go list -f '{{.Name}}' . 2>/dev/null)" == main ]]; then
		name="$(basename "$mod")"
		# Provider plugins are named for discovery: krops-provider-<name>.
		[[ "$mod" == plugins/* ]] && name="krops-provider-$name"
		(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$root/bin/$name" .)
		echo "bin/$name $version"
	fi
done
