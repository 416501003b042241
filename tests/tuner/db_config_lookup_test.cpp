// The tuning log as the compiler's ConfigLookup: a graph's template kernels take the log's best
// config for their workload (exact target, then the device class), fall back to the default for an
// unknown workload or a stale record, and compute the same values either way.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compiler/driver/graph_executor.h"
#include "compiler/driver/target.h"
#include "compiler/graph/op_def.h"
#include "compiler/ops/registry.h"
#include "tests/temp_dir.h"
#include "tuner/db_config_lookup.h"
#include "tuner/measurer.h"

namespace kiln {
namespace {

deploy::Tensor random_tensor(const std::vector<int64_t> &shape, uint64_t seed) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<float>());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = d(rng);
  return t;
}

// x [1,8,10,10] -> Conv(w [16,8,3,3], pad 1) -> y
graph::Graph conv_graph() {
  graph::Graph g;
  graph::ValueId x = g.add_input("x", graph::TensorType{ir::Float(32), {1, 8, 10, 10}});
  graph::ValueId w = g.add_constant("w", random_tensor({16, 8, 3, 3}, 1));
  graph::Node n;
  n.op = "Conv";
  n.name = "conv";
  n.inputs = {x, w};
  n.attrs["pads"] = graph::Attribute::of_ints({1, 1, 1, 1});
  n.outputs = {graph::kNoValue};
  auto types = graph::infer_types(g, n);
  g.add_output(g.add_node(n, {"y"}, types)[0]);
  return g;
}

const std::string kTarget = "llvm -mcpu=native";

// Records config `index` of the conv's workload as measured in `cost` seconds on `target`.
void record(db::TuningDb &log, const driver::KernelReport &kernel, int64_t index, double cost,
            const std::string &target, const std::string &device_key = "local-cpu") {
  ops::Task task(kernel.template_name, contracts::Json::parse(kernel.args_json), driver::resolve_target(target));
  tuner::MeasureOutcome ok;
  ok.costs = {cost, cost};
  log.insert(tuner::make_record(task, device_key, task.space().get(index), ok));
}

TEST(DbConfigLookup, TemplateKernelsTakeTheLogsBestConfigAndComputeTheSameValues) {
  test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.path() + "/kiln.db");
  tuner::DbConfigLookup lookup(log, "local-cpu");

  // Without records: the default config.
  driver::ExecutorOptions options;
  options.target = kTarget;
  options.configs = &lookup;
  driver::GraphExecutor plain(conv_graph(), options);
  ASSERT_EQ(plain.stats().templates.size(), 1u);
  const driver::KernelReport kernel = plain.stats().templates[0];
  EXPECT_EQ(kernel.source, driver::KernelReport::Source::kDefault);
  EXPECT_EQ(plain.stats().tuned_kernels, 0);

  // A record of another config: the kernel uses it.
  ops::Task task(kernel.template_name, contracts::Json::parse(kernel.args_json), driver::resolve_target(kTarget));
  const int64_t default_index = task.default_config().record().index;
  const int64_t other = default_index == 0 ? 1 : 0;
  record(log, kernel, other, 1e-5, kTarget);
  driver::GraphExecutor tuned(conv_graph(), options);
  ASSERT_EQ(tuned.stats().templates.size(), 1u);
  EXPECT_EQ(tuned.stats().templates[0].source, driver::KernelReport::Source::kExact);
  EXPECT_EQ(tuned.stats().tuned_kernels, 1);

  const deploy::Tensor x = random_tensor({1, 8, 10, 10}, 2);
  const deploy::Tensor a = plain.run(std::vector<deploy::Tensor>{x})[0];
  const deploy::Tensor b = tuned.run(std::vector<deploy::Tensor>{x})[0];
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data_as<float>()[i], b.data_as<float>()[i], 1e-4);
}

TEST(DbConfigLookup, ARecordOfAnotherTargetOfTheClassIsUsedAndSaidSo) {
  test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.path() + "/kiln.db");
  tuner::DbConfigLookup lookup(log, "local-cpu");
  driver::ExecutorOptions options;
  options.target = kTarget;
  options.configs = &lookup;
  const driver::KernelReport kernel = driver::GraphExecutor(conv_graph(), options).stats().templates.at(0);
  // The same device class, another spelling of a CPU target.
  record(log, kernel, 0, 1e-5, "llvm -mcpu=native -mattr=+avx2");
  driver::GraphExecutor ex(conv_graph(), options);
  EXPECT_EQ(ex.stats().templates.at(0).source, driver::KernelReport::Source::kDeviceClass);
  // Another device class: not used.
  tuner::DbConfigLookup other(log, "another-cpu");
  options.configs = &other;
  EXPECT_EQ(driver::GraphExecutor(conv_graph(), options).stats().templates.at(0).source,
            driver::KernelReport::Source::kDefault);
}

TEST(DbConfigLookup, TopListsTheFastestConfigsFirstFromWhereBestLooks) {
  test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.path() + "/kiln.db");
  tuner::DbConfigLookup lookup(log, "local-cpu");
  driver::ExecutorOptions options;
  options.target = kTarget;
  options.configs = &lookup;
  const driver::KernelReport kernel = driver::GraphExecutor(conv_graph(), options).stats().templates.at(0);
  const contracts::Workload w =
      ops::Task(kernel.template_name, contracts::Json::parse(kernel.args_json), driver::resolve_target(kTarget))
          .workload();
  EXPECT_TRUE(lookup.top(w, kTarget, 5).empty());
  // Another target of the class only: top() answers from the class, as best() does.
  record(log, kernel, 3, 5e-6, "llvm -mcpu=native -mattr=+avx2");
  ASSERT_EQ(lookup.top(w, kTarget, 5).size(), 1u);
  EXPECT_FALSE(lookup.top(w, kTarget, 5)[0].exact_target);
  // On the exact target: only its records, fastest first.
  record(log, kernel, 0, 3e-5, kTarget);
  record(log, kernel, 1, 1e-5, kTarget);
  record(log, kernel, 2, 2e-5, kTarget);
  const std::vector<ops::TunedConfig> two = lookup.top(w, kTarget, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].config.index, 1);
  EXPECT_EQ(two[1].config.index, 2);
  EXPECT_DOUBLE_EQ(two[0].mean_s, 1e-5);
  EXPECT_TRUE(two[0].exact_target);
  EXPECT_EQ(two[0].config.index, lookup.best(w, kTarget)->config.index);
  EXPECT_EQ(lookup.top(w, kTarget, 10).size(), 3u);
  EXPECT_TRUE(lookup.top(w, kTarget, 0).empty());
}

}  // namespace
}  // namespace kiln
