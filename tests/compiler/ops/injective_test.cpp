// Elementwise chains, broadcasts and reductions against naive C++; the generic injective schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/ops/epilogue.h"
#include "compiler/ops/generic_schedule.h"
#include "tests/compiler/ops/op_test_util.h"
#include "tests/compiler/schedule/harness.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::Host;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");

TEST(Injective, ElemwiseChain) {
  Json ops_chain = Json::array(
      {ops::epilogue::bias_add(), ops::epilogue::sigmoid(), ops::epilogue::multiply(), ops::epilogue::clip(0.1, 0.7)});
  ops::Task task("elemwise.x86", Json::object({{"data", tensor({3, 5, 7, 11})}, {"epilogue", ops_chain}}), kTarget);
  testing::check_against_reference(
      task, testing::test_configs(task, 3, 101),
      [&](const std::vector<Host> &in) {
        return testing::apply_epilogue(in[0], ops_chain, {in[1], in[2]},
                                       [](const std::vector<int64_t> &i) { return i[1]; });
      },
      1e-5);
}

// Every scalar and activation op of the epilogue vocabulary, alone and after a per-channel op,
// at shapes no vector width divides, on the default and sampled configs, through both back ends.
TEST(Injective, ElemwiseActivationsAtTailShapes) {
  using namespace ops::epilogue;
  const std::vector<Json> activations = {add_scalar(0.75),      subtract_scalar(1.5),
                                         multiply_scalar(-2.0), divide_scalar(3.0),
                                         maximum_scalar(0.25),  minimum_scalar(-0.5),
                                         leaky_relu(0.1),       hard_sigmoid(),
                                         hard_swish(),          silu(),
                                         gelu(false),           gelu(true)};
  for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{{3, 5, 7, 11}, {2, 17}, {1, 16, 19, 19}}) {
    for (const Json &op : activations) {
      for (bool per_channel : {false, true}) {
        Json chain = per_channel ? Json::array({prelu(), op}) : Json::array({op});
        SCOPED_TRACE(chain.dump());
        ops::Task task("elemwise.x86", Json::object({{"data", tensor(shape)}, {"epilogue", chain}}), kTarget);
        auto reference = [&](const std::vector<Host> &in) {
          std::vector<Host> extra(in.begin() + 1, in.end());
          return testing::apply_epilogue(in[0], chain, extra, [](const std::vector<int64_t> &i) { return i[1]; });
        };
        testing::check_against_reference(task, testing::test_configs(task, 1, 103), reference, 2e-6);
        // The LLVM back end, with its fast vector math.
        ops::Compute c = task.compute(task.default_config());
        std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 11);
        std::vector<Host> host;
        for (const auto &t : inputs) host.push_back(testing::to_host(t));
        auto outs = testing::run_config_llvm(task, task.default_config(), inputs);
        EXPECT_LE(testing::rel_error(reference(host), outs[0]), 2e-6);
      }
    }
  }
}

TEST(Injective, BroadcastBinaryOps) {
  struct Case {
    std::vector<int64_t> l, r;
    const char *op;
  };
  for (const Case &k :
       {Case{{4, 1, 33}, {5, 1}, "add"}, Case{{2, 3, 17}, {17}, "multiply"}, Case{{6, 40}, {6, 1}, "maximum"},
        Case{{1}, {3, 20}, "subtract"}, Case{{1, 6, 5, 7}, {1, 6, 1, 1}, "maximum"}, Case{{2, 3, 5, 9}, {5, 9}, "add"},
        Case{{3, 1, 4, 5}, {1, 7, 1, 1}, "multiply"}}) {
    SCOPED_TRACE(k.op);
    Json epi = Json::array({ops::epilogue::relu()});
    ops::Task task("broadcast.x86",
                   Json::object({{"lhs", tensor(k.l)}, {"rhs", tensor(k.r)}, {"op", k.op}, {"epilogue", epi}}),
                   kTarget);
    testing::check_against_reference(
        task, testing::test_configs(task, 2, 102),
        [&](const std::vector<Host> &in) {
          const size_t rank = std::max(k.l.size(), k.r.size());
          std::vector<int64_t> shape;
          for (size_t i = 0; i < rank; ++i) {
            auto dim = [&](const std::vector<int64_t> &s) {
              return i < rank - s.size() ? 1 : s[i - (rank - s.size())];
            };
            shape.push_back(std::max(dim(k.l), dim(k.r)));
          }
          Host out(shape);
          auto pick = [&](const Host &h, const std::vector<int64_t> &i) {
            std::vector<int64_t> j;
            for (size_t d = 0; d < h.shape.size(); ++d) j.push_back(h.shape[d] == 1 ? 0 : i[d + rank - h.shape.size()]);
            return h.at(j);
          };
          testing::for_each_index(shape, [&](const std::vector<int64_t> &i) {
            double x = pick(in[0], i), y = pick(in[1], i);
            std::string op = k.op;
            double v = op == "add"        ? x + y
                       : op == "multiply" ? x * y
                       : op == "maximum"  ? std::max(x, y)
                       : op == "divide"   ? static_cast<double>(static_cast<float>(x) / static_cast<float>(y))
                                          : x - y;
            out.at(i) = std::max(v, 0.0);
          });
          return out;
        },
        1e-6);
  }
}

TEST(Injective, Reductions) {
  struct Case {
    std::vector<int64_t> shape, axes;
    bool keepdims;
    const char *op;
  };
  for (const Case &k :
       {Case{{4, 6, 50}, {2}, false, "sum"}, Case{{4, 6, 50}, {0, 1}, true, "max"},
        Case{{5, 9, 8}, {1, 2}, false, "mean"}, Case{{3, 37}, {0, 1}, false, "min"}, Case{{6, 7}, {1}, true, "prod"}}) {
    ops::Task task(
        "reduce.x86",
        Json::object(
            {{"data", tensor(k.shape)}, {"axes", Json::array_of(k.axes)}, {"keepdims", k.keepdims}, {"op", k.op}}),
        kTarget);
    const std::string op = k.op;
    testing::check_against_reference(
        task, testing::test_configs(task, 2, 103),
        [&](const std::vector<Host> &in) {
          std::vector<int64_t> oshape;
          for (size_t d = 0; d < k.shape.size(); ++d) {
            bool red = std::find(k.axes.begin(), k.axes.end(), static_cast<int64_t>(d)) != k.axes.end();
            if (!red)
              oshape.push_back(k.shape[d]);
            else if (k.keepdims)
              oshape.push_back(1);
          }
          if (oshape.empty()) oshape.push_back(1);
          double init = op == "max" ? -INFINITY : op == "min" ? INFINITY : op == "prod" ? 1.0 : 0.0;
          Host out(oshape, init);
          int64_t count = 1;
          for (int64_t a : k.axes) count *= k.shape[static_cast<size_t>(a)];
          testing::for_each_index(k.shape, [&](const std::vector<int64_t> &i) {
            std::vector<int64_t> o;
            for (size_t d = 0; d < k.shape.size(); ++d) {
              bool red = std::find(k.axes.begin(), k.axes.end(), static_cast<int64_t>(d)) != k.axes.end();
              if (!red)
                o.push_back(i[d]);
              else if (k.keepdims)
                o.push_back(0);
            }
            if (o.empty()) o.push_back(0);
            double v = in[0].at(i);
            double &acc = out.at(o);
            acc = op == "max" ? std::max(acc, v) : op == "min" ? std::min(acc, v) : op == "prod" ? acc * v : acc + v;
          });
          if (op == "mean") {
            for (auto &v : out.data) v /= static_cast<double>(count);
          }
          return out;
        },
        op == "prod" ? 1e-4 : 1e-5);
  }
}

// A sum or mean of -0.0 is -0.0, as IEEE addition (and numpy) gives: reduce.x86's sums start from
// -0.0, whose addition the code generator drops (0.0 + -0.0 would be 0.0), along the innermost data
// (the row reduction's accumulators and tree) and across an outer axis, through the LLVM back end.
TEST(Injective, SumsOfNegativeZerosAreNegativeZero) {
  for (const auto &[axes, op] :
       {std::make_pair(std::vector<int64_t>{1}, "sum"), std::make_pair(std::vector<int64_t>{0}, "sum"),
        std::make_pair(std::vector<int64_t>{0, 1}, "mean")}) {
    ops::Task task("reduce.x86", Json::object({{"data", tensor({6, 200})}, {"axes", Json::array_of(axes)}, {"op", op}}),
                   kTarget);
    const autotune::Config cfg = task.default_config();
    std::vector<deploy::Tensor> inputs = testing::make_inputs(task.compute(cfg), 5);
    for (int64_t i = 0; i < inputs[0].numel(); ++i) inputs[0].data_as<float>()[i] = -0.0f;
    const deploy::Tensor out = testing::run_config_llvm(task, cfg, inputs)[0];
    SCOPED_TRACE(std::string(op) + " over " + Json::array_of(axes).dump());
    for (int64_t i = 0; i < out.numel(); ++i) {
      ASSERT_EQ(out.data_as<float>()[i], 0.0f) << "element " << i;
      ASSERT_TRUE(std::signbit(out.data_as<float>()[i])) << "element " << i;
    }
  }
}

// The max of values that are all -inf is -inf and the min of values that are all +inf is +inf, as
// numpy's (the reductions start from -inf and +inf, not from the lowest and highest finite
// values); a row with one finite value among infinities gives that value. Through the LLVM back
// end, over the last axis, the first and both.
TEST(Injective, MaxAndMinOfInfinitiesAreInfinite) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const char *op : {"max", "min"}) {
    const float fill = std::string(op) == "max" ? -inf : inf;
    for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0}, std::vector<int64_t>{0, 1}}) {
      ops::Task task("reduce.x86", Json::object({{"data", tensor({6, 200})}, {"axes", Json::array_of(axes)}, {"op", op}}),
                     kTarget);
      const autotune::Config cfg = task.default_config();
      std::vector<deploy::Tensor> inputs = testing::make_inputs(task.compute(cfg), 5);
      float *x = inputs[0].data_as<float>();
      for (int64_t i = 0; i < inputs[0].numel(); ++i) x[i] = fill;
      x[3 * 200 + 17] = 2.5f;  // row 3, column 17
      const deploy::Tensor out = testing::run_config_llvm(task, cfg, inputs)[0];
      SCOPED_TRACE(std::string(op) + " over " + Json::array_of(axes).dump());
      const float *y = out.data_as<float>();
      for (int64_t i = 0; i < out.numel(); ++i) {
        const bool finite = axes.size() == 2 || (axes[0] == 1 ? i == 3 : i == 17);
        ASSERT_EQ(y[i], finite ? 2.5f : fill) << "element " << i;
      }
    }
  }
}

TEST(Injective, GenericScheduleOnAHandWrittenChain) {
  auto A = te::placeholder({7, 45}, ir::Float(32), "A");
  auto B = te::compute(
      {7, 45}, [&](ir::Var i, ir::Var j) { return A(i, j) * 2.0f; }, "B");
  auto C = te::compute(
      {7, 45}, [&](ir::Var i, ir::Var j) { return B(i, j) + A(i, j); }, "C");
  auto s = te::create_schedule({C});
  ops::schedule_injective(*s, C, kTarget);
  auto f = testing::check_against_unscheduled(*s, {A, C}, {{7, 45}, {7, 45}}, 0.0);
  std::string text = ir::to_string(f.body);
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_EQ(text.find("allocate B"), std::string::npos) << text;  // inlined
}

}  // namespace
}  // namespace kiln
