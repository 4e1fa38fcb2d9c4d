#!/usr/bin/env bash
# Prints the directory of every module go.work uses, relative to the root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p' | sed 's|^\./||'
