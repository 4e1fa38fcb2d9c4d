#!/usr/bin/env bash
# The CAPA lane: the tests that need Cluster API Provider AWS compiled from
# its module (its manager, and the IAM template renderer in
# tools/capa-iam-template). Both compiles pull in CAPA's whole dependency
# graph (aws-sdk-go v1, goformation, its own Cluster API and Kubernetes
# versions), which on 2 cores costs more than the cold CI budget has room
# for beside everything else; the files carry the build tag capa. Run it
# (task test:capa, or KROPS_CAPA=1 task test) whenever CAPA's pin, the aws
# tree, krops-aws, the aws plugin's sweep or the controller credentials
# change. Expects the testbin programs built (task testbin).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
KROPS_CAPA_BIN="$(tools/testbin/capa.sh | tail -1)"
export KROPS_CAPA_BIN
go test -race -ldflags=-w -tags capa -count=1 -timeout 30m -run '^TestSweepRemovesWhatCAPAMade$' -v ./tools/krops-sweep
go test -tags capa -count=1 -timeout 30m -run '^TestTheTemplateIsCAPAs$' -v ./tools/krops-aws
