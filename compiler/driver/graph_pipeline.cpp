#include "compiler/driver/graph_pipeline.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/target.h"
#include "compiler/graph/passes/passes.h"

namespace kiln::driver {

GraphPipelineOptions GraphPipelineOptions::from_env() {
  GraphPipelineOptions o;
  const char *d = std::getenv("KILN_DEBUG_GRAPH");
  o.debug = d && *d && std::strcmp(d, "0") != 0;
  const char *f = std::getenv("KILN_FUSE_EXPAND_DEPTHWISE");
  if (f && std::strcmp(f, "0") == 0) o.fuse_expand_depthwise = false;
  return o;
}

graph::Graph optimize_graph(const graph::Graph &input, const GraphPipelineOptions &options) {
  graph::Graph g = input;
  ExecutorOptions eo;
  eo.target = options.target;
  const graph::passes::Evaluator evaluate = [eo](const graph::Graph &one, const graph::Node &n) {
    return evaluate_node(one, n, eo);
  };
  auto run = [&](const char *name, bool enabled, const std::function<graph::Graph(const graph::Graph &)> &pass) {
    if (!enabled) return;
    const auto t0 = std::chrono::steady_clock::now();
    g = pass(g);
    graph::verify(g);
    if (options.debug) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << "--- after " << name << " (" << ms << " ms, " << g.nodes().size() << " nodes)\n" << graph::print(g);
    }
  };
  // The pipeline, in order.
  run("simplify", options.simplify, graph::passes::simplify);
  run("fold_batch_norm", options.fold_batch_norm, graph::passes::fold_batch_norm);
  run("fold_constants", options.fold_constants,
      [&](const graph::Graph &x) { return graph::passes::fold_constants(x, evaluate); });
  run("eliminate_common_subexpressions", options.eliminate_common_subexpressions,
      graph::passes::eliminate_common_subexpressions);
  run("simplify", options.simplify, graph::passes::simplify);
  run("fuse_layer_norms", options.fuse, graph::passes::fuse_layer_norms);
  run("inline_injective_producers", options.fuse, graph::passes::inline_injective_producers);
  run("fuse_epilogues", options.fuse, graph::passes::fuse_epilogues);
  run("alter_layout", options.alter_layout, [&](const graph::Graph &x) {
    return graph::passes::alter_layout(x, resolve_target(options.target), options.configs);
  });
  run("prepack_dense", options.alter_layout,
      [&](const graph::Graph &x) { return graph::passes::prepack_dense(x, resolve_target(options.target)); });
  run("fuse_expand_depthwise", options.fuse && options.alter_layout && options.fuse_expand_depthwise,
      [](const graph::Graph &x) { return graph::passes::fuse_expand_depthwise(x); });
  run("fuse_injective", options.fuse, graph::passes::fuse_injective);
  run("fuse_elementwise", options.fuse, graph::passes::fuse_elementwise);
  run("eliminate_dead_code", true, graph::passes::eliminate_dead_code);
  return g;
}

graph::Graph optimize_graph_for_target(const graph::Graph &g, const std::string &target,
                                       const ops::ConfigLookup *configs) {
  GraphPipelineOptions options = GraphPipelineOptions::from_env();
  options.target = target;
  options.configs = configs;
  return optimize_graph(g, options);
}

}  // namespace kiln::driver
