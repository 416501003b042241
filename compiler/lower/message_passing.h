#pragma once
// Moving ranges and index values through a stage's split/fuse relations.
#include <unordered_map>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::lower {

// Range of every iteration variable, keyed by the IterVar node.
using BoundMap = std::unordered_map<const ir::IterVarNode *, ir::Range>;
// Value of an iteration variable's index in terms of the loop variables.
using IndexMap = std::unordered_map<const ir::IterVarNode *, ir::Expr>;

// Given the ranges of the stage's root variables, computes the ranges of every derived one.
void pass_down_domain(const te::StageNode &stage, BoundMap *bounds);

// Given the values of the leaf variables (usually their loop variables), computes the values of
// every variable up to the roots.
void pass_up_index(const te::StageNode &stage, const BoundMap &bounds, IndexMap *values);

// The conditions under which a leaf-loop point is inside the stage's domain: one per split whose
// parent extent is not known to be a multiple of the factor. `reduce` selects conditions on
// reduction axes (true) or data axes (false).
std::vector<ir::Expr> split_predicates(const te::StageNode &stage, const BoundMap &bounds, const IndexMap &values,
                                       bool reduce);

}  // namespace kiln::lower
