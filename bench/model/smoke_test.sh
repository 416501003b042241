#!/usr/bin/env bash
# Smoke test of model_bench (not a timing): on the BERT-style encoder with an empty tuning log, one
# line with the untuned and tuned columns, no tuned kernel, compile time and a planned peak within
# the tensors' sum; a missing log is a clear error; --per-op gives a row per kernel. ONNX Runtime is
# left out (a directory without it), so its ratios are 0 and its call overhead -1.
# Usage: smoke_test.sh MODEL_BENCH KILN MAKE_MODELS_PY MODELS_DIR
set -euo pipefail
bench="$1" kiln="$2" make_models="$3" models="$4"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ -f "$models/bert_encoder/model.onnx" ]] || /usr/bin/python3 "$make_models" "$models" bert_encoder >/dev/null ||
  { echo "make_models.py could not export bert_encoder: skipped"; exit 0; }

if "$bench" --models "$models" --names bert_encoder --runs 1 --db "$work/missing.db" >"$work/out" 2>"$work/err"; then
  fail "a missing tuning log was accepted"
fi
grep -q "model_bench: .*no tuning log" "$work/err" || fail "no clear error for a missing log: $(cat "$work/err")"

: >"$work/empty.jsonl"
"$kiln" db --db "$work/empty.db" import "$work/empty.jsonl" >/dev/null
KILN_NUM_THREADS=1 "$bench" --models "$models" --names bert_encoder --runs 2 --artifact-only \
  --db "$work/empty.db" --ort "$work/no_ort" >"$work/out" 2>"$work/err" || fail "model_bench failed: $(cat "$work/err")"
line="$(grep '^model=bert_encoder ' "$work/out")" || fail "no line for bert_encoder: $(cat "$work/out")"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
for f in kiln_art_ms kiln_tuned_ms tuned_vs_untuned compile_s compile_tuned_s peak_mb unplanned_mb headline \
         ort_call_overhead_ms art_vs_ort_net; do
  [[ -n "$(field "$f")" ]] || fail "no $f in: $line"
done
[[ "$(field tuned_kernels)" == 0 ]] || fail "an empty log tuned kernels: $line"
[[ "$(field ort_ms)" == "-1.000" ]] || fail "ONNX Runtime should be missing: $line"
awk -v a="$(field kiln_art_ms)" -v t="$(field kiln_tuned_ms)" -v c="$(field compile_s)" \
    -v p="$(field peak_mb)" -v u="$(field unplanned_mb)" \
    'BEGIN { exit !(a > 0 && t > 0 && c > 0 && p > 0 && p <= u) }' || fail "implausible figures: $line"
[[ "$(field ort_call_overhead_ms)" == "-1.0000" ]] || fail "no ONNX Runtime, yet a call overhead: $line"

# --per-op: a table of the kernels after the line (Kiln's side alone without ONNX Runtime), one
# row per kernel of the optimized graph with its time inside the model and alone, the dense layers
# among them.
KILN_NUM_THREADS=1 "$bench" --models "$models" --names bert_encoder --runs 2 --artifact-only --per-op \
  --ort "$work/no_ort" >"$work/out" 2>"$work/err" || fail "model_bench --per-op failed: $(cat "$work/err")"
header="$(grep '^per-op model=bert_encoder ' "$work/out")" || fail "no per-op table: $(cat "$work/out")"
kernels="$(sed -n 's/.* kiln_kernels=\([0-9]*\).*/\1/p' <<<"$header")"
rows="$(grep -c '^ *[0-9][0-9.]* *[0-9][0-9.]* *- .*dense_pack.x86' "$work/out" || true)"
[[ "$kernels" -gt 0 && "$rows" -gt 0 ]] || fail "per-op table without kernels: $(cat "$work/out")"
[[ "$(grep -c '^ *[0-9][0-9.]* *[0-9][0-9.]* *- ' "$work/out")" == "$kernels" ]] ||
  fail "per-op rows (in the model and alone) != kernels: $(cat "$work/out")"
in_model="$(sed -n 's/.* kiln_in_model_sum_ms=\([0-9.]*\).*/\1/p' <<<"$header")"
awk -v m="$in_model" 'BEGIN { exit !(m > 0) }' || fail "no in-model time: $header"
echo "model_bench smoke test passed"
