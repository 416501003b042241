#pragma once
// The tuning tasks of a model: the distinct template workloads of an optimized graph (what the
// executor builds from operator templates), each with how many nodes use it, and how much of the
// model's work lies outside them (tensor-expression kernels, which are not tunable).
//
// A template kernel is tuned as its anchor's workload: ops::tuning_task() (compiler/ops/tuning_task.h) drops the
// epilogue (bias, the activation, a residual add fused into a conv), so that conv+relu and conv+add+relu of one shape
// are one task. The executor looks tuned configs up under the same workload, so a config recorded
// for the task is replayed for every fused kernel built on that anchor.
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"

namespace kiln::driver {

struct ExtractedTask {
  std::string template_name;
  contracts::Json args;      // canonical, epilogue dropped (ops::tuning_task)
  std::string workload_key;  // the key the tuning log records and the executor looks up
  int weight = 0;            // nodes that use the workload
  double flops = 0;          // graph::node_flops summed over those nodes
  std::vector<std::string> nodes;
};

struct TaskExtraction {
  std::vector<ExtractedTask> tasks;  // in the order of their first node
  int template_nodes = 0;            // nodes tuned as a task (the sum of the weights)
  int other_nodes = 0;               // nodes not tuned: tensor-expression kernels and layout
                                     // transforms (made for the blocks the tuned convs choose)
  double template_flops = 0;
  double other_flops = 0;
  double total_flops() const { return template_flops + other_flops; }
};

// The tasks of `g` (a graph after optimize_graph, so that fusion is what the compiler replays) on
// `target`. Throws graph::GraphError naming a node whose kernel cannot be built.
TaskExtraction extract_tasks(const graph::Graph &g, const std::string &target);

}  // namespace kiln::driver
