# The krops toolbox: every krops binary and provider plugin, and only the
# programs the tasks call (task, mise, the docker CLI, podman-remote, git).
# Build: task toolbox:build. Run a task in it: task toolbox -- <task> ENV=<env>.
#
# Base images are pinned by digest. An image whose digest could not be read
# where this file was last edited carries "# pin: pending" above its ARG;
# `krops-toolbox pins --resolve` (on a machine that reaches the registry)
# writes the digest and drops the marker, and `krops-toolbox pins --release`
# (task toolbox:release-check) fails while any is pending.
#
# No "# syntax=" line: it makes BuildKit pull its Dockerfile frontend from
# Docker Hub on every build (unpinned, and impossible where no registry is
# reachable). What this file uses (RUN --mount, ARG before FROM,
# --platform) is in the frontend built into Docker 23+ and BuildKit.

# pin: pending
ARG GO_IMAGE=docker.io/library/golang:1.26.8-trixie
# pin: pending
ARG RUNTIME_IMAGE=docker.io/library/debian:trixie-slim

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS TARGETARCH
ARG VERSION=dev
WORKDIR /src
# Module downloads first, so source edits reuse the layer.
COPY go.work go.work.sum* ./
COPY plugins/ plugins/
COPY tools/ tools/
RUN --mount=type=cache,target=/root/go/pkg/mod \
    cd tools/kit && go mod download
COPY . .
# The same script `task build` runs: every binary and plugin, version-stamped.
RUN --mount=type=cache,target=/root/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH tools/scripts/build.sh "$VERSION"
# renovate: datasource=go depName=github.com/go-task/task/v3
# task, built from the module proxy at the version mise.toml pins.
ARG TASK_VERSION=v3.54.0
RUN --mount=type=cache,target=/root/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    mkdir /tmp/task && cd /tmp/task && go mod init toolbox/task \
    && go get "github.com/go-task/task/v3/cmd/task@${TASK_VERSION}" \
    && GOOS=$TARGETOS GOARCH=$TARGETARCH CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/task github.com/go-task/task/v3/cmd/task

# mise from npm, the way tools/task.sh installs it. The package's binary is
# native: Node and npm stay in this stage, out of the image (they were
# about 300 MB of it).
FROM ${RUNTIME_IMAGE} AS mise
# renovate: datasource=npm depName=@jdxcode/mise
ARG MISE_VERSION=2026.9.15
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates nodejs npm \
    && npm install --global --no-audit --no-fund "@jdxcode/mise@${MISE_VERSION}" \
    && mkdir /out && cp -L "$(npm root --global)/@jdxcode/mise/bin/mise" /out/mise \
    && /out/mise --version

FROM ${RUNTIME_IMAGE}
# docker-ce-cli would need Docker's apt repository; docker.io's client and
# podman-remote come from Debian.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git docker-cli podman-remote \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*
COPY --from=mise /out/mise /usr/local/bin/mise
COPY --from=build /src/bin/ /usr/local/bin/
COPY --from=build /out/task /usr/local/bin/task
# Plugins are found on PATH too; krops looks in /usr/local/bin last.
ENV AWS_PAGER="" \
    KROPS_PLUGIN_DIR=/usr/local/bin \
    KROPS_TOOLBOX=1 \
    CONTAINER_HOST=unix:///var/run/docker.sock \
    HOME=/root
# /workspace is the repository (bind-mounted); .kube/ lives in it. Any user
# id may run the image: nothing it writes is outside /workspace and /tmp.
RUN mkdir -p /workspace && chmod 1777 /workspace
WORKDIR /workspace
COPY tools/toolbox-entrypoint.sh /usr/local/bin/krops-entrypoint
ENTRYPOINT ["/usr/local/bin/krops-entrypoint"]
CMD ["--list"]
