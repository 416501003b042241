#pragma once
// The graph compiler's pass pipeline: one function that runs the passes of compiler/graph/passes
// in order. KILN_DEBUG_GRAPH=1 prints the graph and the time after each pass to stderr.
#include <string>

#include "compiler/graph/graph.h"
#include "compiler/ops/config_lookup.h"

namespace kiln::driver {

struct GraphPipelineOptions {
  std::string target = "llvm -mcpu=native";  // what constant-folding kernels are compiled for
  bool fold_constants = true;
  bool simplify = true;
  bool fold_batch_norm = true;
  bool eliminate_common_subexpressions = true;
  bool fuse = true;
  // Convolutions in the blocked NCHW[x]c layout (passes/alter_layout.cpp).
  bool alter_layout = true;
  // The tuning log (may be null): the layout pass takes each convolution's blocks from the measured
  // configs of its tuning task, where it has some, else the templates' defaults.
  const ops::ConfigLookup *configs = nullptr;
  // A 1x1 convolution and the depthwise one that reads it as one kernel, where the expanded tensor
  // is large (passes/fuse_expand_depthwise.cpp); needs fuse and alter_layout. The environment
  // switch KILN_FUSE_EXPAND_DEPTHWISE=0 turns it off.
  bool fuse_expand_depthwise = true;
  // Print the graph after every pass; defaults to the KILN_DEBUG_GRAPH environment switch.
  bool debug = false;
  static GraphPipelineOptions from_env();
};

// The optimized graph; it computes what `g` computes (within float rounding) and has the same
// inputs and outputs. Each pass's result is verified.
graph::Graph optimize_graph(const graph::Graph &g,
                            const GraphPipelineOptions &options = GraphPipelineOptions::from_env());

// The pipeline as the commands run it on a model for `target` (`kiln run --optimize`, `kiln compile`,
// `kiln tune --model`): every pass, KILN_DEBUG_GRAPH honoured. With `configs` (the tuning log the
// kernels will be built with) the layout pass takes the convolutions' blocks from it; the tasks of a
// convolution do not depend on its blocks (ops::tuning_task), so `kiln tune --model` extracts the
// same convolution tasks with or without a log.
graph::Graph optimize_graph_for_target(const graph::Graph &g, const std::string &target,
                                       const ops::ConfigLookup *configs = nullptr);

}  // namespace kiln::driver
