#pragma once
// The reference executor of the graph IR: every node is lowered through Kiln's own compiler (an
// operator template of compiler/ops at its default config where the op names one, otherwise the
// op's tensor-expression compute with a generic schedule), JIT-compiled with LLVM once per distinct
// node signature (op, attributes, input types, compile-time inputs), and run in topological order.
// It is the correctness baseline the optimizing graph compiler is checked against; it is not fast.
// The tensors a run writes live in arenas laid out once by the static memory plan (memory_plan.h),
// one arena per dtype, reused by later runs; concurrent runs each take an arena set of their own.
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
  std::string note;  // for kStale: why the tuned config was not usable; else why the log's default was kept
  std::optional<ops::TunedConfig> record;  // the log's record of its config (or the stale one)
};
const char *source_name(KernelReport::Source s);

struct ExecutorStats {
  int nodes = 0;             // nodes of the graph
  int kernels = 0;           // distinct kernels the graph uses
  int kernels_compiled = 0;  // of which compiled now (the rest came from the process's cache)
  int template_kernels = 0;  // of which template kernels tuned as tasks (layout transforms aside)
  int tuned_kernels = 0;     // of which with a config from the lookup
  double compile_s = 0;
  // The tensors kernels write in a run (graph outputs included), in bytes: laid out by the memory
  // plan (the sum of the per-dtype arenas) and without reuse.
  int64_t arena_bytes = 0;
  int64_t unplanned_bytes = 0;
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

  // Arena sets made so far: one per run that found none free (runs at the same time).
  int arenas_made() const;

  struct CompiledKernel;
  struct Arenas;

 private:
  void plan_arenas();
  std::unique_ptr<Arenas> take_arenas() const;
  void give_back(std::unique_ptr<Arenas> a) const;

  graph::Graph graph_;
  ExecutorOptions options_;
  ExecutorStats stats_;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels_;  // per node; null for views and evaluated ops
  // Where each value a kernel writes lives: its arena (an index into arena_dtypes_) and its offset
  // there in elements; arena -1: allocated per run (evaluated ops, dtypes of odd sizes).
  struct Placement {
    int arena = -1;
    int64_t offset = 0;
  };
  std::vector<Placement> placement_;  // per value
  std::vector<deploy::DType> arena_dtypes_;
  std::vector<int64_t> arena_elems_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

// The outputs of node `n` of `g` when every input it reads is a constant (what a frontend uses to
// fold constant subgraphs), through the same kernels as the executor.
std::vector<deploy::Tensor> evaluate_node(const graph::Graph &g, const graph::Node &n,
                                          const ExecutorOptions &options = {});

}  // namespace kiln::driver
