#!/usr/bin/env bash
# gofmt, go vet and staticcheck over every workspace module and the nested
# tools modules that are outside the workspace.
set -euo pipefail
staticcheck_version="${1:-v0.8.2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
unformatted="$(gofmt -l $(tools/scripts/modules.sh))"
if [[ -n "$unformatted" ]]; then
	echo "gofmt: these files need formatting (run gofmt -w):" >&2
	echo "$unformatted" >&2
	exit 1
fi
for mod in $(tools/scripts/modules.sh); do
	echo "==> go mod tidy -diff, vet, staticcheck: $mod" >&2
	(cd "$mod" && go mod tidy -diff) || { echo "$mod: go.mod/go.sum are not tidy: run go mod tidy there" >&2; exit 1; }
	(cd "$mod" && go vet ./... && go run "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" ./...)
done
