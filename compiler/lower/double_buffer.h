#pragma once
// double_buffer: a stage produced and consumed in each iteration of a loop gets two copies of its
// buffer; the loop produces iteration i + 1 into one copy while it consumes iteration i from the
// other, so that (on a GPU) the loads of the next tile overlap the computation on this one.
// Several stages allocated one inside the other at the same loop (each consumer the next stage's
// allocation) are double-buffered together: all their producers move to the next iteration.
#include "compiler/ir/ir.h"

namespace kiln::lower {

ir::Stmt inject_double_buffer(const ir::Stmt &s);

}  // namespace kiln::lower
