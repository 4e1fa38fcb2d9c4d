#!/usr/bin/env bash
# Runs every test of every module (with the race detector), each benchmark
# once, the tree checks and lint, and prints how long each phase took.
# `-short` runs the unit tests only: no testbin builds, no integration tests.
#
# A cold machine spends most of a run building the testbin programs
# (kube-apiserver, etcd, Flux, the Flux Operator, Cluster API, CAPA). They
# build in the background while every test that does not need them runs; a
# test that needs one before it is built records itself (KROPS_TESTBIN_DEFER,
# see testenv.MissingTestbin) and skips, and the recorded tests run again
# once the builds are done. A test that starts after a build finished finds
# its program through the cache's pointer file and runs at once. On a warm
# machine the builds take no time and nothing is deferred. Under CI=true a
# dependency still missing in that second run fails it.
#
# Lint (go mod tidy -diff, go vet, staticcheck) runs beside all of that at
# the lowest CPU priority, and the run waits for it at the end: on 2 cores
# a cold run is CPU-bound while the builds and the first test pass run, and
# waits on API servers and controllers afterwards, so lint's own CPU (type
# checking every package and dependency twice over) goes into that slack
# instead of before the tests. It compiles with -race, so whatever it needs
# compiled is mostly in the cache already when its turn comes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
short=""
[[ "${1:-}" == "-short" ]] && short="-short"
staticcheck_version="${STATICCHECK_VERSION:-v0.8.2}"

work="$(mktemp -d "${TMPDIR:-/tmp}/krops-test.XXXXXX")"
declare -a phases=()
testbin_pid=""
lint_pid=""
run_start=$SECONDS
# cpu_ticks: busy and total jiffies of every CPU since boot, from /proc/stat,
# so each phase can say how much of the machine it kept busy (a cold run on
# 2 cores is CPU-bound or waiting, and which one decides what to speed up).
cpu_ticks() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat 2>/dev/null || echo "0 0"
}
phase() { # phase <name> <command...>
	local name="$1" start=$SECONDS busy0 total0 busy1 total1 cpu="?"
	shift
	echo "==> $name" >&2
	read -r busy0 total0 < <(cpu_ticks)
	"$@"
	read -r busy1 total1 < <(cpu_ticks)
	((total1 > total0)) && cpu="$((100 * (busy1 - busy0) / (total1 - total0)))"
	phases+=("$(printf '%-58s %5ds  cpu %3s%%' "$name" $((SECONDS - start)) "$cpu")")
}
finish() {
	local rc=$?
	[[ -n "$testbin_pid" ]] && kill -- "-$testbin_pid" 2>/dev/null || true
	[[ -n "$lint_pid" ]] && kill -- "-$lint_pid" 2>/dev/null || true
	echo "--- phase timings (cpu: the share of both cores busy, from /proc/stat) ---" >&2
	for p in "${phases[@]}"; do echo "$p" >&2; done
	[[ -s "$work/lint.time" ]] && printf '%-58s %5ss\n' "(lint, in the background from the start)" "$(cat "$work/lint.time")" >&2
	printf '%-58s %5ds\n' "total" $((SECONDS - run_start)) >&2
	if [[ -s "$work/go-test.log" ]]; then
		echo "--- slowest test packages (wall time of each package's run) ---" >&2
		awk '$1 == "ok" || $1 == "FAIL" { if ($3 ~ /s$/) print $3, $2 }' "$work/go-test.log" | sort -rn | head -12 >&2 || true
	fi
	rm -rf "$work"
	exit "$rc"
}
trap finish EXIT

mapfile -t modules < <(tools/scripts/modules.sh)
# The modules whose packages take minutes go first, so go test starts them
# first and the short ones fill in beside them.
long=(tools/krops-sweep tools/krops-pivot tools/e2e tools/testenv tools/krops-flux-seed plugins/aws)
patterns=()
for m in "${long[@]}"; do patterns+=("./$m/..."); done
for m in "${modules[@]}"; do [[ " ${long[*]} " == *" $m "* ]] || patterns+=("./$m/..."); done

# Formatting needs no build: a slip fails here in a second.
phase "gofmt" tools/scripts/lint.sh "$staticcheck_version" --gofmt-only

if [[ -z "$short" ]]; then
	# Its own process group (setsid), so a failed run stops every build
	# under it, not only the script.
	KROPS_TESTBIN_LOGS="$work/testbin" setsid tools/testbin/all.sh >"$work/testbin.env" 2>"$work/testbin.err" &
	testbin_pid=$!
	echo "==> building the testbin programs in the background (logs in $work/testbin)" >&2
	# task and mise: the chain tests run the same pinned binaries the README uses.
	task_cache="${XDG_CACHE_HOME:-$HOME/.cache}/krops/tools/task-v3.54.0"
	[[ -x "$task_cache/task" ]] && export KROPS_TASK_BIN="${KROPS_TASK_BIN:-$task_cache/task}"
fi

if [[ -z "$short" ]]; then
	# KROPS_LINT_GOFLAGS=-race: vet and staticcheck type-check against the
	# very packages the race-enabled tests compile. setsid: a failed run
	# stops it with everything under it.
	KROPS_LINT_GOFLAGS=-race setsid nice -n 19 bash -c 's=$SECONDS rc=0
		"$1" "$2" || rc=$?
		echo "$((SECONDS - s))" >"$3"
		exit "$rc"' lint tools/scripts/lint.sh "$staticcheck_version" "$work/lint.time" >"$work/lint.log" 2>&1 &
	lint_pid=$!
	echo "==> lint (go mod tidy -diff, go vet, staticcheck) in the background at the lowest CPU priority" >&2
fi

# One go test over the whole workspace: packages of every module build from
# one action graph and run side by side (-p 4: most tests wait on API
# servers and controllers, not on the CPU). The CAPD lock and the
# machine-wide resources the tests share key on this run.
export KROPS_TEST_RUN="test-$$-$(date +%s)"
# -ldflags=-w: no DWARF in the test binaries (stack traces and race reports
# come from the symbol table, not DWARF) halves each link of a ~250 MB race
# binary (krops-sweep's: 19-27 s against 11 s warm), and there are dozens.
# -timeout 45m: a package's timeout is there to catch a hang (every wait in
# the tests has its own bound); krops-sweep's and krops-pivot's packages
# (twenty tests each, every one with its own API servers and controllers,
# under -race) took 28-30 min of wall time in CI beside the other three
# long packages, and one hit 30 min without hanging.
gotest() { # gotest <go test args...>: output kept for the slowest-packages report
	go test -race -ldflags=-w -count=1 -timeout 45m -p 4 "$@" 2>&1 | tee -a "$work/go-test.log"
}

if [[ -n "$short" ]]; then
	phase "unit tests (-race -short), every module" gotest -short "${patterns[@]}"
	phase "krops-validate --skip-schema (mgmt/, workload/, airgap/)" go run ./tools/krops-validate --skip-schema
	phase "krops-airgap check (airgap/zarf.yaml)" go run ./tools/krops-airgap check
	exit 0
fi

# Tests and benchmarks run in two passes. With -bench, go test runs the
# test binaries of all packages one after another (cmd/go serialises every
# run so benchmarks do not disturb each other), which turned the whole test
# phase into a queue of single packages on an idle machine: measured cold
# on 2 cores, 30 minutes at a load average under 1 for most of it. The
# tests run side by side (-p 4) without -bench.
: >"$work/deferred"
export KROPS_TESTBIN_DEFER="$work/deferred"
phase "tests (-race) while testbin builds" gotest "${patterns[@]}"
unset KROPS_TESTBIN_DEFER

wait_testbin() {
	local rc=0
	wait "$testbin_pid" || rc=$?
	testbin_pid=""
	grep '^testbin:' "$work/testbin.err" >&2 || true
	if [[ "$rc" != 0 ]]; then
		cat "$work/testbin.err" >&2
		echo "building the testbin programs failed (exit $rc)" >&2
		return 1
	fi
	while IFS='=' read -r var dir; do
		[[ -n "$var" ]] && export "$var=$dir"
	done <"$work/testbin.env"
}
phase "testbin builds (what was left of them)" wait_testbin

# Each line is a package directory and a top-level test, tab-separated.
# One go test runs them all: -run names every recorded test (a name that
# also exists in another recorded package runs there too, which only adds).
mapfile -t deferred_dirs < <(cut -f1 "$work/deferred" | sort -u | sed "s|^$root/|./|")
mapfile -t deferred_tests < <(cut -f2 -s "$work/deferred" | sort -u)
if ((${#deferred_dirs[@]} > 0 && ${#deferred_tests[@]} == 0)); then
	echo "the deferred tests were recorded without their names: $work/deferred" >&2
	exit 1
fi

# Then each benchmark once (-run '^$': no test twice), in the packages that
# have one, so a broken benchmark fails CI instead of waiting for `task
# bench` (the figures come from there, without -race). tools/e2e's
# benchmark is the whole lifecycle again; its test ran the same chain,
# phases and accounting. A run of -benchtime 1x measures nothing, so it
# goes side by side with the deferred tests, which mostly wait on API
# servers and controllers: each writes its own log, printed when both are
# done.
mapfile -t bench_pkgs < <(grep -rl --include='*_test.go' '^func Benchmark' "${modules[@]}" | xargs -n1 dirname | sort -u | grep -v '^tools/e2e$' | sed 's|^|./|')
deferred_and_benchmarks() {
	local rc_deferred=0 rc_bench=0 pid_deferred="" pid_bench
	if ((${#deferred_dirs[@]} > 0)); then
		local run_re
		run_re="^($(IFS='|'; echo "${deferred_tests[*]}"))\$"
		echo "    ${#deferred_tests[@]} deferred tests in ${#deferred_dirs[@]} packages: ${deferred_tests[*]}" >&2
		go test -race -ldflags=-w -count=1 -timeout 45m -p 4 -run "$run_re" "${deferred_dirs[@]}" >"$work/deferred.log" 2>&1 &
		pid_deferred=$!
	fi
	go test -race -ldflags=-w -count=1 -timeout 30m -p 4 -run '^$' -bench . -benchtime 1x "${bench_pkgs[@]}" >"$work/bench.log" 2>&1 &
	pid_bench=$!
	[[ -z "$pid_deferred" ]] || wait "$pid_deferred" || rc_deferred=$?
	wait "$pid_bench" || rc_bench=$?
	if [[ -n "$pid_deferred" ]]; then
		echo "--- the tests that waited for testbin (-race)" >&2
		tee -a "$work/go-test.log" <"$work/deferred.log"
	fi
	echo "--- benchmarks, each once (-race), ${#bench_pkgs[@]} packages" >&2
	tee -a "$work/go-test.log" <"$work/bench.log"
	((rc_deferred == 0 && rc_bench == 0))
}
phase "deferred tests and benchmarks (-race), side by side" deferred_and_benchmarks

# The declarative trees: kustomize builds, server-side dry run against the
# real API server, and the cross-checks. With -race, like everything above:
# a plain build would compile kustomize, client-go and the rest a second
# time (minutes cold) to save seconds of checking.
phase "krops-validate (mgmt/, workload/, airgap/)" go run -race ./tools/krops-validate
phase "krops-airgap check (airgap/zarf.yaml)" go run -race ./tools/krops-airgap check

wait_lint() {
	local rc=0
	wait "$lint_pid" || rc=$?
	lint_pid=""
	cat "$work/lint.log" >&2
	if [[ "$rc" != 0 ]]; then
		echo "lint failed (exit $rc): the output above says where" >&2
		return 1
	fi
}
phase "lint (what was left of it)" wait_lint

# The CAPA lane only when asked: its compile does not fit the cold CI budget
# (tools/scripts/capa-lane.sh).
if [[ "${KROPS_CAPA:-}" == 1 ]]; then
	phase "the CAPA lane (KROPS_CAPA=1)" tools/scripts/capa-lane.sh
fi

# The real-engine lane only when asked: the cold CI budget cannot carry it
# (docs/testing.md).
if [[ "${KROPS_REAL_ENGINE:-}" == 1 ]]; then
	phase "the real-engine lane (KROPS_REAL_ENGINE=1)" tools/realengine/lane.sh
fi
