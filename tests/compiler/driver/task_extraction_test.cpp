// Task extraction (compiler/driver/task_extraction.h): the tuning tasks of an optimized graph are
// its distinct template workloads with their node counts; epilogues fused into a conv do not make
// tasks of their own, and a config recorded for a task is what the executor replays for every
// fused kernel on it. ResNet-18 comes from tests/frontend/make_models.py (skipped without torch).
#include <gtest/gtest.h>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/graph_pipeline.h"
#include "compiler/driver/target.h"
#include "compiler/driver/task_extraction.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/op_def.h"
#include "compiler/ops/registry.h"
#include "tests/frontend/make_models.h"
#include "tests/temp_dir.h"
#include "tuner/db_config_lookup.h"
#include "tuner/measurer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const std::string kTarget = "llvm -mcpu=native";

deploy::Tensor random_tensor(const std::vector<int64_t> &shape, uint64_t seed) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<float>());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = d(rng);
  return t;
}

graph::ValueId add(graph::Graph &g, const std::string &op, const std::string &name, std::vector<graph::ValueId> inputs,
                   std::map<std::string, graph::Attribute> attrs = {}) {
  graph::Node n;
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.outputs = {graph::kNoValue};
  auto types = graph::infer_types(g, n);
  return g.add_node(n, {name + "_out"}, types)[0];
}

// x [1,8,12,12] -> Conv+bias -> Relu -> a; Conv(a)+bias -> Add(x) -> Relu -> y: after the passes two
// FusedConv kernels of one conv shape with different epilogues (relu; add, relu).
graph::Graph residual_block() {
  graph::Graph g;
  graph::ValueId x = g.add_input("x", graph::TensorType{ir::Float(32), {1, 8, 12, 12}});
  const auto pads = graph::Attribute::of_ints({1, 1, 1, 1});
  graph::ValueId c1 =
      add(g, "Conv", "conv1",
          {x, g.add_constant("w1", random_tensor({8, 8, 3, 3}, 1)), g.add_constant("b1", random_tensor({8}, 2))},
          {{"pads", pads}});
  graph::ValueId a = add(g, "Relu", "relu1", {c1});
  graph::ValueId c2 =
      add(g, "Conv", "conv2",
          {a, g.add_constant("w2", random_tensor({8, 8, 3, 3}, 3)), g.add_constant("b2", random_tensor({8}, 4))},
          {{"pads", pads}});
  graph::ValueId s = add(g, "Add", "residual", {c2, x});
  g.add_output(add(g, "Relu", "relu2", {s}));
  return g;
}

int count_ops(const graph::Graph &g, const std::set<std::string> &ops) {
  int n = 0;
  for (const auto &node : g.nodes()) n += ops.count(node.op) ? 1 : 0;
  return n;
}

TEST(TaskExtraction, FusedEpiloguesShareTheirConvsTaskAndItsTunedConfig) {
  const graph::Graph g = driver::optimize_graph_for_target(residual_block(), kTarget);
  ASSERT_EQ(count_ops(g, {"ConvNCHWc"}), 2) << graph::print(g);

  const driver::TaskExtraction x = driver::extract_tasks(g, kTarget);
  ASSERT_EQ(x.tasks.size(), 1u) << "conv+relu and conv+add+relu of one shape are one task";
  const driver::ExtractedTask &t = x.tasks[0];
  EXPECT_EQ(t.template_name, "conv2d_nchwc.x86");
  EXPECT_EQ(t.weight, 2);
  EXPECT_EQ(x.template_nodes, 2);
  EXPECT_EQ(x.other_nodes, count_ops(g, {graph::kLayoutTransformOp})) << "layout transforms are not tasks";
  EXPECT_EQ(x.other_nodes, 2) << graph::print(g);
  ASSERT_TRUE(t.args.contains("epilogue"));
  EXPECT_EQ(t.args.at("epilogue").size(), 0u) << t.args.dump();
  EXPECT_EQ(t.args.at("data").at("shape").as_int_vector(), (std::vector<int64_t>{1, 8, 12, 12}));
  EXPECT_EQ(t.args.at("kernel").at("shape").as_int_vector(), (std::vector<int64_t>{8, 8, 3, 3}));
  EXPECT_GT(t.flops, 2.0 * 2 * 8 * 12 * 12 * 8 * 9 - 1);
  // The blocks the layout pass chose are fixed in the nodes' kernels, and knobs of the task.
  EXPECT_FALSE(t.args.contains("ic_bn")) << t.args.dump();
  EXPECT_FALSE(t.args.contains("oc_bn")) << t.args.dump();
  for (const auto &n : g.nodes()) {
    if (n.op != "ConvNCHWc") continue;
    EXPECT_EQ(n.attr_int("ic_bn", 0), 8) << n.describe();
    EXPECT_EQ(n.attr_int("oc_bn", 0), 8) << n.describe();
  }

  // Without records: two distinct fused kernels, both reported under the task's key.
  test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.path() + "/kiln.db");
  tuner::DbConfigLookup lookup(log, "local-cpu");
  driver::ExecutorOptions options;
  options.target = kTarget;
  options.configs = &lookup;
  auto conv_reports = [&](const driver::GraphExecutor &ex) {
    std::vector<driver::KernelReport> r;
    for (const auto &k : ex.stats().templates) {
      if (k.template_name == t.template_name) r.push_back(k);
    }
    return r;
  };
  driver::GraphExecutor plain(driver::optimize_graph_for_target(residual_block(), kTarget), options);
  ASSERT_EQ(conv_reports(plain).size(), 2u);
  for (const auto &r : conv_reports(plain)) {
    EXPECT_EQ(r.workload_key, t.workload_key) << r.node;
    EXPECT_EQ(r.source, driver::KernelReport::Source::kDefault) << r.node;
  }

  // A config recorded for the task (as the tuner records it) with blocks of 4 instead of the
  // default's 8: a graph laid out without the log keeps its blocks and its kernels their defaults;
  // laid out with it, both convs take blocks of 4, both fused kernels the config, and the model
  // computes the same values.
  ops::Task task(t.template_name, t.args, driver::resolve_target(kTarget));
  ASSERT_EQ(task.key(), t.workload_key);
  const std::vector<int64_t> four = {2, 4};
  std::optional<autotune::Config> other;
  for (int64_t i = 0; i < task.space().size() && !other; ++i) {
    autotune::Config c = task.space().get(i);
    if (task.space().is_valid(c) && c.split("tile_ic") == four && c.split("tile_oc") == four) other = c;
  }
  ASSERT_TRUE(other.has_value());
  tuner::MeasureOutcome ok;
  ok.costs = {1e-5, 1e-5};
  log.insert(tuner::make_record(task, "local-cpu", *other, ok));
  for (const auto &r : conv_reports(driver::GraphExecutor(g, options)))
    EXPECT_EQ(r.source, driver::KernelReport::Source::kDefault) << r.node;
  const graph::Graph tuned_graph = driver::optimize_graph_for_target(residual_block(), kTarget, &lookup);
  for (const auto &n : tuned_graph.nodes()) {
    if (n.op != "ConvNCHWc") continue;
    EXPECT_EQ(n.attr_int("ic_bn", 0), 4) << n.describe();
    EXPECT_EQ(n.attr_int("oc_bn", 0), 4) << n.describe();
  }
  EXPECT_EQ(driver::extract_tasks(tuned_graph, kTarget).tasks.at(0).workload_key, t.workload_key);
  driver::GraphExecutor tuned(tuned_graph, options);
  ASSERT_EQ(conv_reports(tuned).size(), 2u);
  for (const auto &r : conv_reports(tuned)) EXPECT_EQ(r.source, driver::KernelReport::Source::kExact) << r.node;

  const deploy::Tensor in = random_tensor({1, 8, 12, 12}, 5);
  const deploy::Tensor want = driver::GraphExecutor(residual_block()).run(std::vector<deploy::Tensor>{in})[0];
  const deploy::Tensor got = tuned.run(std::vector<deploy::Tensor>{in})[0];
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.data_as<float>()[i], want.data_as<float>()[i], 1e-4);
}

TEST(TaskExtraction, ResNet18HasElevenConvTasksADenseTaskAndTwoPoolTasksWithTheExecutorsKeys) {
  if (!fs::exists(test::kModelsPython)) GTEST_SKIP() << test::kModelsPython << " is missing: cannot export resnet18";
  const int status = test::make_model("resnet18");
  if (status == test::kNoTorch) GTEST_SKIP() << test::kModelsPython << " cannot import torch, torchvision or onnx";
  ASSERT_EQ(status, 0) << "make_models.py resnet18 failed";
  const std::string path = (fs::path(KILN_MODELS_DIR) / "resnet18" / "model.onnx").string();
  const graph::Graph g = driver::optimize_graph_for_target(frontend::onnx::import_model(path), kTarget);
  const driver::TaskExtraction x = driver::extract_tasks(g, kTarget);

  // Counted from the graph: every conv (fused or not) and the classifier are template kernels.
  const int convs = count_ops(g, {"Conv", "FusedConv", "ConvNCHWc"});
  const int dense = count_ops(g, {"Gemm", "MatMul", "FusedDense"});
  EXPECT_EQ(convs, 20) << graph::print(g);
  EXPECT_EQ(dense, 1) << graph::print(g);
  const int pools = count_ops(g, {"MaxPool", "GlobalAveragePool", "PoolNCHWc"});
  int weights = 0, conv_tasks = 0, dense_tasks = 0, pool_tasks = 0;
  std::map<int, int> conv_tasks_by_weight;
  for (const auto &t : x.tasks) {
    weights += t.weight;
    const bool conv = t.template_name.rfind("conv2d", 0) == 0;
    conv_tasks += conv ? 1 : 0;
    dense_tasks += t.template_name.rfind("dense", 0) == 0 || t.template_name.rfind("matmul", 0) == 0 ? 1 : 0;
    pool_tasks += t.template_name.find("pool2d") != std::string::npos ? 1 : 0;
    if (conv) ++conv_tasks_by_weight[t.weight];
    EXPECT_EQ(t.nodes.size(), static_cast<size_t>(t.weight));
  }
  // The stem, the 3x3 convs of each stage (4 in the first, 3 in the others), the strided 3x3 and
  // the 1x1 downsample of stages 2 to 4.
  EXPECT_EQ(conv_tasks, 11);
  EXPECT_EQ(dense_tasks, 1);
  // The pools run on the blocked pool templates: tasks of their own, one each.
  EXPECT_EQ(pools, 2);
  EXPECT_EQ(pool_tasks, 2);
  EXPECT_EQ(x.tasks.size(), 14u);
  EXPECT_EQ(weights, convs + dense + pools);
  EXPECT_EQ(x.template_nodes, convs + dense + pools);
  EXPECT_EQ((conv_tasks_by_weight), (std::map<int, int>{{1, 7}, {3, 3}, {4, 1}}));
  // Not tuned: the two layout transforms (at the input and before the classifier).
  EXPECT_EQ(x.other_nodes, count_ops(g, {graph::kLayoutTransformOp}));
  EXPECT_EQ(x.other_nodes, 2);
  EXPECT_GT(x.template_flops / x.total_flops(), 0.99);

  // Each kernel the executor builds is reported under the key of its node's task: what the tuner
  // records for the task is what the executor looks up.
  driver::ExecutorOptions options;
  options.target = kTarget;
  driver::GraphExecutor ex(g, options);
  std::map<std::string, std::string> task_of_node;
  for (const auto &t : x.tasks) {
    for (const auto &n : t.nodes) task_of_node[n] = t.workload_key;
  }
  std::set<std::string> reported;
  ASSERT_FALSE(ex.stats().templates.empty());
  std::set<std::string> transforms;
  for (const auto &n : g.nodes()) {
    if (n.op == graph::kLayoutTransformOp) transforms.insert(n.name);
  }
  for (const auto &r : ex.stats().templates) {
    if (transforms.count(r.node)) continue;
    ASSERT_TRUE(task_of_node.count(r.node)) << r.node;
    EXPECT_EQ(r.workload_key, task_of_node[r.node]) << r.node;
    reported.insert(r.workload_key);
  }
  EXPECT_EQ(reported.size(), x.tasks.size());
}

}  // namespace
}  // namespace kiln
