#!/usr/bin/env bash
# Runs every module's tests and prints how long each phase took.
# `-short` runs the unit tests only. Everything the integration tests need is
# built or installed here; under CI=true a missing dependency fails the run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
short=""
[[ "${1:-}" == "-short" ]] && short="-short"

declare -a phases=()
phase() { # phase <name> <command...>
	local name="$1" start=$SECONDS
	shift
	echo "==> $name" >&2
	"$@"
	phases+=("$(printf '%-40s %5ds' "$name" $((SECONDS - start)))")
}
report() {
	echo "--- phase timings ---" >&2
	for p in "${phases[@]}"; do echo "$p" >&2; done
}
trap report EXIT

if [[ -z "$short" ]]; then
	# testbin <variable> <script>: build (or reuse) what the script builds and
	# export the directory it prints last, the one the tests read <variable> for.
	testbin() {
		local dir
		dir="$(tools/testbin/"$2" | tail -1)"
		export "$1=$dir"
	}
	phase "kube-apiserver + etcd (tools/testbin)" testbin KUBEBUILDER_ASSETS install.sh
	phase "Flux controllers (tools/testbin/flux.sh)" testbin KROPS_FLUX_BIN flux.sh
	phase "Flux Operator (tools/testbin/flux-operator.sh)" testbin KROPS_FLUX_OPERATOR_BIN flux-operator.sh
	phase "Cluster API manager (tools/testbin/capi.sh)" testbin KROPS_CAPI_BIN capi.sh
	# task: the test runs the same pinned binary the README uses.
	task_cache="${XDG_CACHE_HOME:-$HOME/.cache}/krops/tools/task-v3.54.0"
	[[ -x "$task_cache/task" ]] && export KROPS_TASK_BIN="${KROPS_TASK_BIN:-$task_cache/task}"
fi

for mod in $(tools/scripts/modules.sh); do
	phase "go test $mod ${short}" bash -c "cd '$mod' && go test -count=1 $short -timeout 30m ./..."
done

# Every benchmark once, so a broken benchmark fails CI instead of waiting
# for the next `task bench` (the figures themselves come from `task bench`).
if [[ -z "$short" ]]; then
	for mod in $(tools/scripts/modules.sh); do
		# tools/e2e's benchmark is the whole lifecycle again (minutes);
		# TestLocalHostLifecycle above ran the same chain, phases and
		# accounting. `task bench` runs it.
		[[ "$mod" == tools/e2e ]] && continue
		phase "benchmarks once: $mod" bash -c "cd '$mod' && out=\$(go test -count=1 -run '^\$' -bench . -benchtime 1x ./... 2>&1) || { echo \"\$out\"; exit 1; }"
	done
fi

# The declarative trees: kustomize builds, server-side dry run against the
# real API server (skipped under -short), and the cross-checks.
if [[ -z "$short" ]]; then
	phase "krops-validate (mgmt/, workload/, airgap/)" go run ./tools/krops-validate
else
	phase "krops-validate --skip-schema (mgmt/, workload/, airgap/)" go run ./tools/krops-validate --skip-schema
fi
phase "krops-airgap check (airgap/zarf.yaml)" go run ./tools/krops-airgap check
