#include "compiler/graph/passes/passes.h"

namespace kiln::graph::passes {

Graph eliminate_dead_code(const Graph &g) { return g.prune(); }

}  // namespace kiln::graph::passes
