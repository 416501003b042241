#pragma once
// The tuning tasks of a model: the distinct template workloads of an optimized graph (what the
// executor builds from operator templates), each with how many nodes use it, and how much of the
// model's work lies outside them (tensor-expression kernels, which are not tunable).
//
// A template kernel is tuned as its anchor's workload: tuning_task() drops the epilogue (bias, the
// activation, a residual add fused into a conv), so that conv+relu and conv+add+relu of one shape
// are one task. The executor looks tuned configs up under the same workload, so a config recorded
// for the task is replayed for every fused kernel built on that anchor.
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"

namespace kiln::driver {

// The task `kernel` (a template kernel as the executor builds it) is tuned and looked up as: the
// same template and arguments without the epilogue, where the epilogue leaves the config space
// as it is (same fingerprint, so one config applies to both); otherwise `kernel` itself.
ops::Task tuning_task(const ops::Task &kernel);

struct ExtractedTask {
  std::string template_name;
  contracts::Json args;      // canonical, epilogue dropped (tuning_task)
  std::string workload_key;  // the key the tuning log records and the executor looks up
  int weight = 0;            // nodes that use the workload
  double flops = 0;          // graph::node_flops summed over those nodes
  std::vector<std::string> nodes;
};

struct TaskExtraction {
  std::vector<ExtractedTask> tasks;  // in the order of their first node
  int template_nodes = 0;            // nodes built from an operator template (the sum of the weights)
  int other_nodes = 0;               // nodes with a tensor-expression kernel: not tunable
  double template_flops = 0;
  double other_flops = 0;
  double total_flops() const { return template_flops + other_flops; }
};

// The tasks of `g` (a graph after optimize_graph, so that fusion is what the compiler replays) on
// `target`. Throws graph::GraphError naming a node whose kernel cannot be built.
TaskExtraction extract_tasks(const graph::Graph &g, const std::string &target);

}  // namespace kiln::driver
