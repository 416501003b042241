// bench/model: each kernel of an optimized graph run alone (a one-node graph: its constant inputs
// kept, the others random inputs; integer inputs are zeros, valid indices), with its median time:
// through the executor, or compiled as a one-node artifact (`compile_graph`, then
// `deploy::GraphModule`), where its output has its place in the memory plan's arena as in the
// model rather than a fresh allocation per run (the executor's, whose page faults cost a kernel
// with a large output up to a third of its time). Shared by node_bench and model_bench --per-op.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "compiler/driver/graph_compiler.h"
#include "compiler/driver/graph_executor.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"
#include "deploy/graph_module.h"

namespace kiln::bench {

struct NodeTime {
  std::string node, op, kernel;  // kernel: the template, "(compute)" for a plain compute
  double ms = 0;                 // median over the runs
};

inline deploy::Tensor node_input(const graph::TensorType &t, uint64_t seed) {
  deploy::Tensor x = deploy::Tensor::empty(t.shape, ir::to_deploy_dtype(t.dtype));
  std::memset(x.data(), 0, x.nbytes());
  if (t.dtype == ir::Float(32)) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = d(rng);
  }
  return x;
}

enum class NodeRunner { Executor, Artifact };

// The kernels of g (views and folded nodes aside) in graph order, with their configs from `configs`
// (null: the templates' defaults).
inline std::vector<NodeTime> time_nodes(const graph::Graph &g, int runs, NodeRunner runner = NodeRunner::Executor,
                                        const ops::ConfigLookup *configs = nullptr) {
  std::vector<NodeTime> rows;
  for (const graph::Node &n : g.nodes()) {
    const graph::OpDef *def = graph::find_op(n.op);
    if (def->view || def->evaluate) continue;
    graph::Graph one;
    graph::Node c = n;
    std::vector<deploy::Tensor> inputs;
    for (auto &i : c.inputs) {
      if (i == graph::kNoValue) continue;
      const graph::Value &v = g.value(i);
      const graph::ValueId found = one.find(v.name);
      if (found != graph::kNoValue) {
        i = found;
      } else if (v.is_constant()) {
        i = one.add_constant(v.name, v.constant);
      } else {
        i = one.add_input(v.name, v.type);
        inputs.push_back(node_input(v.type, inputs.size() + 1));
      }
    }
    std::vector<std::string> names;
    std::vector<graph::TensorType> types;
    for (graph::ValueId o : n.outputs) {
      names.push_back(g.value(o).name);
      types.push_back(g.value(o).type);
    }
    for (graph::ValueId o : one.add_node(c, names, types)) one.add_output(o);
    std::unique_ptr<driver::GraphExecutor> ex;
    std::unique_ptr<deploy::GraphModule> module;
    if (runner == NodeRunner::Artifact) {
      const std::string path =
          (std::filesystem::temp_directory_path() / ("kiln_node_times_" + std::to_string(::getpid()) + ".kiln"))
              .string();
      driver::GraphCompileOptions options;
      options.kernels.configs = configs;
      driver::compile_graph(one, path, options);
      module = std::make_unique<deploy::GraphModule>(deploy::GraphModule::load(path));
      std::filesystem::remove(path);
      for (size_t k = 0; k < inputs.size(); ++k) module->set_input(static_cast<int>(k), inputs[k]);
    } else {
      driver::ExecutorOptions eo;
      eo.configs = configs;
      ex = std::make_unique<driver::GraphExecutor>(one, eo);
    }
    auto run_once = [&] { module ? module->run() : static_cast<void>(ex->run(inputs)); };
    // The first kernel run in the process also starts the thread pool: warm up generously.
    for (int r = 0; r < (rows.empty() ? runs : 3); ++r) run_once();
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run_once();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    const std::string kernel = def->kernel(graph::OpContext(g, n)).template_name;
    rows.push_back({n.name, n.op, kernel.empty() ? "(compute)" : kernel, t[t.size() / 2]});
  }
  return rows;
}

}  // namespace kiln::bench
