# Helpers the testbin build scripts source. Each one answers from the module
shopt -s inherit_errexit
# proxy or the module cache and fails loudly rather than hand an empty string
# to the caller: an empty directory made `cp` copy from / on a cold cache.

# moddir <module dir> <module path>: the directory of the version <module dir>'s
# go.mod selects, downloading it first when the module cache lacks it.
# `go list -m -f {{.Dir}}` alone prints "" for a module not yet downloaded.
moddir() {
	local version dir
	version="$(modversion "$1" "$2")"
	dir="$(cd "$1" && go mod download -json "$2@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	if [[ -z "$dir" || ! -d "$dir" ]]; then
		echo "testbin: no directory for $2@$version (go mod download in $1 gave '${dir}'); is the module proxy reachable?" >&2
		return 1
	fi
	printf '%s\n' "$dir"
}

# modversion <module dir> <module path>: the version <module dir>'s go.mod selects.
modversion() {
	local v
	v="$(cd "$1" && go list -m -f '{{.Version}}' "$2")"
	if [[ -z "$v" ]]; then
		echo "testbin: $1/go.mod selects no version of $2" >&2
		return 1
	fi
	printf '%s\n' "$v"
}

# copyfile <src> <dest>: cp that names the missing source instead of
# copying nothing.
copyfile() {
	if [[ ! -f "$1" ]]; then
		echo "testbin: $1 does not exist (needed for $2)" >&2
		return 1
	fi
	cp "$1" "$2"
	chmod u+w "$2"
}

# controller_gcflags: the controllers (Flux, the Flux Operator, Cluster API,
# CAPA) are built without optimisation or inlining. Their compile is most of
# a cold test run's CPU on 2 cores, and -N -l takes about a quarter off it
# (etcd, measured cold: 98 s of user CPU optimised against 71 s); the tests
# wait on these controllers' API calls, not on their own CPU. kube-apiserver
# and etcd stay optimised: every integration test leans on them.
controller_gcflags="all=-N -l"
