#!/usr/bin/env bash
# Builds the images the local-host path runs besides the kind node, offline,
# from the Go module proxy, under the names the product runs them by (so
# nothing is pulled: the engine has them), and prints nothing but progress.
#
#   registry:2   the docker plugin's local registry. STAND-IN: built from
#                github.com/distribution/distribution/v3 (the registry:2
#                image on Docker Hub carries distribution 2.8), with the
#                same command, port and storage path.
#   ghcr.io/controlplaneio-fluxcd/flux-operator:<v>
#                the Flux Operator the testbin builds (tools/testbin/
#                flux-operator.sh: the newest version the proxy serves) with
#                its distribution manifests in /data, as its Dockerfile lays
#                it out (distroless nonroot: user 65532, /flux-operator).
#                Its preflight reads /etc/os-release (distroless 12+):
#                the image carries a stand-in of distroless's file.
#                The operator refuses to run outside FIPS mode; upstream
#                builds it with GOFIPS140=latest, the image sets
#                GODEBUG=fips140=on instead.
#   ghcr.io/fluxcd/source-controller:<v>, kustomize-controller:<v>
#                built from their modules at the versions the operator's
#                manifests name for the newest Flux it ships
#                (data/flux-images/<flux>/upstream-alpine.yaml), pinned in
#                tools/realengine/flux/go.mod; user 65534 like upstream's.
#   ghcr.io/fluxcd/helm-controller:<v>, notification-controller:<v>
#                STAND-INS: the proxy serves neither module.
#                helm-controller runs tools/testenv/cmd/
#                krops-standin-helmcontroller, which reconciles HelmReleases
#                with the Helm SDK from source-controller's artifacts;
#                notification-controller runs krops-standin-controller
#                (answers the probes, logs events, reconciles nothing).
#   registry.k8s.io/cluster-api/{cluster-api-controller,
#                kubeadm-bootstrap-controller,kubeadm-control-plane-controller,
#                capd-manager}:<v>
#                the testbin's Cluster API programs (tools/testbin/capi.sh).
#   ghcr.io/stefanprodan/podinfo:<v>
#                Podinfo (the workload tree's application) and podcli, built
#                from the module tools/realengine/podinfo/go.mod pins, laid
#                out as its Dockerfile does. STAND-IN version: the proxy
#                serves Podinfo 6.9.2's commit, the tree pins 6.15.0.
#   kindest/haproxy:<CAPD's default tag>
#                STAND-IN: Debian's haproxy, for CAPD's load balancers.
#   registry.k8s.io/capi-operator/cluster-api-operator:<v>
#                the Cluster API operator's manager at the version
#                bootstrap.toml [charts] capi-operator pins, built from its
#                module (tools/realengine/capioperator/go.mod), laid out as
#                its Dockerfile does (/manager, user 65532).
#   quay.io/jetstack/cert-manager-{controller,webhook,cainjector,
#                startupapicheck}:v<bootstrap.toml [charts] cert-manager>
#                STAND-INS: the proxy serves cert-manager's library module
#                (its chart) but not its programs' modules, so these run
#                tools/testenv/cmd/krops-standin-certmanager, which issues
#                certificates and injects CAs for real (user 65532, as the
#                chart's runAsNonRoot needs a numeric user).
#
# Every image carries a krops.dev/built-by label with this script's hash
# and its version: a warm run with nothing changed builds nothing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=../testbin/lib.sh
. "$root/tools/testbin/lib.sh"
# shellcheck source=lib.sh
. "$here/lib.sh"
export GOWORK=off
cache="${KROPS_REAL_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/krops/realengine}"
mkdir -p "$cache"
distribution_version="${KROPS_REAL_ENGINE_DISTRIBUTION:-v3.1.2}"
# The image's label carries this script's hash: a change here rebuilds it.
script_key="$(sha256sum "$0" | cut -c1-12)"

# current <image> <key>: whether the engine has image, built from key.
current() {
	[[ "$(docker image inspect -f '{{index .Config.Labels "krops.dev/built-by"}}' "$1" 2>/dev/null)" == "$2" ]]
}

# assemble <image> <fs dir> <key> <docker import --change...>: the image from
# a directory, labelled with its key.
assemble() {
	local image="$1" fs="$2" key="$3"
	shift 3
	local changes=()
	for c in "$@" "LABEL krops.dev/built-by=\"$key\""; do changes+=(--change "$c"); done
	# distroless's layout, which upstream's images run on: /tmp is
	# world-writable and the nonroot user (65532) owns /home/nonroot.
	[[ -d "$fs/tmp" ]] && chmod 1777 "$fs/tmp"
	local tarball="$fs.tar"
	tar -C "$fs" --owner=0 --group=0 --exclude=./home/nonroot -cf "$tarball" .
	if [[ -d "$fs/home/nonroot" ]]; then
		tar -C "$fs" --owner=65532 --group=65532 -rf "$tarball" ./home/nonroot
	fi
	docker import "${changes[@]}" "$tarball" "$image" >/dev/null
	rm -f "$tarball"
}

registry_image() {
	local work="$cache/registry.tmp" bin="$cache/bin/registry-$distribution_version"
	if [[ ! -x "$bin/registry" ]]; then
		rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
		GOBIN="$bin.tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
			"github.com/distribution/distribution/v3/cmd/registry@$distribution_version"
		mv "$bin.tmp" "$bin"
	fi
	rm -rf "$work" && mkdir -p "$work/fs/bin" "$work/fs/etc/distribution" "$work/fs/var/lib/registry" "$work/fs/tmp"
	cp "$bin/registry" "$work/fs/bin/registry"
	cat >"$work/fs/etc/distribution/config.yml" <<'YAML'
version: 0.1
log: {fields: {service: registry}}
storage:
  filesystem: {rootdirectory: /var/lib/registry}
  delete: {enabled: true}
http: {addr: ":5000"}
YAML
	assemble registry:2 "$work/fs" "$1" \
		'ENTRYPOINT ["/bin/registry"]' 'CMD ["serve", "/etc/distribution/config.yml"]' 'EXPOSE 5000' 'VOLUME ["/var/lib/registry"]' \
		"LABEL krops.dev/stand-in=\"distribution $distribution_version, not Docker Hub's registry:2\""
	rm -rf "$work"
}
key="registry $distribution_version ($script_key)"
current registry:2 "$key" || timed "registry:2 (distribution $distribution_version)" registry_image "$key"

# The Flux Operator and the Flux it installs.
operator_dir="$("$root/tools/testbin/flux-operator.sh" | tail -1)"
[[ -x "$operator_dir/flux-operator" ]] || { echo "realengine: tools/testbin/flux-operator.sh gave no operator in '$operator_dir'" >&2; exit 1; }
operator_version="$(basename "$operator_dir")"
operator_version="${operator_version#flux-operator-}"
flux_version="$(cd "$operator_dir/data/flux-images" && ls -d v* | sort -V | tail -1)"
[[ -n "$flux_version" ]] || { echo "realengine: no Flux version in $operator_dir/data/flux-images" >&2; exit 1; }
images_file="$operator_dir/data/flux-images/$flux_version/upstream-alpine.yaml"
# pinned <component>: the tag the operator's manifests give it.
pinned() {
	local v
	v="$(awk -v n="ghcr.io/fluxcd/$1" '$2 == "name:" && $3 == n {getline; print $2; exit}' "$images_file")"
	[[ -n "$v" ]] || { echo "realengine: $images_file names no ghcr.io/fluxcd/$1" >&2; return 1; }
	printf '%s\n' "$v"
}

operator_image() {
	local work="$cache/operator.tmp"
	rm -rf "$work" && mkdir -p "$work/fs/tmp" "$work/fs/etc"
	# The operator's preflight reads the container OS and accepts
	# distroless 12 or newer (its entitlement package): this file stands in
	# for the one gcr.io/distroless/static:nonroot carries.
	cat >"$work/fs/etc/os-release" <<'OS'
# STAND-IN for gcr.io/distroless/static's os-release (tools/realengine/images.sh)
PRETTY_NAME="Distroless"
NAME="Debian GNU/Linux"
ID="debian"
VERSION_ID="12"
OS
	cp "$operator_dir/flux-operator" "$work/fs/flux-operator"
	cp -r "$operator_dir/data" "$work/fs/data"
	assemble "ghcr.io/controlplaneio-fluxcd/flux-operator:$operator_version" "$work/fs" "$1" \
		'USER 65532:65532' 'WORKDIR /' 'ENTRYPOINT ["/flux-operator"]' \
		'ENV GODEBUG=fips140=on' \
		"LABEL krops.dev/stand-in=\"the testbin's flux-operator $operator_version; upstream's is built with GOFIPS140=latest, which this ENV stands for\""
	rm -rf "$work"
}
key="flux-operator $operator_version ($script_key)"
current "ghcr.io/controlplaneio-fluxcd/flux-operator:$operator_version" "$key" ||
	timed "flux-operator $operator_version" operator_image "$key"

# controller_image <image> <key> <binary> <stand-in label or ""> <entrypoint args...>
controller_image() {
	local image="$1" key="$2" bin="$3" standin="$4" work="$cache/controller.tmp"
	shift 4
	local changes=('USER 65534:65534')
	local entry="\"/usr/local/bin/$(basename "$bin")\""
	for a in "$@"; do entry+=", \"$a\""; done
	rm -rf "$work" && mkdir -p "$work/fs/usr/local/bin" "$work/fs/tmp" "$work/fs/data"
	cp "$bin" "$work/fs/usr/local/bin/"
	changes+=("ENTRYPOINT [$entry]")
	[[ -z "$standin" ]] || changes+=("LABEL krops.dev/stand-in=\"$standin\"")
	assemble "$image" "$work/fs" "$key" "${changes[@]}"
	rm -rf "$work"
}

flux_dir="$here/flux"
for c in source-controller kustomize-controller; do
	want="$(pinned "$c")"
	have="$(modversion "$flux_dir" "github.com/fluxcd/$c")"
	if [[ "$want" != "$have" ]]; then
		echo "realengine: the Flux Operator $operator_version installs $c $want (Flux $flux_version); tools/realengine/flux/go.mod pins $have: pin $want there" >&2
		exit 1
	fi
	image="ghcr.io/fluxcd/$c:$want"
	key="$c $want ($script_key)"
	current "$image" "$key" && continue
	bin="$cache/bin/flux-$c-$want"
	if [[ ! -x "$bin/$c" ]]; then
		rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
		timed "$c $want (program)" sh -c 'cd "$1" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$2/" "$3"' \
			_ "$flux_dir" "$bin.tmp" "github.com/fluxcd/$c"
		mv "$bin.tmp" "$bin"
	fi
	timed "$image" controller_image "$image" "$key" "$bin/$c" ""
done

# src_key <dir>: a hash of a stand-in's Go sources, so a change to them
# rebuilds its image even when this script is unchanged.
src_key() { cat "$root/$1"/*.go | sha256sum | cut -c1-12; }

# notification-controller: answers probes, logs the events it is sent.
c=notification-controller
want="$(pinned "$c")"
image="ghcr.io/fluxcd/$c:$want"
nc_key="$(src_key tools/testenv/cmd/krops-standin-controller)"
key="stand-in $c $want ($script_key $nc_key)"
if ! current "$image" "$key"; then
	standin="$cache/bin/krops-standin-controller-$nc_key"
	if [[ ! -x "$standin/krops-standin-controller" ]]; then
		rm -rf "$standin.tmp" && mkdir -p "$standin.tmp"
		(cd "$root" && GOWORK= CGO_ENABLED=0 go build -trimpath -o "$standin.tmp/" ./tools/testenv/cmd/krops-standin-controller)
		mv "$standin.tmp" "$standin"
	fi
	timed "$image (stand-in)" controller_image "$image" "$key" "$standin/krops-standin-controller" \
		"krops-standin-controller: answers $c's probes, reconciles nothing" "--stands-in-for=$c"
fi

# helm-controller: reconciles HelmReleases with the Helm SDK from
# source-controller's artifacts (krops-standin-helmcontroller).
c=helm-controller
want="$(pinned "$c")"
image="ghcr.io/fluxcd/$c:$want"
hc_key="$(src_key tools/testenv/cmd/krops-standin-helmcontroller)"
key="stand-in $c $want ($script_key $hc_key)"
if ! current "$image" "$key"; then
	standin="$cache/bin/krops-standin-helmcontroller-$hc_key"
	if [[ ! -x "$standin/krops-standin-helmcontroller" ]]; then
		rm -rf "$standin.tmp" && mkdir -p "$standin.tmp"
		(cd "$root" && timed "krops-standin-helmcontroller (program)" env GOWORK= CGO_ENABLED=0 \
			go build -trimpath -ldflags "-s -w" -o "$standin.tmp/" ./tools/testenv/cmd/krops-standin-helmcontroller)
		mv "$standin.tmp" "$standin"
	fi
	timed "$image (stand-in)" controller_image "$image" "$key" "$standin/krops-standin-helmcontroller" \
		"krops-standin-helmcontroller: reconciles HelmReleases with the Helm SDK; no drift detection, tests or remediation" \
		"--stands-in-for=$c"
fi

# Cluster API v<capi> as the local-host tree runs it: the core, kubeadm
# bootstrap and kubeadm control plane managers and CAPD, the programs the
# testbin builds from one module graph (tools/testbin/capi.sh), laid out as
# upstream's images are (/manager; the core and kubeadm images run as
# 65532, CAPD as root for the engine's socket), under the names the
# providers' release manifests give them.
capi_dir="$("$root/tools/testbin/capi.sh" | tail -1)"
capi_version="$(basename "$capi_dir")"
capi_version="${capi_version#cluster-api-}"
for m in cluster-api-controller:capi-manager:65532 kubeadm-bootstrap-controller:kubeadm-bootstrap-manager:65532 \
	kubeadm-control-plane-controller:kubeadm-control-plane-manager:65532 capd-manager:capd-manager:0; do
	IFS=: read -r name program user <<<"$m"
	[[ -x "$capi_dir/$program" ]] || { echo "realengine: tools/testbin/capi.sh left no $program in $capi_dir" >&2; exit 1; }
	image="registry.k8s.io/cluster-api/$name:$capi_version"
	key="$name $capi_version ($script_key)"
	current "$image" "$key" && continue
	capi_image() {
		local work="$cache/capi.tmp"
		rm -rf "$work" && mkdir -p "$work/fs/tmp"
		cp "$capi_dir/$program" "$work/fs/manager"
		assemble "$image" "$work/fs" "$key" "USER $user:$user" 'WORKDIR /' 'ENTRYPOINT ["/manager"]'
		rm -rf "$work"
	}
	timed "$image" capi_image
done

# chartpin <name>: the version bootstrap.toml [charts] pins for a chart.
chartpin() {
	local v
	v="$(awk -v n="$1" '/^\[/ {sec = $0} sec == "[charts]" && $1 == n && $2 == "=" {gsub(/"/, "", $3); print $3; exit}' "$root/bootstrap.toml")"
	[[ -n "$v" ]] || { echo "realengine: bootstrap.toml [charts] pins no $1" >&2; return 1; }
	printf '%s\n' "$v"
}

# The Cluster API operator, at the chart's version (its chart's appVersion
# is its image tag).
capiop_dir="$here/capioperator"
capiop_version="$(chartpin capi-operator)"
capiop_version="v${capiop_version#v}"
have="$(modversion "$capiop_dir" sigs.k8s.io/cluster-api-operator)"
if [[ "$have" != "$capiop_version" ]]; then
	echo "realengine: bootstrap.toml [charts] capi-operator is $capiop_version; tools/realengine/capioperator/go.mod pins $have: pin $capiop_version there" >&2
	exit 1
fi
image="registry.k8s.io/capi-operator/cluster-api-operator:$capiop_version"
key="cluster-api-operator $capiop_version ($script_key)"
if ! current "$image" "$key"; then
	bin="$cache/bin/cluster-api-operator-$capiop_version"
	if [[ ! -x "$bin/manager" ]]; then
		rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
		timed "cluster-api-operator $capiop_version (program)" sh -c 'cd "$1" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$2/manager" sigs.k8s.io/cluster-api-operator/cmd' \
			_ "$capiop_dir" "$bin.tmp"
		mv "$bin.tmp" "$bin"
	fi
	capiop_image() {
		local work="$cache/capiop.tmp"
		# The operator's clusterctl library writes its configuration under
		# $HOME/.config: distroless's nonroot home, as upstream runs it.
		rm -rf "$work" && mkdir -p "$work/fs/tmp" "$work/fs/home/nonroot"
		cp "$bin/manager" "$work/fs/manager"
		assemble "$image" "$work/fs" "$key" 'USER 65532:65532' 'ENV HOME=/home/nonroot' 'WORKDIR /' 'ENTRYPOINT ["/manager"]'
		rm -rf "$work"
	}
	timed "$image" capiop_image
fi

# cert-manager's four programs, at the chart's version: STAND-INS (above).
cm_version="$(chartpin cert-manager)"
cm_version="v${cm_version#v}"
cm_key="$(src_key tools/testenv/cmd/krops-standin-certmanager)"
cm_standin="$cache/bin/krops-standin-certmanager-$cm_key"
for role in controller webhook cainjector startupapicheck; do
	image="quay.io/jetstack/cert-manager-$role:$cm_version"
	key="stand-in cert-manager-$role $cm_version ($script_key, $cm_key)"
	current "$image" "$key" && continue
	if [[ ! -x "$cm_standin/krops-standin-certmanager" ]]; then
		rm -rf "$cm_standin.tmp" && mkdir -p "$cm_standin.tmp"
		(cd "$root" && GOWORK= CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$cm_standin.tmp/" ./tools/testenv/cmd/krops-standin-certmanager)
		mv "$cm_standin.tmp" "$cm_standin"
	fi
	cm_image() {
		local work="$cache/certmanager.tmp"
		rm -rf "$work" && mkdir -p "$work/fs/usr/local/bin" "$work/fs/tmp"
		cp "$cm_standin/krops-standin-certmanager" "$work/fs/usr/local/bin/"
		assemble "$image" "$work/fs" "$key" 'USER 65532:65532' 'WORKDIR /' \
			"ENTRYPOINT [\"/usr/local/bin/krops-standin-certmanager\", \"--stands-in-for=$role\"]" \
			"LABEL krops.dev/stand-in=\"krops-standin-certmanager: cert-manager's $role (self-signed and CA issuers, CA injection), not quay.io/jetstack's\""
		rm -rf "$work"
	}
	timed "$image (stand-in)" cm_image
done

# CAPD's load balancer: kindest/haproxy at the tag CAPD v<capi> defaults to
# (test/infrastructure/docker/internal/loadbalancer/const.go). STAND-IN:
# Debian's haproxy package on the lane's Debian base, with the layout CAPD
# relies on: haproxy on PATH, the configuration it rewrites at
# /usr/local/etc/haproxy/haproxy.cfg (then signals SIGHUP to the master),
# and a starting configuration that loads with no backend yet.
capd_dir="$(moddir "$root/tools/testbin/capi" sigs.k8s.io/cluster-api/test)"
lb_tag="$(sed -n 's/^[[:space:]]*DefaultImageTag = "\(.*\)"/\1/p' "$capd_dir/infrastructure/docker/internal/loadbalancer/const.go")"
[[ -n "$lb_tag" ]] || { echo "realengine: no DefaultImageTag in CAPD's loadbalancer/const.go under $capd_dir" >&2; exit 1; }
base_tag="$(docker images --format '{{.Repository}}:{{.Tag}}' krops.local/realengine-base | head -1)"
[[ -n "$base_tag" ]] || { echo "realengine: no krops.local/realengine-base image: run tools/realengine/nodeimage.sh first (it builds that Debian base; tools/realengine/lane.sh runs it before this script)" >&2; exit 1; }
lb_image="kindest/haproxy:$lb_tag"
key="haproxy $lb_tag on $base_tag, descriptors $(ulimit -Hn) ($script_key)"
haproxy_image() {
	local work="$cache/haproxy.tmp"
	rm -rf "$work" && mkdir -p "$work"
	cat >"$work/haproxy.cfg" <<'CFG'
# Replaced by CAPD once the cluster's control plane machines exist.
global
  log stdout format raw local0
  maxconn 100000
defaults
  mode tcp
  timeout connect 5s
  timeout client 30m
  timeout server 30m
frontend control-plane
  bind *:6443
  default_backend kube-apiservers
backend kube-apiservers
CFG
	# THIS MACHINE'S WORKAROUND, when it applies: CAPD's configuration asks
	# for maxconn 100000 (about 200k descriptors), which users' engines
	# grant (Docker's unit sets LimitNOFILE=1048576); here dockerd inherits a
	# hard limit of $(ulimit -Hn) it cannot raise without CAP_SYS_RESOURCE.
	# haproxy on PATH is then a wrapper adding a file that turns
	# strict-limits off, so haproxy lowers maxconn instead of exiting.
	local wrap=""
	printf '#!/bin/sh\nexec /usr/sbin/haproxy "$@" -f /usr/local/etc/haproxy/krops-vm-limits.cfg\n' >"$work/haproxy-wrapper"
	printf '# tools/realengine/images.sh: this machine cannot grant haproxy its descriptors\nglobal\n  no strict-limits\n' >"$work/krops-vm-limits.cfg"
	if (($(ulimit -Hn) < 200100)); then
		wrap=$'COPY haproxy-wrapper /usr/local/sbin/haproxy\nCOPY krops-vm-limits.cfg /usr/local/etc/haproxy/krops-vm-limits.cfg\nRUN chmod 755 /usr/local/sbin/haproxy'
	fi
	cat >"$work/Dockerfile" <<DF
FROM $base_tag
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends haproxy && rm -rf /var/lib/apt/lists/*
COPY haproxy.cfg /usr/local/etc/haproxy/haproxy.cfg
$wrap
LABEL krops.dev/workaround-no-strict-limits="$([[ -n "$wrap" ]] && echo true || echo false)"
STOPSIGNAL SIGUSR1
ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
LABEL krops.dev/built-by="$1" krops.dev/stand-in="Debian's haproxy for CAPD's load balancer, not kindest/haproxy"
DF
	DOCKER_BUILDKIT=0 docker build -q -t "$lb_image" "$work" >/dev/null
	rm -rf "$work"
}
current "$lb_image" "$key" || timed "$lb_image (stand-in)" haproxy_image "$key"

# Podinfo, the workload's application (workload/shared/podinfo): its
# program and podcli (the chart's probes run `podcli check http`) built from
# the module tools/realengine/podinfo/go.mod pins, laid out as its
# Dockerfile does (/home/app/podinfo, ./ui, /usr/local/bin/podcli), under
# the tag its chart names. STAND-IN version: see that go.mod.
podinfo_dir="$here/podinfo"
podinfo_module="$(moddir "$podinfo_dir" github.com/stefanprodan/podinfo)"
podinfo_version="$(sed -n 's/^var VERSION = "\(.*\)"$/\1/p' "$podinfo_module/pkg/version/version.go")"
[[ -n "$podinfo_version" ]] || { echo "realengine: no VERSION in $podinfo_module/pkg/version/version.go" >&2; exit 1; }
podinfo_image() {
	local work="$cache/podinfo.tmp" bin="$cache/bin/podinfo-$podinfo_version"
	if [[ ! -x "$bin/podinfo" || ! -x "$bin/podcli" ]]; then
		rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
		(cd "$podinfo_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp/" \
			github.com/stefanprodan/podinfo/cmd/podinfo github.com/stefanprodan/podinfo/cmd/podcli)
		mv "$bin.tmp" "$bin"
	fi
	rm -rf "$work" && mkdir -p "$work/fs/home/app" "$work/fs/usr/local/bin" "$work/fs/tmp" "$work/fs/data"
	cp "$bin/podinfo" "$work/fs/home/app/podinfo"
	cp "$bin/podcli" "$work/fs/usr/local/bin/podcli"
	cp -r "$podinfo_module/ui" "$work/fs/home/app/ui"
	chmod -R a+rX "$work/fs"
	chmod 1777 "$work/fs/tmp" "$work/fs/data"
	assemble "ghcr.io/stefanprodan/podinfo:$podinfo_version" "$work/fs" "$1" \
		'USER 65534:65534' 'WORKDIR /home/app' 'CMD ["./podinfo"]' 'EXPOSE 9898' \
		"LABEL krops.dev/stand-in=\"podinfo $podinfo_version from the module proxy's newest commit; the tree pins chart 6.15.0\""
	rm -rf "$work"
}
key="podinfo $podinfo_version ($script_key)"
current "ghcr.io/stefanprodan/podinfo:$podinfo_version" "$key" ||
	timed "podinfo $podinfo_version" podinfo_image "$key"

# A rebuilt image leaves the one it replaced untagged: remove those (only
# this script's, by its label), so warm runs do not pile up old layers.
docker image prune -f --filter "label=krops.dev/built-by" >/dev/null
