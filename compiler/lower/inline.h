#pragma once
// compute_inline: the body of every computed stage with the stages it reads inline substituted.
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/ir/substitute.h"
#include "compiler/te/schedule.h"

namespace kiln::lower {

// Keyed by the stage's current operation.
using BodyMap = std::unordered_map<const te::OperationNode *, std::vector<ir::Expr>>;

BodyMap inline_bodies(const te::Schedule &sch);

// Inlined stages that are also arguments of the function being lowered: their readers still
// read them inline, and each is also computed at the root into its argument's buffer.
using InlinedArgs = std::unordered_set<const te::StageNode *>;

// Whether `s` gets no loop nest of its own: inlined and not an argument.
inline bool without_nest(const te::StageNode &s, const InlinedArgs &inlined_args) {
  return s.attach_type == te::AttachType::Inline && !inlined_args.count(&s);
}

using ir::substitute;

}  // namespace kiln::lower
