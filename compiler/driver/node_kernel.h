#pragma once
// How a graph node becomes a kernel: the op's kernel (an operator template at its tuned or default
// config, or a tensor-expression compute with a generic schedule), the signature that identifies it
// and its lowering. The reference executor (graph_executor) JIT-compiles these one module per
// kernel; the graph compiler (graph_compiler) lowers the same kernels into one shared library.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/function.h"
#include "compiler/ops/registry.h"

namespace kiln::driver {

// True when node `n` runs a kernel: not a view, not an op evaluated at compile time, and no empty
// output.
bool needs_kernel(const graph::Graph &g, const graph::Node &n, const graph::OpDef &def);

// One node's kernel before lowering.
struct NodeKernel {
  graph::Kernel kernel;
  std::unique_ptr<ops::Task> task;         // for a template kernel
  std::optional<autotune::Config> config;  // the tuned config; nullopt: the template's default
  KernelReport report;                     // where the config came from (template kernels)
  // What identifies the kernel: op, attributes, input types, compile-time input data, output types,
  // target and the tuned config. Nodes with equal signatures share one kernel.
  std::string signature;
  bool from_template() const { return !kernel.template_name.empty(); }
  // A template kernel tuned as a task of its own, whose config comes from the lookup and which the
  // reports list: every template kernel but a layout transform's (its workload follows from the
  // blocks the tuned convolutions choose; it runs at its template's default config).
  bool tuned_as_task = false;
  // The target the kernel is built for (its vector width, for the schedules that need it).
  std::optional<ops::Target> target;
};

// Whether node `n`, whose kernel is `k`, is tuned as a task of its own (see NodeKernel).
bool tuned_as_task(const graph::Node &n, const graph::Kernel &k);

// The kernel of node `n` for options.target, its config from options.configs. Throws GraphError
// naming the node.
NodeKernel prepare_node_kernel(const graph::Graph &g, const graph::Node &n, const graph::OpDef &def,
                               const ExecutorOptions &options);

// The kernel lowered to a function called `name` with the kernel inputs (k.kernel.input_map) then
// the node's outputs as parameters. Throws GraphError naming the node.
ir::LoweredFunc lower_node_kernel(const graph::Graph &g, const graph::Node &n, const NodeKernel &k,
                                  const std::string &name);

}  // namespace kiln::driver
