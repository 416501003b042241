// bench/model node_bench: where a model's time goes after the graph passes. Every node that runs a
// kernel is run alone (a one-node graph: its constant inputs kept, the others random inputs; integer
// inputs are zeros, valid indices) through the executor; prints the median time of each node and
// its share of their sum, slowest first, with the template its kernel comes from.
//
// Usage: node_bench MODEL.onnx [--runs N] [--top K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"

using namespace kiln;

namespace {

deploy::Tensor input_for(const graph::TensorType &t, uint64_t seed) {
  deploy::Tensor x = deploy::Tensor::empty(t.shape, ir::to_deploy_dtype(t.dtype));
  std::memset(x.data(), 0, x.nbytes());
  if (t.dtype == ir::Float(32)) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = d(rng);
  }
  return x;
}

struct Row {
  std::string node, op, kernel;
  double ms = 0;
};

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: node_bench MODEL.onnx [--runs N] [--top K]\n");
    return 2;
  }
  int runs = 200, top = 20;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--top") == 0) top = std::atoi(argv[i + 1]);
  }
  try {
    const graph::Graph g =
        driver::optimize_graph(frontend::onnx::import_model(argv[1]), driver::GraphPipelineOptions{});
    std::vector<Row> rows;
    double total = 0;
    for (const graph::Node &n : g.nodes()) {
      const graph::OpDef *def = graph::find_op(n.op);
      if (def->view || def->evaluate) continue;
      graph::Graph one;
      graph::Node c = n;
      std::vector<deploy::Tensor> inputs;
      for (auto &i : c.inputs) {
        if (i == graph::kNoValue) continue;
        const graph::Value &v = g.value(i);
        if (v.is_constant()) {
          const graph::ValueId found = one.find(v.name);
          i = found != graph::kNoValue ? found : one.add_constant(v.name, v.constant);
        } else {
          const graph::ValueId found = one.find(v.name);
          if (found != graph::kNoValue) {
            i = found;
            continue;
          }
          i = one.add_input(v.name, v.type);
          inputs.push_back(input_for(v.type, inputs.size() + 1));
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
      total += rows.back().ms;
    }
    std::sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.ms > b.ms; });
    std::printf("%d kernels, %.4f ms in all (one node at a time, median of %d runs)\n", static_cast<int>(rows.size()),
                total, runs);
    for (size_t i = 0; i < rows.size() && static_cast<int>(i) < top; ++i)
      std::printf("%9.4f ms %5.1f%%  %-18s %-18s %s\n", rows[i].ms, 100 * rows[i].ms / total, rows[i].op.c_str(),
                  rows[i].kernel.c_str(), rows[i].node.c_str());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "node_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
