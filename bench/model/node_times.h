// bench/model: each kernel of an optimized graph run alone (a one-node graph: its constant inputs
// kept, the others random inputs; integer inputs are zeros, valid indices) through the executor,
// with its median time. Shared by node_bench and model_bench --per-op.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"

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

// The kernels of g (views and folded nodes aside) in graph order.
inline std::vector<NodeTime> time_nodes(const graph::Graph &g, int runs) {
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
    driver::GraphExecutor ex(one);
    // The first kernel run in the process also starts the thread pool: warm up generously.
    for (int r = 0; r < (rows.empty() ? runs : 3); ++r) ex.run(inputs);
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      ex.run(inputs);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    const std::string kernel = def->kernel(graph::OpContext(g, n)).template_name;
    rows.push_back({n.name, n.op, kernel.empty() ? "(compute)" : kernel, t[t.size() / 2]});
  }
  return rows;
}

}  // namespace kiln::bench
