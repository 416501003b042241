#!/usr/bin/env bash
# Installs every package Kiln needs to build and test, from Debian 12's own archive.
# Idempotent: when everything is installed it changes nothing and does not touch the network.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # gRPC and protobuf (proto/, rpc_server/)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # cost model, tuning log
  libxgboost-dev libsqlite3-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # small libraries for the tools
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  # LLVM 14 and what its CMake package looks for
  llvm-14-dev zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libtinfo-dev
  # benchmark peers; Debian's oneDNN CMake package requires the OpenCL loader and headers
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  # HTTP for the services' /metrics endpoints
  libcpp-httplib-dev
  # ONNX: the protobuf definitions, the backend node tests, and torch/torchvision to export real
  # architectures with a reference output (tests/frontend)
  libonnx-dev libonnx-testdata python3-onnx python3-torch python3-torchvision python3-numpy
  # headless Chromium for the dashboard's end-to-end test (tests/tuner/dashboard_e2e_test.cpp)
  chromium
  # the kiln Python package (python/) and its tests
  pybind11-dev python3-dev python3-pytest
)
# node and npm build kilnd's dashboard (tuner/dashboard/); a node that ships its own npm is kept.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

is_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

missing=()
for pkg in "${packages[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "bootstrap: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "bootstrap: error: missing packages (${missing[*]}) and neither root nor sudo" >&2
  exit 1
fi

"${sudo[@]}" apt-get update

for pkg in "${missing[@]}"; do
  candidate="$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
    echo "bootstrap: error: package '$pkg' is not available from the configured apt sources" >&2
    exit 1
  fi
done

"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"

for pkg in "${missing[@]}"; do
  if ! is_installed "$pkg"; then
    echo "bootstrap: error: package '$pkg' did not install" >&2
    exit 1
  fi
done
echo "bootstrap: done"
