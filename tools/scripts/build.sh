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
# is rewritten only when it really changed. Before any of that, a build
# whose inputs have not changed since the last one is skipped (below).
set -euo pipefail
version="${1:-dev}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
# One set of flags for every package, so the libraries compiled for the
# check are the ones the binaries link (one compile, not two).
export CGO_ENABLED=0
flags=(-trimpath)
ldflags="-s -w -X main.version=$version"
out="$root/.krops/build/$(go env GOOS)-$(go env GOARCH)"

# fingerprint: a hash of everything a build here depends on: the version,
# the toolchain and its settings, and the content of every file of the
# workspace's modules that git does not ignore (sources, embedded files,
# go.mod and go.sum; a deleted file drops out of the hash). Without git (the
# image's build context has no .git) there is none, and the build runs.
fingerprint() {
	git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 1
	{
		printf '%s\n' "$version" "$(go env GOVERSION GOOS GOARCH GOFLAGS GOAMD64 GOARM GOARM64 GOEXPERIMENT CGO_ENABLED)" "${flags[*]}"
		git ls-files -z --cached --others --exclude-standard -- go.work go.work.sum plugins tools | xargs -0 sha256sum 2>/dev/null || true
	} | sha256sum | cut -d' ' -f1
}

# Every task of the chain runs this script first, and each rerun of one:
# with nothing changed since the last build, and bin/ holding exactly what
# it made, no go command runs at all (a go command that finds everything
# cached still loads the workspace and checks every package: seconds of
# CPU per task).
fp="$(fingerprint)" || fp=""
if [[ -n "$fp" && -f "$out/fingerprint" && "$(cat "$out/fingerprint")" == "$fp" && -f "$out/binaries" && -f "$out/bin.stat" ]]; then
	# bin/ as this script left it: each file's inode, size and time (a
	# binary replaced or removed by hand since does not match).
	if [[ "$(cd bin && stat -c '%n %i %s %Y' $(cat "$out/binaries") 2>/dev/null)" == "$(cat "$out/bin.stat")" ]]; then
		while read -r name; do echo "bin/$name $version (unchanged)"; done <"$out/binaries"
		exit 0
	fi
fi
rm -f "$out/fingerprint"

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
# Recorded last, so a build that failed half way is never taken for current.
printf '%s\n' "${names[@]}" >"$out/binaries"
(cd bin && stat -c '%n %i %s %Y' "${names[@]}") >"$out/bin.stat"
[[ -z "$fp" ]] || echo "$fp" >"$out/fingerprint"
