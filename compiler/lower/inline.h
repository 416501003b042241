#pragma once
// compute_inline: the body of every computed stage with the stages it reads inline substituted.
#include <unordered_map>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::lower {

// Keyed by the stage's current operation.
using BodyMap = std::unordered_map<const te::OperationNode *, std::vector<ir::Expr>>;

BodyMap inline_bodies(const te::Schedule &sch);

// Substitutes variables by expressions (identity keyed).
ir::Expr substitute(const ir::Expr &e, const std::unordered_map<const ir::VariableNode *, ir::Expr> &m);
ir::Stmt substitute(const ir::Stmt &s, const std::unordered_map<const ir::VariableNode *, ir::Expr> &m);

}  // namespace kiln::lower
