// Matrix-multiply templates against naive C++: the default config and sampled configs, through the
// C back end, with and without fused epilogues; float and int8 inputs.
#include <gtest/gtest.h>

#include "compiler/ir/ir_printer.h"
#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using autotune::Json;
using testing::Host;
using testing::tensor;

const char *kTarget = "llvm -mcpu=znver4";

// out[b, m, n] = sum_k a[b, m, k] * b[b', n, k] (transpose_b) or b[b', k, n].
Host naive_gemm(const Host &a, const Host &b, bool transpose_b) {
  const bool batch = a.shape.size() == 3;
  const int64_t B = batch ? a.shape[0] : 1;
  const int64_t M = a.shape[batch ? 1 : 0], K = a.shape[batch ? 2 : 1];
  const int64_t N = transpose_b ? b.shape[batch ? 1 : 0] : b.shape[batch ? 2 : 1];
  const int64_t BB = batch ? b.shape[0] : 1;
  Host out(batch ? std::vector<int64_t>{B, M, N} : std::vector<int64_t>{M, N});
  for (int64_t p = 0; p < B; ++p) {
    const int64_t q = BB == 1 ? 0 : p;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double bv = transpose_b ? b.data[static_cast<size_t>((q * N + n) * K + k)]
                                  : b.data[static_cast<size_t>((q * K + k) * N + n)];
          acc += a.data[static_cast<size_t>((p * M + m) * K + k)] * bv;
        }
        out.data[static_cast<size_t>((p * M + m) * N + n)] = acc;
      }
    }
  }
  return out;
}

Host last_axis_epilogue(const Host &x, const Json &epi, const std::vector<Host> &in) {
  std::vector<Host> extra(in.begin() + 2, in.end());
  return testing::apply_epilogue(x, epi, extra, [](const std::vector<int64_t> &i) { return i.back(); });
}

TEST(Gemm, DensePackFloat) {
  Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
  for (const Json &e : {Json::array(), epi}) {
    ops::Task task("dense_pack.x86",
                   Json::object({{"data", tensor({12, 20})}, {"weight", tensor({24, 20})}, {"epilogue", e}}), kTarget);
    testing::check_against_reference(
        task, testing::test_configs(task, 3, 11),
        [&](const std::vector<Host> &in) { return last_axis_epilogue(naive_gemm(in[0], in[1], true), e, in); }, 1e-5);
  }
}

TEST(Gemm, DensePackPrepackedWeights) {
  Json args = Json::object({{"data", tensor({8, 12})}, {"weight", tensor({24, 12})}, {"prepacked", true}});
  ops::Task task("dense_pack.x86", args, kTarget);
  for (const auto &cfg : testing::test_configs(task, 3, 16)) {
    SCOPED_TRACE(cfg.to_string());
    const int64_t bn = cfg.split("tile_x").back();
    ops::Compute c = task.compute(cfg);
    EXPECT_EQ(testing::const_shape(c.inputs[1]), (std::vector<int64_t>{24 / bn, 12, bn}));
    auto in = testing::make_inputs(c, 16);
    Host packed = testing::to_host(in[1]);
    Host w({24, 12});
    testing::for_each_index(w.shape, [&](const std::vector<int64_t> &i) { w.at(i) = packed.at({i[0] / bn, i[1], i[0] % bn}); });
    Host want = naive_gemm(testing::to_host(in[0]), w, true);
    EXPECT_LE(testing::rel_error(want, testing::run_config(task, cfg, in)[0]), 1e-5);
  }
}

TEST(Gemm, DenseNopackFloat) {
  Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::clip(-1.0, 3.0)});
  for (const Json &e : {Json::array(), epi}) {
    ops::Task task("dense_nopack.x86",
                   Json::object({{"data", tensor({6, 32})}, {"weight", tensor({10, 32})}, {"epilogue", e}}), kTarget);
    testing::check_against_reference(
        task, testing::test_configs(task, 3, 12),
        [&](const std::vector<Host> &in) { return last_axis_epilogue(naive_gemm(in[0], in[1], true), e, in); }, 1e-5);
  }
}

TEST(Gemm, MatmulWithResidual) {
  Json e = Json::array({ops::epilogue::add(), ops::epilogue::scale(0.5)});
  ops::Task task("matmul.x86", Json::object({{"a", tensor({9, 16})}, {"b", tensor({16, 40})}, {"epilogue", e}}),
                 kTarget);
  testing::check_against_reference(
      task, testing::test_configs(task, 3, 13),
      [&](const std::vector<Host> &in) { return last_axis_epilogue(naive_gemm(in[0], in[1], false), e, in); }, 1e-5);
}

TEST(Gemm, BatchMatmulPackedAndBroadcast) {
  for (bool tb : {true, false}) {
    for (int64_t bb : {int64_t{3}, int64_t{1}}) {
      std::vector<int64_t> bshape = tb ? std::vector<int64_t>{bb, 16, 8} : std::vector<int64_t>{bb, 8, 16};
      ops::Task task("batch_matmul.x86",
                     Json::object({{"a", tensor({3, 4, 8})}, {"b", tensor(bshape)}, {"transpose_b", tb}}), kTarget);
      testing::check_against_reference(
          task, testing::test_configs(task, 2, 14),
          [&](const std::vector<Host> &in) { return naive_gemm(in[0], in[1], tb); }, 1e-5);
    }
  }
}

TEST(Gemm, DenseInt8AccumulatesInInt32AndRequantizes) {
  // uint8 x int8 -> int32, then bias, then requantize to int8: exact integer results.
  Json e = Json::array({ops::epilogue::bias_add(), ops::epilogue::requantize(0.05, 3, "int8")});
  for (const char *name : {"dense_pack.x86", "dense_nopack.x86"}) {
    for (const Json &epi : {Json::array(), e}) {
      ops::Task task(name,
                     Json::object({{"data", tensor({8, 24}, "uint8")},
                                   {"weight", tensor({32, 24}, "int8")},
                                   {"epilogue", epi}}),
                     kTarget);
      EXPECT_EQ(task.workload().args["out_dtype"].as_string(), "int32");
      testing::check_against_reference(
          task, testing::test_configs(task, 2, 15),
          [&](const std::vector<Host> &in) { return last_axis_epilogue(naive_gemm(in[0], in[1], true), epi, in); }, 0.0);
    }
  }
}

TEST(Gemm, SpaceSizesMatchAutoTvm) {
  // x86 dense 1x1000x512: pack 1,000, nopack 160; 128x768x768 packed: 437,400.
  auto dense = [](int64_t m, int64_t n, int64_t k) {
    return Json::object({{"data", tensor({m, k})}, {"weight", tensor({n, k})}});
  };
  EXPECT_EQ(ops::Task("dense_pack.x86", dense(1, 1000, 512), kTarget).space().size(), 1000);
  EXPECT_EQ(ops::Task("dense_nopack.x86", dense(1, 1000, 512), kTarget).space().size(), 160);
  EXPECT_EQ(ops::Task("dense_pack.x86", dense(128, 768, 768), kTarget).space().size(), 437400);
}

TEST(Gemm, DefaultConfigFollowsTheVectorWidth) {
  Json args = Json::object({{"data", tensor({16, 64})}, {"weight", tensor({64, 64})}});
  auto avx512 = ops::Task("dense_pack.x86", args, "llvm -mcpu=znver4").default_config();
  auto avx2 = ops::Task("dense_pack.x86", args, "llvm -mcpu=haswell").default_config();
  auto plain = ops::Task("dense_pack.x86", args, "llvm").default_config();
  EXPECT_EQ(avx512.split("tile_x").back(), 32);
  EXPECT_EQ(avx2.split("tile_x").back(), 16);
  EXPECT_EQ(plain.split("tile_x").back(), 8);
}

TEST(Gemm, FusedEpilogueIsOneLoopNest) {
  Json e = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu(), ops::epilogue::add()});
  ops::Task task("dense_pack.x86",
                 Json::object({{"data", tensor({8, 16})}, {"weight", tensor({32, 16})}, {"epilogue", e}}), kTarget);
  ir::LoweredFunc f = task.lower(task.default_config());
  std::string text = ir::to_string(f.body);
  // The weight packing is its own loop nest; everything else (the accumulation and the three
  // epilogue stages) lives inside one parallel loop.
  size_t pack = text.find("weight.pack[");
  size_t par = text.find("parallel");
  ASSERT_NE(par, std::string::npos) << text;
  EXPECT_NE(pack, std::string::npos) << text;
  EXPECT_EQ(text.find("parallel", text.find("parallel", par + 1) + 1), std::string::npos) << text;
  EXPECT_EQ(text.find("dense.bias_add["), std::string::npos) << text;  // inlined
  EXPECT_EQ(text.find("dense.relu1["), std::string::npos) << text;     // inlined
}

}  // namespace
}  // namespace kiln
