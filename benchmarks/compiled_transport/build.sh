#!/usr/bin/env bash
# Builds server.cc against the system's gRPC C++ (Debian: apt-get install libgrpc++-dev
# protobuf-compiler-grpc pkg-config), from the dex.proto descriptor inside the installed SDK, so
# the messages are exactly the SDK's. Output: benchmarks/compiled_transport/build/server.
# Usage (from the repository root): bash benchmarks/compiled_transport/build.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/build"
for tool in protoc grpc_cpp_plugin pkg-config g++; do
    command -v "$tool" >/dev/null || {
        echo "build.sh: $tool is missing; on Debian: apt-get install libgrpc++-dev" \
            "protobuf-compiler-grpc pkg-config g++" >&2
        exit 1
    }
done
mkdir -p "$out"
uv run --no-sync python - "$out/dex.desc" <<'PY'
import sys
from dex.dexpb import dex_pb2
from google.protobuf import descriptor_pb2

descriptors = descriptor_pb2.FileDescriptorSet()
seen: set[str] = set()


def add(file):  # dependencies first, as protoc expects
    if file.name in seen:
        return
    for dependency in file.dependencies:
        add(dependency)
    seen.add(file.name)
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    descriptors.file.append(proto)


add(dex_pb2.DESCRIPTOR)
with open(sys.argv[1], "wb") as output:
    output.write(descriptors.SerializeToString())
PY
protoc --descriptor_set_in="$out/dex.desc" --cpp_out="$out" --grpc_out="$out" \
    --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" dex.proto
echo "build.sh: compiling (about a minute)" >&2
# shellcheck disable=SC2046
g++ -O2 -std=c++17 -I"$out" "$here/server.cc" "$out/dex.pb.cc" "$out/dex.grpc.pb.cc" \
    -o "$out/server" $(pkg-config --cflags --libs grpc++ protobuf)
echo "$out/server"
