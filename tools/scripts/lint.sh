#!/usr/bin/env bash
# gofmt, go mod tidy -diff, go vet and staticcheck over every workspace
# module. gofmt runs first and alone: it needs no build, so a formatting slip
# fails in a second. vet and staticcheck each run once over the whole
# workspace, sharing one load of the dependency graph instead of one per
# module; the tidy checks, which mostly wait on the module proxy, run side
# by side.
set -euo pipefail
staticcheck_version="${1:-v0.8.2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
mapfile -t modules < <(tools/scripts/modules.sh)
patterns=()
for m in "${modules[@]}"; do patterns+=("./$m/..."); done

unformatted="$(gofmt -l "${modules[@]}")"
if [[ -n "$unformatted" ]]; then
	echo "gofmt: these files need formatting (run gofmt -w):" >&2
	echo "$unformatted" >&2
	exit 1
fi
[[ "${2:-}" == --gofmt-only ]] && exit 0

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
declare -A tidy=()
for m in "${modules[@]}"; do
	(cd "$m" && go mod tidy -diff) >"$logs/${m//\//_}" 2>&1 &
	tidy[$m]=$!
done
failed=0
for m in "${modules[@]}"; do
	if ! wait "${tidy[$m]}"; then
		echo "$m: go.mod/go.sum are not tidy: run go mod tidy there" >&2
		grep -v '^go: downloading' "$logs/${m//\//_}" >&2 || true
		failed=1
	fi
done
[[ "$failed" == 0 ]] || exit 1

# KROPS_LINT_GOFLAGS: task test sets -race, so the packages vet and
# staticcheck compile for their type information are the very ones the
# race-enabled tests link afterwards, instead of a second build of the whole
# dependency graph (measured cold on tools/kit: 254 s for both against 422 s).
lint_goflags="${KROPS_LINT_GOFLAGS:-}"
echo "==> go vet (every module)" >&2
GOFLAGS="$lint_goflags" go vet "${patterns[@]}"
echo "==> staticcheck $staticcheck_version (every module)" >&2
# Built once into the tools cache rather than `go run` per module.
bin="${XDG_CACHE_HOME:-$HOME/.cache}/krops/tools/staticcheck-$staticcheck_version"
if [[ ! -x "$bin/staticcheck" ]]; then
	GOWORK=off GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
GOFLAGS="$lint_goflags" "$bin/staticcheck" "${patterns[@]}"
