#pragma once
// Symbolic interval arithmetic for bound inference: the range of values an index expression takes
// when some variables run over ranges.
#include <unordered_map>

#include "compiler/ir/ir.h"

namespace kiln::lower {

// Inclusive bounds; an undefined end means unbounded on that side.
struct Interval {
  ir::Expr min, max;
  bool bounded() const { return min.defined() && max.defined(); }
  static Interval point(const ir::Expr &e) { return {e, e}; }
  static Interval everything() { return {}; }
};

// Variables in `relax` run over their intervals (whose bounds may mention other relaxed
// variables); all other variables are fixed points.
using RelaxMap = std::unordered_map<const ir::VariableNode *, Interval>;

Interval eval_interval(const ir::Expr &e, const RelaxMap &relax);

// The smallest interval containing both.
Interval union_interval(const Interval &a, const Interval &b);

}  // namespace kiln::lower
