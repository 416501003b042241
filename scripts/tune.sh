#!/usr/bin/env bash
# Kiln's main job on one machine: installs what it needs (scripts/bootstrap.sh), builds the `kiln`
# command (Release, in build/ or KILN_BUILD_DIR), and tunes a model on this machine with the
# embedded measurer (a tuning log kiln.db in the current directory, no daemon): by default
# ResNet-18 with random weights, exported from torchvision to resnet18.onnx in the current
# directory (by tests/frontend/make_models.py) when it is not there yet. `kiln tune --model` tunes
# the distinct convolutions and dense layers of the optimized graph, then compares the model's
# latency with default and with tuned configs. The budget (KILN_TUNE_TRIALS trials, 2000 unless
# set) finishes in about ten minutes on two cores; arguments are passed on to `kiln tune` (for
# example --model my.onnx --input-shape input=1,3,224,224, --trials 3000, --preset bert-base,
# --resume JOB).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KILN_BUILD_DIR:-$root/build}"

"$root/scripts/bootstrap.sh"

generator=()
if [[ ! -f "$build/CMakeCache.txt" && -z "${CMAKE_GENERATOR:-}" ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target kiln

# Without a model or task list, ResNet-18; without a budget, one that takes about ten minutes.
has_tasks=false
has_trials=false
for arg in "$@"; do
  case "$arg" in
    --model* | --preset* | --template* | --workloads* | --resume*) has_tasks=true ;;
    --trials*) has_trials=true ;;
  esac
done
if ! $has_tasks; then
  if [[ ! -f resnet18.onnx ]]; then
    /usr/bin/python3 "$root/tests/frontend/make_models.py" --onnx resnet18 resnet18.onnx
  fi
  set -- --model resnet18.onnx "$@"
fi
if ! $has_trials && [[ "$*" != *--resume* ]]; then set -- --trials "${KILN_TUNE_TRIALS:-2000}" "$@"; fi
exec "$build/cli/kiln" tune "$@"
