#!/usr/bin/env bash
# Installs ONNX Runtime's CPU package for bench/model into DIR (default: build/bench/model/ort).
# --ignore-scripts: the package's install script fetches GPU libraries from elsewhere; the CPU
# provider is already in the package.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${1:-$root/build/bench/model/ort}"
mkdir -p "$dir"
cd "$dir"
[[ -f package.json ]] || echo '{"private": true}' > package.json
npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1 >/dev/null
echo "onnxruntime-node installed in $dir"
