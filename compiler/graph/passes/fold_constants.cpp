#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"

namespace kiln::graph::passes {

Graph fold_constants(const Graph &g, const Evaluator &evaluate, int64_t max_bytes) {
  Rewriter rw(g);
  for (const Node &n : g.nodes()) {
    bool all_constant = true;
    int64_t bytes = 0;
    for (ValueId i : n.inputs) {
      if (i != kNoValue && !rw.out().value(rw.map(i)).is_constant()) all_constant = false;
    }
    for (ValueId o : n.outputs) bytes += g.value(o).type.nbytes();
    if (!all_constant || bytes > max_bytes) {
      rw.copy(n);
      continue;
    }
    // Evaluate the node over the new graph's constants.
    Node m = n;
    for (auto &i : m.inputs) i = rw.map(i);
    Graph one;
    for (auto &i : m.inputs) {
      if (i == kNoValue) continue;
      const Value &v = rw.out().value(i);
      i = one.add_constant(v.name, v.constant);
    }
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (ValueId o : n.outputs) {
      names.push_back(g.value(o).name);
      types.push_back(g.value(o).type);
    }
    one.add_node(m, names, types);
    std::vector<deploy::Tensor> values = evaluate(one, one.nodes()[0]);
    for (size_t k = 0; k < n.outputs.size(); ++k) rw.set(n.outputs[k], rw.constant(names[k], values[k]));
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
