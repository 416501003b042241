#pragma once
// Storage flattening: multi-dimensional tensor accesses become flat loads and stores with strides.
// Realized regions that are not arguments become allocations sized by their (upper-bounded)
// extents, in the stage's storage scope, addressed relative to the region's minimum.
#include <map>

#include "compiler/ir/function.h"
#include "compiler/te/schedule.h"

namespace kiln::lower {

// Argument buffers, keyed by (operation, output index).
using BufferBinds = std::map<std::pair<const te::OperationNode *, int>, ir::Buffer>;

ir::Stmt storage_flatten(const ir::Stmt &s, const BufferBinds &binds, const te::Schedule &sch);

}  // namespace kiln::lower
