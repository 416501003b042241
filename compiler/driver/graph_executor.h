#pragma once
// The reference executor of the graph IR: every node is lowered through Kiln's own compiler (an
// operator template of compiler/ops at its default config where the op names one, otherwise the
// op's tensor-expression compute with a generic schedule), JIT-compiled with LLVM once per distinct
// node signature (op, attributes, input types, compile-time inputs), and run in topological order.
// It is the correctness baseline the optimizing graph compiler is checked against; it is not fast.
// How a node becomes a kernel is node_kernel.h, shared with the graph compiler (graph_compiler.h).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/ops/config_lookup.h"
#include "deploy/tensor.h"

namespace kiln::driver {

// A bad input to run(): a missing or extra input, or a dtype or shape that differs from the
// graph's. The message names the input.
class ExecutionError : public UserError {
 public:
  using UserError::UserError;
};

struct ExecutorOptions {
  std::string target = "llvm -mcpu=native";
  // Where template kernels find their tuned configs (the tuning log); without one, or for a
  // workload it does not know, they use the template's default config.
  const ops::ConfigLookup *configs = nullptr;
};

// Where one template kernel's config came from.
struct KernelReport {
  std::string node;  // the first node that uses the kernel
  std::string template_name;
  std::string workload_key;
  std::string args_json;  // the workload's canonical arguments (what `kiln tune --args` takes)
  enum class Source { kDefault, kExact, kDeviceClass, kStale } source = Source::kDefault;
  std::string note;  // for kStale: why the tuned config was not usable
};
const char *source_name(KernelReport::Source s);

struct ExecutorStats {
  int nodes = 0;             // nodes of the graph
  int kernels = 0;           // distinct kernels the graph uses
  int kernels_compiled = 0;  // of which compiled now (the rest came from the process's cache)
  int template_kernels = 0;  // of which template kernels tuned as tasks (layout transforms aside)
  int tuned_kernels = 0;     // of which with a config from the lookup
  double compile_s = 0;
  std::vector<KernelReport> templates;  // one per distinct template kernel tuned as a task
};

class GraphExecutor {
 public:
  // Verifies the graph and compiles every node's kernel. Throws graph::GraphError for a malformed
  // graph, ops::OpError / ScheduleError naming the node for a node the compiler cannot build.
  explicit GraphExecutor(graph::Graph g, const ExecutorOptions &options = {});
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor &) = delete;
  GraphExecutor &operator=(const GraphExecutor &) = delete;

  const graph::Graph &graph() const { return graph_; }
  const ExecutorStats &stats() const { return stats_; }

  // Runs the graph on inputs given in the order of graph().inputs(); returns its outputs in order.
  // Throws ExecutionError for inputs that do not match.
  std::vector<deploy::Tensor> run(const std::vector<deploy::Tensor> &inputs) const;
  // The same with inputs by name.
  std::vector<deploy::Tensor> run(const std::map<std::string, deploy::Tensor> &inputs) const;

  struct CompiledKernel;

 private:
  graph::Graph graph_;
  ExecutorOptions options_;
  ExecutorStats stats_;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels_;  // per node; null for views and evaluated ops
};

// The outputs of node `n` of `g` when every input it reads is a constant (what a frontend uses to
// fold constant subgraphs), through the same kernels as the executor.
std::vector<deploy::Tensor> evaluate_node(const graph::Graph &g, const graph::Node &n,
                                          const ExecutorOptions &options = {});

}  // namespace kiln::driver
