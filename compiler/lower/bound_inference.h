#pragma once
// Bound inference: the range of every iteration variable of every stage. Outputs cover their whole
// domain; every other stage covers the region its consumers read, seen from the loop where it is
// attached (loops outside the attach point are fixed, loops inside run over their ranges), and
// clipped to its domain.
#include "compiler/lower/inline.h"
#include "compiler/lower/message_passing.h"

namespace kiln::lower {

BoundMap infer_bound(const te::Schedule &sch, const BodyMap &bodies, const InlinedArgs &inlined_args = {});

// The loops (leaf iteration variables, outermost first) that enclose the attach point of a stage.
std::vector<std::pair<const te::StageNode *, ir::IterVar>> attach_path(const te::StageNode &stage);

}  // namespace kiln::lower
