#!/usr/bin/env bash
# Formats every C and C++ file that git tracks with the repository's .clang-format.
# --check: change nothing, list the files that are not formatted and exit 1 if there are any.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.c' '*.cc')
if [[ "${1:-}" == "--check" ]]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then echo "not formatted: $f"; bad=1; fi
  done
  exit $bad
fi
clang-format -i "${files[@]}"
