#pragma once
// Internal to the fusion passes (fuse_epilogues, fuse_layer_norms, fuse_elementwise,
// inline_injective_producers and the analysis of fuse_ops.cpp): small matchers over the graph a
// pass reads.
#include <cmath>
#include <optional>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/fuse_ops.h"

namespace kiln::graph::passes {

// The value of a scalar constant (one element, not float16), or nullopt.
inline std::optional<double> scalar_constant(const Graph &g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value &val = g.value(v);
  if (!val.is_constant() || val.type.numel() != 1 || val.type.dtype.is_float16()) return std::nullopt;
  return tensor_values(val.constant)[0];
}

// The value of `n`'s operands other than `cur`, when `n` is binary and reads `cur` once.
inline ValueId other_operand(const Node &n, ValueId cur) {
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return kNoValue;
  if (n.inputs[0] == cur) return n.inputs[1];
  if (n.inputs[1] == cur) return n.inputs[0];
  return kNoValue;
}

// Reader bookkeeping of the old graph.
struct Uses {
  std::vector<std::vector<size_t>> readers;
  std::vector<bool> is_output;
  explicit Uses(const Graph &g) : readers(value_readers(g)), is_output(g.values().size(), false) {
    for (ValueId o : g.outputs()) is_output[static_cast<size_t>(o)] = true;
  }
  // The only reader of `v`, when it has one and is no graph output.
  std::optional<size_t> only(ValueId v) const {
    const auto &r = readers[static_cast<size_t>(v)];
    if (r.size() != 1 || is_output[static_cast<size_t>(v)]) return std::nullopt;
    return r[0];
  }
};

// Whether `v` is within 1e-4 of `want`, relatively.
inline bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) <= 1e-4 * std::abs(want); }

}  // namespace kiln::graph::passes
