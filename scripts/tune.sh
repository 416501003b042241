#!/usr/bin/env bash
# Kiln's main job on one machine: installs what it needs (scripts/bootstrap.sh), builds the `kiln`
# command (Release, in build/ or KILN_BUILD_DIR), and tunes ResNet-18's operators on this machine
# with the embedded measurer (a tuning log kiln.db in the current directory, no daemon). The
# budget finishes in about ten minutes on two cores; arguments are passed on to `kiln tune`
# (for example --trials 3000, --preset bert-base, --resume JOB).
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

# Without a task list, the ResNet-18 preset; without a budget, one that takes about ten minutes.
has_tasks=false
has_trials=false
for arg in "$@"; do
  case "$arg" in
    --preset* | --template* | --workloads* | --resume*) has_tasks=true ;;
    --trials*) has_trials=true ;;
  esac
done
if ! $has_tasks; then set -- --preset resnet18 "$@"; fi
if ! $has_trials && [[ "$*" != *--resume* ]]; then set -- --trials "${KILN_TUNE_TRIALS:-2400}" "$@"; fi
exec "$build/cli/kiln" tune "$@"
