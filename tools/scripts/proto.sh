#!/usr/bin/env bash
# Regenerates the provider protocol's Go code. Needs protoc (Debian package
# protobuf-compiler); the Go generators come from the module proxy at pinned
# versions. The output is committed; CI checks it matches.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.2
if ! command -v protoc >/dev/null; then
	echo "protoc is missing: apt-get install protobuf-compiler" >&2
	exit 1
fi
bin="${XDG_CACHE_HOME:-$HOME/.cache}/krops/tools/protoc-gen-$PROTOC_GEN_GO-$PROTOC_GEN_GO_GRPC"
if [[ ! -x "$bin/protoc-gen-go-grpc" ]]; then
	GOWORK=off GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO"
	GOWORK=off GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"
fi
cd "$root/plugins/sdk/proto"
out="$root/plugins/sdk/proto/providerv1"
mkdir -p "$out"
PATH="$bin:$PATH" protoc -I . \
	--go_out="$out" --go_opt=paths=source_relative --go_opt=Mkrops/provider/v1/provider.proto=github.com/kropsdev/krops/plugins/sdk/proto/providerv1 \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative --go-grpc_opt=Mkrops/provider/v1/provider.proto=github.com/kropsdev/krops/plugins/sdk/proto/providerv1 \
	krops/provider/v1/provider.proto
mv "$out/krops/provider/v1/"*.go "$out/"
rm -rf "$out/krops"
echo "generated $(ls "$out")"
