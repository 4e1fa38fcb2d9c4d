#!/usr/bin/env bash
# Runs every module's Go benchmarks. Each benchmark measures its own baseline
# in the same run and reports the ratio as a custom metric ending in
# "x_vs_baseline" (higher is better) or "x_of_baseline" (lower is better), so
# the figures mean something on a shared, noisy machine. See README "Benchmarks".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
if [[ -z "${KUBEBUILDER_ASSETS:-}" ]]; then
	KUBEBUILDER_ASSETS="$(tools/testbin/install.sh | tail -1)"
	export KUBEBUILDER_ASSETS
fi
for mod in $(tools/scripts/modules.sh); do
	echo "==> bench $mod" >&2
	out="$(cd "$mod" && go test -run "^$" -bench . -benchtime "${BENCHTIME:-1x}" -count 1 ./... 2>&1)" || { echo "$out"; exit 1; }
	echo "$out" | grep -E "^(Benchmark|ok|---)" || true
done
