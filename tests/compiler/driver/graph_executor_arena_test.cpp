// The executor's tensors live in arenas laid out by the memory plan and reused across runs: the
// arena's size follows the values' lifetimes, a view keeps its base alive, runs back to back and
// runs from several threads at once give the same outputs.
#include <gtest/gtest.h>

#include <thread>

#include "compiler/driver/graph_executor.h"
#include "compiler/graph/op_def.h"
#include "tests/compiler/graph/graph_test_util.h"

namespace kiln::graph {
namespace {

using namespace test;

constexpr int64_t kBytes = 16 * 32 * 32 * 4;  // one [1,16,32,32] float tensor

// x -> a1 = x + x -> a2 = a1 + x -> ... -> a8 (output 0), and output 1 a view of a1 (so a1 lives to
// the end). Output 0 is 9 x, output 1 is 2 x reshaped to [16, 1024].
Graph chain_with_view() {
  Graph g;
  ValueId x = g.add_input("x", TensorType{ir::Float(32), {1, 16, 32, 32}});
  ValueId a1 = add(g, "Add", {x, x});
  ValueId a = a1;
  for (int i = 0; i < 7; ++i) a = add(g, "Add", {a, x});
  g.add_output(a);
  g.add_output(add(g, "Reshape", {a1, g.add_constant("shape", ints({16, 1024}))}));
  return g;
}

void expect_outputs(const std::vector<deploy::Tensor> &out, const deploy::Tensor &x) {
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{16, 1024}));
  const float *in = x.data_as<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_FLOAT_EQ(out[0].data_as<float>()[i], 9 * in[i]) << i;
    ASSERT_FLOAT_EQ(out[1].data_as<float>()[i], 2 * in[i]) << i;
  }
}

TEST(GraphExecutorArena, PlanReusesBytesOfDeadValuesAndKeepsViewedValuesAlive) {
  driver::GraphExecutor ex(chain_with_view());
  // Eight written tensors; at most three live at once (a1, kept by the view, and two neighbours).
  EXPECT_EQ(ex.stats().unplanned_bytes, 8 * kBytes);
  EXPECT_EQ(ex.stats().arena_bytes, 3 * kBytes);
  const deploy::Tensor x = random_tensor({1, 16, 32, 32}, 3);
  expect_outputs(ex.run(std::vector<deploy::Tensor>{x}), x);
}

TEST(GraphExecutorArena, RunsBackToBackReuseOneArenaAndGiveTheSameOutputs) {
  driver::GraphExecutor ex(chain_with_view());
  const deploy::Tensor x = random_tensor({1, 16, 32, 32}, 5);
  const deploy::Tensor y = random_tensor({1, 16, 32, 32}, 6);
  const auto first = ex.run(std::vector<deploy::Tensor>{x});
  expect_outputs(ex.run(std::vector<deploy::Tensor>{y}), y);
  const auto again = ex.run(std::vector<deploy::Tensor>{x});
  expect_outputs(again, x);
  // Outputs own their bytes: a later run does not change an earlier run's outputs.
  expect_outputs(first, x);
  EXPECT_EQ(ex.arenas_made(), 1);
}

TEST(GraphExecutorArena, ConcurrentRunsEachGetTheirOwnArena) {
  driver::GraphExecutor ex(chain_with_view());
  constexpr int kThreads = 4;
  std::vector<deploy::Tensor> xs;
  for (int t = 0; t < kThreads; ++t) xs.push_back(random_tensor({1, 16, 32, 32}, 10 + t));
  std::vector<std::vector<deploy::Tensor>> outs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) outs[t] = ex.run(std::vector<deploy::Tensor>{xs[t]});
    });
  }
  for (auto &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) expect_outputs(outs[t], xs[t]);
  EXPECT_GE(ex.arenas_made(), 1);
  EXPECT_LE(ex.arenas_made(), kThreads);
}

}  // namespace
}  // namespace kiln::graph
