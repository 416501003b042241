#pragma once
// compute_inline: the body of every computed stage with the stages it reads inline substituted.
#include <unordered_map>
#include <vector>

#include "compiler/ir/substitute.h"
#include "compiler/te/schedule.h"

namespace kiln::lower {

// Keyed by the stage's current operation.
using BodyMap = std::unordered_map<const te::OperationNode *, std::vector<ir::Expr>>;

BodyMap inline_bodies(const te::Schedule &sch);

using ir::substitute;

}  // namespace kiln::lower
