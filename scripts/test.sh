#!/usr/bin/env bash
# Installs the dependencies, builds Kiln (Release) and runs every test except the perf ones.
# Works from any directory. The build directory (default: build/ in the repository) is reused,
# so a second run only rebuilds what changed. KILN_BUILD_DIR overrides it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KILN_BUILD_DIR:-$root/build}"

"$root/scripts/bootstrap.sh"

# Includes follow the layer order (docs/layers.md); the build's link checks catch calls.
"$root/scripts/check_layers.sh"

# Configuring again is cheap and incremental; the generator is chosen only for a new build tree.
generator=()
if [[ ! -f "$build/CMakeCache.txt" && -z "${CMAKE_GENERATOR:-}" ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release

cmake --build "$build" -j"$(nproc)"

cd "$build"
ctest --output-on-failure -LE perf -j2 --timeout 600
