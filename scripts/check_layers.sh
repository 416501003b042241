#!/usr/bin/env bash
# Checks that every #include "..." of Kiln's own headers follows the layer order of
# docs/architecture.md: a folder may include only itself and the folders listed for it below.
# The per-folder CMake targets make most wrong includes a build error; this check also catches a
# header included without its library being linked (a header-only use) and runs in a second.
# Prints each offending line and exits 1 if there is any.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# folder: the folders (path prefixes) its files may include, besides itself.
declare -A allowed=(
  [contracts]=""
  [deploy]="contracts"
  [compiler/ir]="contracts deploy"
  [compiler/arith]="contracts compiler/ir"
  [compiler/pass]="contracts compiler/ir compiler/arith"
  [compiler/te]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/lower"
  [compiler/lower]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te"
  [compiler/interp]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/lower"
  [compiler/codegen/c]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/lower compiler/codegen/common"
  [compiler/codegen/common]="contracts"
  [compiler/codegen/llvm]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/lower compiler/codegen/common"
  [compiler/codegen/cuda]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/lower compiler/codegen/common compiler/codegen/c"
  [compiler/codegen/vta]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te compiler/lower"
  [compiler/autotune]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te compiler/lower"
  [compiler/ops]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te compiler/lower compiler/autotune compiler/codegen/vta"
  [compiler/graph]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te compiler/lower compiler/autotune compiler/ops"
  [compiler/graph/passes]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te compiler/lower compiler/autotune compiler/ops compiler/graph"
  [compiler/driver]="contracts deploy compiler/ir compiler/arith compiler/pass compiler/te compiler/lower compiler/autotune compiler/ops compiler/graph compiler/codegen compiler/interp compiler/driver"
  [compiler/frontend/onnx]="contracts deploy compiler"
  [db]="contracts"
  [cost_model]="contracts deploy compiler"
  [rpc_server]="contracts deploy compiler kiln/v1"
  [tuner]="contracts deploy compiler cost_model db rpc_server kiln/v1"
  [cli]="contracts deploy compiler cost_model db rpc_server tuner kiln/v1"
  [fuzz]="contracts deploy compiler"
)

status=0
for folder in "${!allowed[@]}"; do
  [[ -d "$folder" ]] || continue
  prefixes=("$folder" ${allowed[$folder]})
  # Files directly in this folder's tree, but not in a deeper folder that has rules of its own.
  while IFS= read -r file; do
    owner="$folder"
    for other in "${!allowed[@]}"; do
      if [[ "$other" != "$folder" && "$other" == "$folder"/* && "$file" == "$other"/* ]]; then owner="$other"; fi
    done
    [[ "$owner" == "$folder" ]] || continue
    while IFS= read -r line; do
      header="${line#*\"}"
      header="${header%%\"*}"
      [[ "$header" == */* ]] || continue  # a system-style or same-folder include
      ok=0
      for p in "${prefixes[@]}"; do
        if [[ "$header" == "$p"/* ]]; then ok=1; break; fi
      done
      # Third-party headers named with a folder ("nlohmann/json.hpp", "llvm/...") are not ours.
      case "${header%%/*}" in
        contracts|deploy|compiler|db|cost_model|rpc_server|tuner|cli|kiln) ;;
        *) ok=1 ;;
      esac
      if [[ $ok -eq 0 ]]; then
        echo "layers: $file includes $header, which $folder may not include"
        status=1
      fi
    done < <(grep -h '^#include "' "$file" || true)
  done < <(find "$folder" -type f \( -name '*.h' -o -name '*.cpp' \))
done
if [[ $status -eq 0 ]]; then echo "layers: every include follows the layer order"; fi
exit $status
