#!/usr/bin/env bash
# Runs the pinned go-task, installing it first when needed, so a fresh machine
# with only Go can run `tools/task.sh test` (the README's test command).
set -euo pipefail
# renovate: datasource=go depName=github.com/go-task/task/v3
TASK_VERSION=v3.54.0 # keep equal to mise.toml [tools] task
cache="${XDG_CACHE_HOME:-$HOME/.cache}/krops/tools/task-$TASK_VERSION"
if [[ ! -x "$cache/task" ]]; then
	echo "installing task $TASK_VERSION into $cache" >&2
	GOWORK=off GOBIN="$cache" go install "github.com/go-task/task/v3/cmd/task@$TASK_VERSION"
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$cache:$PATH"
# --exit-code: a tool's own exit code (2 refused, 3 unknown state) reaches the caller
# instead of task's generic 201. By its path, so {{.TASK_EXE}} (what `task e2e`
# hands the tests as KROPS_TASK_BIN) is a path and not a bare name.
exec "$cache/task" --exit-code "$@"
