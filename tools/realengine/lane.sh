#!/usr/bin/env bash
# The real-engine lane, one definition for `task e2e:real` and for
# `KROPS_REAL_ENGINE=1 task test` (docs/testing.md): an engine that answers
# (engine.sh), the kind node image (nodeimage.sh; it also makes the Debian
# base that images.sh builds CAPD's load balancer on, so it goes first), the
# images the local-host path runs (images.sh), the toolbox image from the
# repository's Dockerfile on stand-in bases (no registry is reachable) and
# its smoke test, then the tests tagged realengine. Run from the repository
# root. With the argument "lifecycle" (`task e2e:real-lifecycle`) it runs
# the whole local-host lifecycle through task instead of the toolbox and
# the pieces: 20 minutes to an hour on 2 cores, too long to share their
# timeout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tools/realengine/engine.sh
image="$(tools/realengine/nodeimage.sh | tail -1)"
tools/realengine/images.sh
# The lane was asked for: a node image that did not build fails it (no
# skip passes as green).
[[ -n "$image" ]] || { echo "e2e:real: tools/realengine/nodeimage.sh named no image" >&2; exit 1; }
if [[ "${1:-}" == lifecycle ]]; then
	# The lifecycle runs from the checkout, as tools/task.sh does for
	# users; the toolbox image (a quarter of an hour cold) is the pieces'.
	cd tools/e2e
	KROPS_KIND_NODE_IMAGE="$image" exec go test -ldflags=-w -tags realengine -count=1 -timeout 100m -v -run '^TestRealEngineLocalHostLifecycle$' .
fi
KROPS_TOOLBOX_LOCAL_BASES=1 tools/toolbox.sh build dev
tools/toolbox.sh smoke
cd tools/e2e
KROPS_KIND_NODE_IMAGE="$image" go test -race -ldflags=-w -tags realengine -count=1 -timeout 45m -v -run '^TestRealEngine' -skip '^TestRealEngineLocalHostLifecycle$' .
