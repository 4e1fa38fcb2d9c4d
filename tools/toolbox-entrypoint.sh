#!/bin/sh
# Entry point of the toolbox image: every argument goes to task, run from
# the repository mounted at /workspace. KROPS_TOOLBOX=1 tells the tools they
# run inside (kind network, the mounted engine socket).
set -eu
export KROPS_TOOLBOX=1
cd /workspace
if [ ! -f Taskfile.yml ]; then
	echo "krops toolbox: /workspace has no Taskfile.yml; mount the krops repository there (task toolbox does)" >&2
	exit 2
fi
# --exit-code: a failed command's own code (2 refusal, 3 unknown state) is
# the task's, not task's generic 201.
exec task --exit-code "$@"
