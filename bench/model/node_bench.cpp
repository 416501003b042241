// bench/model node_bench: where a model's time goes after the graph passes. Every node that runs a
// kernel is run alone (a one-node graph: its constant inputs kept, the others random inputs; integer
// inputs are zeros, valid indices) through the executor; prints the median time of each node and
// its share of their sum, slowest first, with the template its kernel comes from.
//
// --artifact: each node compiled into a one-node artifact (its output in the memory plan's arena, as
// in the model) rather than run by the executor (which allocates its output at every run).
//
// Usage: node_bench MODEL.onnx [--runs N] [--top K] [--artifact]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/model/node_times.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/frontend/onnx/onnx_importer.h"

using namespace kiln;

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: node_bench MODEL.onnx [--runs N] [--top K] [--artifact]\n");
    return 2;
  }
  int runs = 200, top = 20;
  bench::NodeRunner runner = bench::NodeRunner::Executor;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--artifact") == 0) runner = bench::NodeRunner::Artifact;
    if (i + 1 < argc && std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[++i]);
    if (i + 1 < argc && std::strcmp(argv[i], "--top") == 0) top = std::atoi(argv[++i]);
  }
  try {
    const graph::Graph g =
        driver::optimize_graph(frontend::onnx::import_model(argv[1]), driver::GraphPipelineOptions{});
    std::vector<bench::NodeTime> rows = bench::time_nodes(g, runs, runner);
    double total = 0;
    for (const bench::NodeTime &r : rows) total += r.ms;
    std::sort(rows.begin(), rows.end(), [](const bench::NodeTime &a, const bench::NodeTime &b) { return a.ms > b.ms; });
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
