#pragma once
// The graph compiler: an (optimized) graph becomes one deployable file, `model.kiln`, that
// deploy::GraphModule loads and runs without LLVM or the compiler. Every node's kernel is chosen
// and lowered as the reference executor does (node_kernel.h); the distinct kernels are linked into
// one shared library; view nodes become aliases; every tensor the run writes gets an offset in one
// arena from the static memory plan (memory_plan.h). The file format is in deploy/artifact_format.h
// and docs/graph.md.
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/graph/graph.h"

namespace kiln::driver {

struct GraphCompileOptions {
  ExecutorOptions kernels;  // target and tuned configs, as for the executor
  bool in_place = true;     // let elementwise kernels write over an input that dies at them
  // Let the producers of a Concat's inputs write into its output, dropping the copy, where the
  // inputs are contiguous runs of it (docs/graph.md, "Concat in place").
  bool concat_in_place = true;
  std::string cc = "cc";  // the C compiler driver that links the shared library
};

struct GraphCompileReport {
  int nodes = 0;
  int steps = 0;                        // kernel calls per run
  int kernels = 0;                      // distinct kernels in the library
  int template_kernels = 0;             // of which template kernels tuned as tasks (layout transforms aside)
  int tuned_kernels = 0;                // of which with a config from the lookup
  std::vector<KernelReport> templates;  // one per distinct template kernel tuned as a task
  int64_t arena_bytes = 0;              // planned peak: inputs, outputs and intermediates
  int64_t unplanned_bytes = 0;          // the same tensors without reuse
  int in_place = 0;                     // steps that write over an input
  int concats_in_place = 0;             // Concats whose inputs were written into their output
  int64_t params_bytes = 0;
  int64_t file_bytes = 0;
  double compile_s = 0;
};

// Compiles `g` and writes the artifact to `path`. Throws graph::GraphError naming the node for a
// node that cannot be compiled (an op evaluated only at compile time, a kernel the compiler cannot
// build), UserError when the library cannot be linked or the file written.
GraphCompileReport compile_graph(const graph::Graph &g, const std::string &path,
                                 const GraphCompileOptions &options = {});

}  // namespace kiln::driver
