#!/usr/bin/env bash
# Builds the kind node image of the real-engine lane from source, offline,
# the way kind's own images/base/Dockerfile and `kind build node-image`
# assemble kindest/node, and prints its name (the last line of output).
# The lane runs it as KROPS_KIND_NODE_IMAGE.
#
# Versions come from where the product pins them, not from this script:
#   kind                  tools/krops-kind/go.mod (sigs.k8s.io/kind)
#   containerd, runc,     the ARG lines of that kind version's
#   crictl, CNI plugins,  images/base/Dockerfile (the node's own runtime:
#   Debian release        the containerd users' nodes run)
#   Kubernetes            tools/testbin/kindnode/go.mod (k8s.io/kubernetes; the
#                         testbin's API server version)
#   control-plane images  `kubeadm config images list` of that kubeadm
# Every program is built from the Go module proxy (C only for runc's
# nsenter and pause); the Debian base comes from debootstrap. Each piece is
# cached under $XDG_CACHE_HOME/krops/realengine keyed by its version, and
# the image's tag carries a hash of all of them: a warm run builds nothing.
#
# STAND-INS (kindest/node carries the real ones; docs/testing.md):
#   - kindnetd is not on the module proxy: tools/testenv/cmd/
#     krops-standin-kindnetd (a ptp configuration per node and routes to the
#     peers' pod ranges) is preloaded under kindnetd's image name, and kind
#     installs it from default-cni.yaml, made from the local-host tree's
#     kindnetd manifest (the one CAPD clusters get);
#   - the etcd image holds the testbin's etcd under the tag kubeadm names;
#   - no local-path-provisioner: kind falls back to a host-path StorageClass.
# THIS MACHINE'S WORKAROUNDS, applied only when the host needs them and
# recorded in the image's labels: containerd's restrict_oom_score_adj when
# CAP_SYS_RESOURCE is missing (every pod sandbox fails otherwise), and
# kubelet's --fail-cgroupv1=false on a cgroup v1 host.
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
need() { # need <value> <what>: fails loudly on an empty answer
	[[ -n "$1" ]] || { echo "realengine: could not determine $2" >&2; exit 1; }
	printf '%s\n' "$1"
}

kind_version="$(modversion "$root/tools/krops-kind" sigs.k8s.io/kind)"
kind_dir="$(moddir "$root/tools/krops-kind" sigs.k8s.io/kind)"
base_df="$kind_dir/images/base/Dockerfile"
arg() { need "$(sed -n "s/^ARG $1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$base_df" | head -1)" "$1 from $base_df"; }
containerd_version="$(arg CONTAINERD_VERSION)"
runc_version="$(arg RUNC_VERSION)"
crictl_version="$(arg CRICTL_VERSION)"
cni_version="$(arg CNI_PLUGINS_VERSION)"
base_image="$(arg BASE_IMAGE)"  # debian:trixie-slim
release="$(need "$(sed -n 's/^debian:\([a-z]*\).*/\1/p' <<<"$base_image")" "the Debian release of $base_image")"
k8s_version="$(modversion "$root/tools/testbin/kindnode" k8s.io/kubernetes)"
k8s_dir="$(moddir "$root/tools/testbin/kindnode" k8s.io/kubernetes)"
minor="${k8s_version#v1.}"
minor="${minor%%.*}"

oom_workaround=false
(((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status) >> 24 & 1) == 0)) && oom_workaround=true
cgroupv1_workaround=false
[[ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]] && cgroupv1_workaround=true

# The packages kind's base installs, less nfs-common and open-iscsi (storage
# drivers no krops test mounts).
packages=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps

bin="$cache/bin"
mkdir -p "$bin"

# debs <package...>: the build machine's Debian packages, installed when
# missing (a fresh machine has none of them) and only where the lane may
# change the machine, as engine.sh does for the engine.
debs() {
	local missing=()
	for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
	((${#missing[@]} == 0)) && return 0
	on "${CI:-}" || on "${KROPS_REAL_ENGINE:-}" ||
		{ echo "realengine: missing Debian packages ${missing[*]}: apt-get install them, or rerun with KROPS_REAL_ENGINE=1" >&2; exit 2; }
	echo "realengine: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >"$cache/apt.log" 2>&1 ||
		{ tail -20 "$cache/apt.log" >&2; exit 1; }
}

# --- the Debian base (debootstrap) -----------------------------------------
base_tag="krops.local/realengine-base:$release-$(sha256sum <<<"$packages" | cut -c1-12)"
base_tar="$cache/rootfs-${base_tag##*:}.tar"
debootstrap_base() {
	local fs="$cache/rootfs.tmp"
	debs debootstrap
	rm -rf "$fs"
	debootstrap --variant=minbase --include="$packages" "$release" "$fs" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1 ||
		{ tail -20 "$cache/debootstrap.log" >&2; exit 1; }
	chroot "$fs" apt-get clean
	rm -rf "$fs/var/lib/apt/lists"/* "$fs/var/cache/apt"/*
	tar -C "$fs" -cf "$base_tar.tmp" .
	mv "$base_tar.tmp" "$base_tar"
	rm -rf "$fs"
}
[[ -f "$base_tar" ]] || timed "debootstrap $release" debootstrap_base
docker image inspect "$base_tag" >/dev/null 2>&1 || timed "importing $base_tag" sh -c 'docker import - "$1" <"$2" >/dev/null' _ "$base_tag" "$base_tar"

# --- programs built from the module proxy ----------------------------------
gobin() { # gobin <dir> <env...> -- <go install args...>: into $bin/<dir> unless there
	local dir="$bin/$1"
	shift
	[[ -d "$dir" ]] && return 0
	local envs=()
	while [[ "$1" != -- ]]; do envs+=("$1"); shift; done
	shift
	rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
	env GOBIN="$dir.tmp" GOFLAGS=-mod=mod "${envs[@]}" go install -trimpath "$@"
	mv "$dir.tmp" "$dir"
}
[[ -d "$bin/containerd-$containerd_version" ]] || timed "containerd $containerd_version" gobin "containerd-$containerd_version" CGO_ENABLED=1 -- \
	-tags "no_aufs no_zfs no_btrfs no_devmapper" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
	"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
	"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version" \
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version"
# runc's seccomp support is cgo against libseccomp.
[[ -d "$bin/runc-$runc_version" ]] || debs libseccomp-dev pkg-config gcc libc6-dev
[[ -d "$bin/runc-$runc_version" ]] || timed "runc $runc_version" gobin "runc-$runc_version" CGO_ENABLED=1 -- \
	-tags seccomp -ldflags "-s -w -X main.version=${runc_version#v}" "github.com/opencontainers/runc@$runc_version"
[[ -d "$bin/crictl-$crictl_version" ]] || timed "crictl $crictl_version" gobin "crictl-$crictl_version" CGO_ENABLED=0 -- \
	-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$crictl_version" "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
[[ -d "$bin/cni-$cni_version" ]] || timed "CNI plugins $cni_version" gobin "cni-$cni_version" CGO_ENABLED=0 -- -ldflags "-s -w" \
	"github.com/containernetworking/plugins/plugins/ipam/host-local@$cni_version" \
	"github.com/containernetworking/plugins/plugins/main/loopback@$cni_version" \
	"github.com/containernetworking/plugins/plugins/main/ptp@$cni_version" \
	"github.com/containernetworking/plugins/plugins/main/bridge@$cni_version" \
	"github.com/containernetworking/plugins/plugins/meta/portmap@$cni_version"

k8s_bin="$bin/kubernetes-$k8s_version"
build_k8s() {
	rm -rf "$k8s_bin.tmp" && mkdir -p "$k8s_bin.tmp"
	# The same flags as the testbin's kube-apiserver, so they share its
	# compiled packages.
	(cd "$root/tools/testbin/kindnode" && CGO_ENABLED=0 go build -trimpath -o "$k8s_bin.tmp/" \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl)
	gcc -Os -static -DVERSION="$k8s_version" -o "$k8s_bin.tmp/pause" "$k8s_dir/build/pause/linux/pause.c"
	mv "$k8s_bin.tmp" "$k8s_bin"
}
[[ -d "$k8s_bin" ]] || timed "Kubernetes $k8s_version (7 programs) and pause" build_k8s

# What kubeadm pulls, from kubeadm itself: registry.k8s.io/<name>:<tag>.
mapfile -t required < <("$k8s_bin/kubeadm" config images list --kubernetes-version "$k8s_version" 2>/dev/null)
((${#required[@]} >= 6)) || { echo "realengine: kubeadm config images list gave: ${required[*]}" >&2; exit 1; }
image_of() { printf '%s\n' "${required[@]}" | grep "/$1:" | head -1; }
coredns_image="$(need "$(image_of coredns)" "the CoreDNS image kubeadm names")"
coredns_version="v${coredns_image##*:v}"
etcd_image="$(need "$(image_of etcd)" "the etcd image kubeadm names")"
kubeadm_pause="$(need "$(image_of pause)" "the pause image kubeadm names")"
sandbox_pause="$(need "$(sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$kind_dir/images/base/files/etc/containerd/config.toml")" "kind's sandbox_image")"
[[ -d "$bin/coredns-$coredns_version" ]] || timed "CoreDNS $coredns_version" gobin "coredns-$coredns_version" CGO_ENABLED=0 -- -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
etcd_bin="$("$root/tools/testbin/install.sh" | tail -1)/etcd"

# kindnetd: kind preloads it and installs it from default-cni.yaml; the
# tree's ClusterResourceSet runs the same image in CAPD clusters.
kindnetd_image="$(need "$(sed -n 's/^const kindnetdImage = "\(.*\)"$/\1/p' "$kind_dir/pkg/build/nodeimage/const_cni.go")" "kind's kindnetd image")"
kindnet_manifest="$root/mgmt/local-host/addons/cni/kindnet.yaml"
grep -q "image: $kindnetd_image\$" "$kindnet_manifest" ||
	{ echo "realengine: $kindnet_manifest does not run kind $kind_version's $kindnetd_image" >&2; exit 1; }
kindnetd_key="$(cat "$root/tools/testenv/cmd/krops-standin-kindnetd"/*.go "$root/tools/testenv/go.sum" | sha256sum | cut -c1-12)"
kindnetd_bin="$bin/krops-standin-kindnetd-$kindnetd_key"
build_kindnetd() {
	rm -rf "$kindnetd_bin.tmp" && mkdir -p "$kindnetd_bin.tmp"
	(cd "$root/tools/testenv" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$kindnetd_bin.tmp/kindnetd" ./cmd/krops-standin-kindnetd)
	mv "$kindnetd_bin.tmp" "$kindnetd_bin"
}
[[ -x "$kindnetd_bin/kindnetd" ]] || timed "krops-standin-kindnetd (program)" build_kindnetd

# Everything the tag depends on.
key="$(printf '%s\n' "$kind_version" "$containerd_version" "$runc_version" "$crictl_version" "$cni_version" "$k8s_version" \
	"$coredns_version" "$base_tag" "$oom_workaround" "$cgroupv1_workaround" "$("$etcd_bin" --version | head -1)" \
	"$kindnetd_image" "$kindnetd_key" | cat - "$0" "$kindnet_manifest" | sha256sum | cut -c1-12)"
node_tag="krops.local/kind-node:$k8s_version-$key"
if docker image inspect "$node_tag" >/dev/null 2>&1; then
	echo "realengine: $node_tag is built" >&2
	echo "$node_tag"
	exit 0
fi

# --- control-plane images --------------------------------------------------
images_tar="$cache/images-$key.tar"
build_images() {
	local work="$cache/images.tmp" tags=()
	rm -rf "$work" && mkdir -p "$work"
	single() { # single <tag> <binary> [entrypoint]: one static program, as the upstream images are
		local fs="$work/fs" ep="${3:-}"
		rm -rf "$fs" && mkdir -p "$fs/usr/local/bin" "$fs/etc" "$fs/tmp" "$fs/var/run"
		cp "$2" "$fs/usr/local/bin/"
		printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$fs/etc/passwd"
		printf 'root:x:0:\nnogroup:x:65534:\n' >"$fs/etc/group"
		local changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin')
		[[ -n "$ep" ]] && changes+=(--change "ENTRYPOINT [\"$ep\"]")
		tar -C "$fs" -c . | docker import "${changes[@]}" - "$1" >/dev/null
		tags+=("$1")
	}
	single "registry.k8s.io/kube-apiserver:$k8s_version" "$k8s_bin/kube-apiserver"
	single "registry.k8s.io/kube-controller-manager:$k8s_version" "$k8s_bin/kube-controller-manager"
	single "registry.k8s.io/kube-scheduler:$k8s_version" "$k8s_bin/kube-scheduler"
	single "$etcd_image" "$etcd_bin"
	single "$coredns_image" "$bin/coredns-$coredns_version/coredns" /usr/local/bin/coredns
	single "$kubeadm_pause" "$k8s_bin/pause" /usr/local/bin/pause
	single "$kindnetd_image" "$kindnetd_bin/kindnetd" /usr/local/bin/kindnetd
	docker tag "$kubeadm_pause" "$sandbox_pause"
	tags+=("$sandbox_pause")
	# kube-proxy runs iptables: the Debian base plus the program.
	printf 'FROM %s\nCOPY kube-proxy /usr/local/bin/kube-proxy\n' "$base_tag" >"$work/Dockerfile"
	cp "$k8s_bin/kube-proxy" "$work/"
	DOCKER_BUILDKIT=0 docker build -q -t "registry.k8s.io/kube-proxy:$k8s_version" "$work" >/dev/null
	tags+=("registry.k8s.io/kube-proxy:$k8s_version")
	docker save -o "$images_tar.tmp" "${tags[@]}"
	mv "$images_tar.tmp" "$images_tar"
	rm -rf "$work"
}
[[ -f "$images_tar" ]] || timed "control-plane images" build_images

# --- the node ----------------------------------------------------------------
build_node() {
	local c=krops-realengine-nodebuild files="$kind_dir/images/base/files"
	docker rm -f "$c" >/dev/null 2>&1 || true
	docker run -d --name "$c" --entrypoint sleep --security-opt seccomp=unconfined "$base_tag" infinity >/dev/null
	trap 'docker rm -f '"$c"' >/dev/null 2>&1 || true' RETURN
	ex() { docker exec "$c" "$@"; }
	ex mkdir -p /kind/bin /kind/manifests /etc/containerd /etc/default /etc/sysctl.d /etc/systemd/system/kubelet.service.d /opt/cni/bin /etc/cni/net.d /usr/local/sbin /LICENSES
	# kind's base Dockerfile: its files, where its COPY lines put them.
	for f in "$files"/usr/local/bin/*; do docker cp "$f" "$c:/usr/local/bin/"; done
	for f in "$files"/kind/*; do [[ -f "$f" ]] && docker cp "$f" "$c:/kind/"; done
	for f in "$files"/kind/bin/*; do docker cp "$f" "$c:/kind/bin/"; done
	for f in "$files"/etc/*; do [[ -f "$f" ]] && docker cp "$f" "$c:/etc/"; done
	for d in containerd default sysctl.d systemd/system systemd/system/kubelet.service.d; do
		for f in "$files/etc/$d"/*; do [[ -f "$f" ]] && docker cp "$f" "$c:/etc/$d/"; done
	done
	# The programs, where kind's stages and `kind build node-image` put them.
	for p in containerd ctr containerd-shim-runc-v2; do docker cp "$bin/containerd-$containerd_version/$p" "$c:/usr/local/bin/"; done
	docker cp "$bin/runc-$runc_version/runc" "$c:/usr/local/sbin/runc"
	docker cp "$bin/crictl-$crictl_version/crictl" "$c:/usr/local/bin/"
	for p in host-local loopback ptp bridge portmap; do docker cp "$bin/cni-$cni_version/$p" "$c:/opt/cni/bin/"; done
	for p in kubelet kubeadm kubectl; do docker cp "$k8s_bin/$p" "$c:/usr/bin/"; done
	ex sh -ec '
		chmod 755 /kind /kind/bin /kind/bin/* /usr/local/bin/* /usr/local/sbin/runc /opt/cni/bin/* /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl
		find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
		rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* /lib/systemd/system/local-fs.target.wants/* \
			/lib/systemd/system/sockets.target.wants/*udev* /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
		echo ReadKMsg=no >> /etc/systemd/journald.conf
		ln -sf /usr/lib/systemd/systemd /sbin/init
		systemctl enable kubelet.service containerd.service undo-mount-hacks.service
		systemctl mask systemd-binfmt.service
		mkdir -p /etc/kubernetes/manifests
		ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)" > /etc/containerd/cri-base.json
		containerd --version && runc --version | head -1 && kubelet --version'
	printf '%s' "$k8s_version" | docker exec -i "$c" sh -c 'cat > /kind/version'
	# kind templates default-cni.yaml when it says so, with the cluster's pod
	# subnet; the rest is the tree's kindnetd manifest as CAPD clusters get it.
	{
		echo '# would you kindly template this file'
		awk '/name: POD_SUBNET/ {print; getline; sub(/value: .*/, "value: \"{{ .PodSubnet }}\"")} {print}' "$kindnet_manifest"
	} | docker exec -i "$c" sh -c 'cat > /kind/manifests/default-cni.yaml'
	ex grep -q 'value: "{{ .PodSubnet }}"' /kind/manifests/default-cni.yaml ||
		{ echo "realengine: $kindnet_manifest has no POD_SUBNET value to template" >&2; exit 1; }
	if [[ "$oom_workaround" == true ]]; then
		ex sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml
	fi
	if [[ "$cgroupv1_workaround" == true ]]; then
		ex sed -i 's|^KUBELET_EXTRA_ARGS=\(.*\)|KUBELET_EXTRA_ARGS=\1 --fail-cgroupv1=false|' /etc/default/kubelet
	fi
	# The images kubeadm and containerd need, imported as kind imports them.
	ex sh -c 'nohup containerd >/tmp/containerd.log 2>&1 &'
	for _ in $(seq 1 30); do ex ctr version >/dev/null 2>&1 && break; sleep 1; done
	docker exec -i "$c" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - <"$images_tar" >/dev/null
	ex sh -c 'pkill containerd; sleep 1; rm -rf /tmp/* /var/log/*'
	docker commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' --change 'ENV container=docker' "$c" "$node_tag.tmp" >/dev/null
	printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\nLABEL krops.dev/stand-in="built by tools/realengine/nodeimage.sh for the real-engine lane, not kindest/node" krops.dev/workaround-restrict-oom-score-adj="%s" krops.dev/workaround-fail-cgroupv1="%s"\n' \
		"$node_tag.tmp" "$oom_workaround" "$cgroupv1_workaround" | DOCKER_BUILDKIT=0 docker build -q -t "$node_tag" - >/dev/null
	docker rmi "$node_tag.tmp" >/dev/null
}
timed "node image $node_tag" build_node
# The images this one replaces (another key): an old node image is 1.2 GB
# and its control-plane tar 0.7 GB. One a container still runs stays.
for old in $(docker image ls --format '{{.Repository}}:{{.Tag}}' krops.local/kind-node); do
	[[ "$old" == "$node_tag" ]] || docker rmi "$old" >/dev/null 2>&1 || true
done
for old in "$cache"/images-*.tar; do
	[[ "$old" == "$images_tar" ]] || rm -f "$old"
done
echo "$node_tag"
