#!/usr/bin/env bash
# Builds (or reuses) every program the integration tests run, all at once:
# kube-apiserver + etcd, the Flux controllers, the Flux Operator and the
# Cluster API managers. They are four separate module graphs, so running
# them side by side overlaps one's module downloads and single-threaded
# links with another's compiles. kube-apiserver is the longest build and
# nearly every deferred test waits for it alone, so the others build at a
# lower priority (nice 5) and yield it the CPU. CAPA's manager is not
# built here: only the CAPA lane runs it (tools/testbin/capa.sh, task
# test:capa).
#
# Each build's output goes to <log dir>/<name>.log (KROPS_TESTBIN_LOGS, else
# a temporary directory); on a failure its tail is printed. The output is
# one VARIABLE=directory line per build, the variables the tests read (the
# cache directory must not hold a newline):
#
#   while IFS='=' read -r var dir; do export "$var=$dir"; done < <(tools/testbin/all.sh)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
logs="${KROPS_TESTBIN_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/krops-testbin.XXXXXX")}"
mkdir -p "$logs"

builds=(
	KUBEBUILDER_ASSETS:install.sh
	KROPS_FLUX_BIN:flux.sh
	KROPS_FLUX_OPERATOR_BIN:flux-operator.sh
	KROPS_CAPI_BIN:capi.sh
)

declare -A pids=()
start=$SECONDS
for b in "${builds[@]}"; do
	var="${b%%:*}"; script="${b#*:}"
	(
		s=$SECONDS
		rc=0
		niceness=5
		[[ "$script" == install.sh ]] && niceness=0
		nice -n "$niceness" "$here/$script" >"$logs/$var.out" 2>"$logs/$var.log" || rc=$?
		# times: the CPU the build's processes used (user, then system,
		# for the subshell and then its children), so a slow cold run
		# says which build to look at.
		times >"$logs/$var.times"
		echo "$rc $((SECONDS - s)) $(tail -1 "$logs/$var.times")" >"$logs/$var.rc"
		exit "$rc"
	) &
	pids[$var]=$!
done

failed=0
for b in "${builds[@]}"; do
	var="${b%%:*}"; script="${b#*:}"
	wait "${pids[$var]}" || true
	read -r rc secs cpu_user cpu_sys <"$logs/$var.rc" || { rc=1; secs=?; }
	dir="$(tail -1 "$logs/$var.out" 2>/dev/null || true)"
	if [[ "$rc" != 0 || -z "$dir" || ! -d "$dir" ]]; then
		echo "testbin: $script failed (exit $rc after ${secs}s); the end of $logs/$var.log:" >&2
		tail -30 "$logs/$var.log" >&2 || true
		failed=1
		continue
	fi
	printf 'testbin: %-24s %5ss  cpu %s user %s sys  %s\n' "$script" "$secs" "${cpu_user:-?}" "${cpu_sys:-?}" "$dir" >&2
	printf '%s=%s\n' "$var" "$dir"
done
echo "testbin: all builds done in $((SECONDS - start)) s (logs in $logs)" >&2
exit "$failed"
