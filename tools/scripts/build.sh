#!/usr/bin/env bash
# Builds the binary of every workspace module that has a main package at its
# root into ./bin, stamped with the version, and compiles every other package
# of the workspace, so a compile error anywhere fails the build.
#
# A handful of go commands for the whole workspace rather than two per
# module: each go command loads the workspace's module graph again, and a
# warm build is mostly that and relinking binaries that did not change.
# `go install` relinks only a binary whose inputs changed (it compares build
# IDs with the file it installed before), so the binaries are installed into
# .krops/build and copied into bin/ only when they differ: a binary in bin/
# is rewritten only when it really changed.
set -euo pipefail
version="${1:-dev}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
# One set of flags for every package, so the libraries compiled for the
# check are the ones the binaries link (one compile, not two).
export CGO_ENABLED=0
flags=(-trimpath)
ldflags="-s -w -X main.version=$version"

patterns=()
for mod in $(tools/scripts/modules.sh); do patterns+=("./$mod/..."); done
# In a variable first: a failing go list (a syntax error, a missing module)
# must stop the build, which a process substitution would hide.
listing="$(go list "${flags[@]}" -f '{{.Name}} {{.ImportPath}} {{.Dir}}' "${patterns[@]}")"
libs=() tools=() binaries=() names=()
while read -r name path dir; do
	rel="${dir#"$root"/}"
	if [[ "$name" != main ]]; then
		libs+=("$path")
	elif [[ -f "$dir/go.mod" ]]; then
		binaries+=("$path")
		# Provider plugins are named for discovery: krops-provider-<name>.
		if [[ "$rel" == plugins/* ]]; then names+=("krops-provider-$(basename "$rel")"); else names+=("$(basename "$rel")"); fi
	else
		# Main packages below a module's root (test stand-ins, examples):
		# checked, not linked.
		tools+=("$path")
	fi
done <<<"$listing"

go build "${flags[@]}" "${libs[@]}"
[[ ${#tools[@]} -eq 0 ]] || go vet "${flags[@]}" "${tools[@]}"

out="$root/.krops/build/$(go env GOOS)-$(go env GOARCH)"
mkdir -p "$out" bin
if [[ "$(go env GOOS)/$(go env GOARCH)" == "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" ]]; then
	GOBIN="$out" go install "${flags[@]}" -ldflags "$ldflags" "${binaries[@]}"
else
	# go install refuses cross-compiled binaries into GOBIN: build them
	# all into the directory instead (each relinked every time).
	go build "${flags[@]}" -ldflags "$ldflags" -o "$out/" "${binaries[@]}"
fi
for i in "${!binaries[@]}"; do
	built="$out/$(basename "${binaries[$i]}")" dest="bin/${names[$i]}"
	if ! cmp -s "$built" "$dest"; then
		cp "$built" "$dest.new"
		mv -f "$dest.new" "$dest"
	fi
	echo "bin/${names[$i]} $version"
done
