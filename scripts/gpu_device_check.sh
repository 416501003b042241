#!/bin/bash
# The CUDA checks that need a GPU, for a GPU machine that has the NVIDIA driver, CUDA 13's NVRTC,
# g++ and torch but not Debian's LLVM or gRPC (see docs/cuda.md, "Measuring on a GPU").
#
#   scripts/gpu_device_check.sh pack OUT [CONFIGS] [CHECKS]   here, after a build in build/
#   scripts/gpu_device_check.sh run OUT                       there, from the repository root
#
# pack writes into OUT: the PTX of the benchmark shapes (CONFIGS configs each, 32 by default) and
# of the correctness cases (CHECKS configs each, 12 by default) from cuda_kernels_gen; the runner's
# two GPU test programs and the kiln CLI; and the shared libraries they need that such a machine
# lacks, compressed (about 50 MB in all). run unpacks them under /tmp and runs, writing logs to
# OUT/logs (or $OUT where that is set):
#   1. cuda_harness --check on every correctness kernel (each must match its expected output);
#   2. rpc_server_cuda_backend_test and rpc_server_cuda_measure_pool_test on the device;
#   3. cuda_harness timing the benchmark kernels, then torch_baseline.py (cuBLAS, cuDNN);
#   4. kiln tune on dense 1024^3 and a ResNet-18 3x3 convolution for 3 minutes
#      (KILN_GPU_TUNE_BUDGET, e.g. 60s; 0 skips it).
set -euo pipefail

mode=${1:-}
out=${2:-}
if [[ -z "$mode" || -z "$out" ]]; then
  sed -n '2,19p' "$0"
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)

pack() {
  local configs=${1:-32} checks=${2:-12}
  local build="$root/build"
  mkdir -p "$out"
  "$build/bench/cuda/cuda_kernels_gen" "$out/kernels/bench" "cuda -arch=sm_90" --configs "$configs"
  "$build/bench/cuda/cuda_kernels_gen" "$out/kernels/check" "cuda -arch=sm_90" --configs 0 --check "$checks"
  tar cJf "$out/kernels.tar.xz" -C "$out/kernels" bench check
  rm -rf "$out/kernels"
  local staging
  staging=$(mktemp -d)
  mkdir -p "$staging/bin" "$staging/lib"
  cp "$build/cli/kiln" "$build/tests/rpc_server/rpc_server_cuda_backend_test" \
    "$build/tests/rpc_server/rpc_server_cuda_measure_pool_test" "$staging/bin/"
  # Every library the three programs load, except the C and C++ runtimes (the machine's are newer)
  # and NVRTC (the machine's CUDA toolkit has its own).
  for program in "$staging"/bin/*; do
    ldd "$program" | awk '/=> \//{print $3}'
  done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|librt|libdl|ld-linux[^/]*|libnvrtc[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$staging/lib/"; done
  tar cJf "$out/programs.tar.xz" -C "$staging" bin lib
  rm -rf "$staging"
  du -sh "$out"/*
}

run() {
  local logs=${OUT:-$out/logs}
  mkdir -p "$logs" /tmp/kiln-gpu
  tar xJf "$out/kernels.tar.xz" -C /tmp/kiln-gpu
  tar xJf "$out/programs.tar.xz" -C /tmp/kiln-gpu
  local nvrtc
  nvrtc=$(dirname "$(find /usr/local /opt -name 'libnvrtc.so.13*' 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH="/tmp/kiln-gpu/lib:$nvrtc:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv | tee "$logs/gpu.txt"
  g++ -std=c++17 -O2 -o /tmp/kiln-gpu/cuda_harness "$root/bench/cuda/cuda_harness.cpp" -ldl
  local status=0
  echo "== correctness"
  /tmp/kiln-gpu/cuda_harness --check /tmp/kiln-gpu/check >"$logs/check.txt" 2>&1 || status=1
  tail -1 "$logs/check.txt"
  echo "== the runner's GPU tests"
  for t in rpc_server_cuda_backend_test rpc_server_cuda_measure_pool_test; do
    (cd /tmp && timeout 300 "/tmp/kiln-gpu/bin/$t" >"$logs/$t.txt" 2>&1) || status=1
    grep -E '^\[  (PASSED|FAILED) ' "$logs/$t.txt" || true
  done
  echo "== timing"
  timeout 600 /tmp/kiln-gpu/cuda_harness /tmp/kiln-gpu/bench >"$logs/kiln.txt" 2>&1 || status=1
  python3 "$root/bench/cuda/torch_baseline.py" /tmp/kiln-gpu/bench "$logs/kiln.txt" | tee "$logs/torch.txt" | tail -2
  local budget=${KILN_GPU_TUNE_BUDGET:-180s}
  if [[ "$budget" != 0 ]]; then
    echo "== kiln tune"
    cat >/tmp/kiln-gpu/workloads.json <<'JSON'
[{"template": "dense.cuda", "name": "dense_1024",
  "args": {"data": {"shape": [1024, 1024]}, "weight": {"shape": [1024, 1024]}}},
 {"template": "conv2d_nchw.cuda", "name": "conv_c128_hw28_k128_s1",
  "args": {"data": {"shape": [1, 128, 28, 28]}, "kernel": {"shape": [128, 128, 3, 3]}, "padding": 1}}]
JSON
    rm -f /tmp/kiln-gpu/tune.db
    (cd /tmp && /tmp/kiln-gpu/bin/kiln tune --workloads /tmp/kiln-gpu/workloads.json --target "cuda -arch=sm_90" \
      --device-key gpu --db /tmp/kiln-gpu/tune.db --time-budget "$budget" --trials 100000 --batch 32 \
      >"$logs/tune.txt" 2>&1) || status=1
    grep -v '^trial' "$logs/tune.txt" | tail -8
  fi
  return $status
}

case "$mode" in
  pack) pack "${3:-32}" "${4:-12}" ;;
  run) run ;;
  *)
    echo "gpu_device_check.sh: unknown mode '$mode' (pack or run)" >&2
    exit 2
    ;;
esac
