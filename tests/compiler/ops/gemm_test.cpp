// Matrix-multiply templates against naive C++: the default config and sampled configs, through the
// C back end, with and without fused epilogues; float and int8 inputs.
#include <gtest/gtest.h>

#include <random>

#include "compiler/ir/ir_printer.h"
#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::Host;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");

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
    // Whole blocks of bn: the last one padded when bn does not divide 24 (its padding holds random
    // values here, which must not reach the output).
    EXPECT_EQ(testing::const_shape(c.inputs[1]), (std::vector<int64_t>{(24 + bn - 1) / bn, 12, bn}));
    auto in = testing::make_inputs(c, 16);
    Host packed = testing::to_host(in[1]);
    Host w({24, 12});
    testing::for_each_index(w.shape, [&](const std::vector<int64_t> &i) {
      w.at(i) = packed.at({i[0] / bn, i[1], i[0] % bn});
    });
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
      ops::Task task(
          name,
          Json::object({{"data", tensor({8, 24}, "uint8")}, {"weight", tensor({32, 24}, "int8")}, {"epilogue", epi}}),
          kTarget);
      EXPECT_EQ(task.workload().args["out_dtype"].as_string(), "int32");
      testing::check_against_reference(
          task, testing::test_configs(task, 2, 15),
          [&](const std::vector<Host> &in) { return last_axis_epilogue(naive_gemm(in[0], in[1], true), epi, in); },
          0.0);
    }
  }
}

TEST(Gemm, Uint8AboveTheInt8RangeWidensWithoutSignInBothBackEnds) {
  // uint8 data in [0, 256) and int8 weights in [-128, 128): data of 128 and more changes the
  // result when it is sign-extended on the way to int32. Fused with bias and requantize to int8.
  Json e = Json::array({ops::epilogue::bias_add(), ops::epilogue::requantize(3e-4, -5, "int8")});
  for (const char *name : {"dense_pack.x86", "dense_nopack.x86"}) {
    ops::Task task(
        name, Json::object({{"data", tensor({6, 40}, "uint8")}, {"weight", tensor({16, 40}, "int8")}, {"epilogue", e}}),
        kTarget);
    const std::vector<autotune::Config> configs = testing::test_configs(task, 2, 21);
    ops::Compute c = task.compute(configs[0]);
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 5);
    for (size_t i = 0; i < 2; ++i) testing::fill_full_range(inputs[i], 100 + i);
    std::vector<Host> host;
    for (const auto &t : inputs) host.push_back(testing::to_host(t));
    int high = 0;
    for (double v : host[0].data) high += v >= 128;
    ASSERT_GT(high, 50) << "too few data values of 128 and more";
    const Host accumulated = naive_gemm(host[0], host[1], true);
    const Host want = last_axis_epilogue(accumulated, e, host);
    // Requantized, the results spread over int8 and only some are clipped.
    int clipped = 0;
    for (double v : want.data) clipped += v <= -128 || v >= 127;
    EXPECT_LT(clipped, want.numel() / 4);
    for (const auto &cfg : configs) {
      SCOPED_TRACE(std::string(name) + " config " + cfg.to_string());
      EXPECT_EQ(testing::rel_error(want, testing::run_config(task, cfg, inputs)[0]), 0.0) << "C back end";
      EXPECT_EQ(testing::rel_error(want, testing::run_config_llvm(task, cfg, inputs)[0]), 0.0) << "LLVM back end";
    }
  }
}

TEST(Gemm, SpaceSizesMatchAutoTvm) {
  // x86 dense 1x1000x512: pack 1,000, nopack 160; 128x768x768 packed: 437,400. These are the raw
  // sizes; the constraints on the register tile leave fewer valid configs.
  auto dense = [](int64_t m, int64_t n, int64_t k) {
    return Json::object({{"data", tensor({m, k})}, {"weight", tensor({n, k})}});
  };
  // 1000 is a multiple of AVX2's 8 lanes: tile_x holds the divisors of N, as in AutoTVM.
  EXPECT_EQ(
      ops::Task("dense_pack.x86", dense(1, 1000, 512), driver::resolve_target("llvm -mcpu=haswell")).space().size(),
      1000);
  EXPECT_EQ(ops::Task("dense_nopack.x86", dense(1, 1000, 512), kTarget).space().size(), 160);
  EXPECT_EQ(ops::Task("dense_pack.x86", dense(128, 768, 768), kTarget).space().size(), 437400);
  // It is not one of AVX-512's 16 lanes: tile_x also holds the power-of-two tiles of padded
  // weight blocks (116 values instead of 100).
  ops::Task padded("dense_pack.x86", dense(1, 1000, 512), kTarget);
  EXPECT_EQ(padded.space().knob("tile_x").size(), 116);
  EXPECT_EQ(padded.space().size(), 1160);
}

TEST(Gemm, DensePackPaddedWeightBlocks) {
  // N = 40 is not a multiple of the 16 lanes: tiles of 16 and 32 columns pad the packed weight
  // to 48 and 64 columns; with the packing in the kernel and prepacked, with a fused epilogue.
  Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
  Json args = Json::object({{"data", tensor({5, 24})}, {"weight", tensor({40, 24})}, {"epilogue", epi}});
  ops::Task task("dense_pack.x86", args, kTarget);
  auto tiles = [&](const ops::Task &t, std::vector<int64_t> x) {
    return t.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 1, 5})},
                                  {"tile_x", Json::array_of(x)},
                                  {"tile_k", Json::array_of(std::vector<int64_t>{6, 4})},
                                  {"tile_inner", Json::array_of(std::vector<int64_t>{5, 1})}});
  };
  std::vector<autotune::Config> configs = testing::test_configs(task, 4, 17);
  configs.push_back(tiles(task, {3, 1, 16}));
  configs.push_back(tiles(task, {2, 1, 32}));
  EXPECT_EQ(task.default_config().split("tile_x").back() % 16, 0) << task.default_config().to_string();
  testing::check_against_reference(
      task, configs,
      [&](const std::vector<Host> &in) { return last_axis_epilogue(naive_gemm(in[0], in[1], true), epi, in); }, 1e-5);

  Json pre = args;
  pre.set("prepacked", true);
  ops::Task packed("dense_pack.x86", pre, kTarget);
  for (const auto &cfg : {tiles(packed, {3, 1, 16}), tiles(packed, {2, 1, 32}), packed.default_config()}) {
    SCOPED_TRACE(cfg.to_string());
    const int64_t bn = cfg.split("tile_x").back();
    ops::Compute c = packed.compute(cfg);
    auto in = testing::make_inputs(c, 18);
    Host blocks = testing::to_host(in[1]);
    ASSERT_EQ(blocks.shape, (std::vector<int64_t>{(40 + bn - 1) / bn, 24, bn}));
    Host w({40, 24});
    testing::for_each_index(w.shape, [&](const std::vector<int64_t> &i) {
      w.at(i) = blocks.at({i[0] / bn, i[1], i[0] % bn});
    });
    std::vector<Host> host = {testing::to_host(in[0]), w, testing::to_host(in[2])};
    Host want = last_axis_epilogue(naive_gemm(host[0], w, true), epi, host);
    EXPECT_LE(testing::rel_error(want, testing::run_config(packed, cfg, in)[0]), 1e-5);
  }
}

TEST(Gemm, DensePackFixedBlockHoldsTheBlockInEveryConfig) {
  // bn = 16 over 40 columns: every config of the space packs blocks of 16 (the last one padded)
  // and computes the product of the prepacked weight.
  Json args = Json::object({{"data", tensor({5, 24})}, {"weight", tensor({40, 24})}, {"prepacked", true}, {"bn", 16}});
  ops::Task task("dense_pack.x86", args, kTarget);
  EXPECT_EQ(task.workload().args.get_or("bn", 0).as_int(), 16);
  for (const Json &x : task.space().knob("tile_x").entities) EXPECT_EQ(x.as_int_vector().back(), 16) << x.dump();
  EXPECT_EQ(task.default_config().split("tile_x").back(), 16);
  for (const auto &cfg : testing::test_configs(task, 3, 19)) {
    SCOPED_TRACE(cfg.to_string());
    ops::Compute c = task.compute(cfg);
    EXPECT_FALSE(c.has_part("pack"));
    auto in = testing::make_inputs(c, 20);
    Host blocks = testing::to_host(in[1]);
    ASSERT_EQ(blocks.shape, (std::vector<int64_t>{3, 24, 16}));
    Host w({40, 24});
    testing::for_each_index(w.shape, [&](const std::vector<int64_t> &i) {
      w.at(i) = blocks.at({i[0] / 16, i[1], i[0] % 16});
    });
    EXPECT_LE(testing::rel_error(naive_gemm(testing::to_host(in[0]), w, true), testing::run_config(task, cfg, in)[0]),
              1e-5);
  }
}

TEST(Gemm, DensePackBlockNeedsAPrepackedWeightAndABlockWithinN) {
  auto message = [](Json args) {
    try {
      ops::Task("dense_pack.x86", args, kTarget);
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Json base = Json::object({{"data", tensor({5, 24})}, {"weight", tensor({40, 24})}});
  Json no_prepack = base;
  no_prepack.set("bn", 16);
  EXPECT_NE(message(no_prepack).find("bn fixes the block of a prepacked weight"), std::string::npos)
      << message(no_prepack);
  Json too_wide = no_prepack;
  too_wide.set("prepacked", true);
  too_wide.set("bn", 64);
  EXPECT_NE(message(too_wide).find("bn must be in [1, N = 40], got 64"), std::string::npos) << message(too_wide);
}

TEST(Gemm, BatchMatmulPaddedWeightBlocks) {
  for (int64_t bb : {int64_t{2}, int64_t{1}}) {
    ops::Task task("batch_matmul.x86", Json::object({{"a", tensor({2, 3, 8})}, {"b", tensor({bb, 20, 8})}}), kTarget);
    auto pad = task.space().from_values({{"tile_y", Json::array_of(std::vector<int64_t>{1, 1, 3})},
                                         {"tile_x", Json::array_of(std::vector<int64_t>{2, 1, 16})},
                                         {"tile_k", Json::array_of(std::vector<int64_t>{2, 4})},
                                         {"tile_inner", Json::array_of(std::vector<int64_t>{3, 1})}});
    testing::check_against_reference(
        task, {pad, task.default_config()}, [&](const std::vector<Host> &in) { return naive_gemm(in[0], in[1], true); },
        1e-5);
  }
}

TEST(Gemm, SampledConfigsKeepAVectorTileAndTheRegisterBudget) {
  // 64x1000x512 on AVX-512 (16 lanes, 32 registers): every valid config vectorizes whole vectors
  // and keeps its accumulators, weight vectors and broadcast within the registers; the space stays
  // a search space of thousands of configs.
  ops::Task task("dense_pack.x86",
                 Json::object({{"data", tensor({64, 512})}, {"weight", tensor({1000, 512})}, {"prepacked", true}}),
                 kTarget);
  EXPECT_GT(task.space().count_valid(), 1000);
  std::mt19937_64 rng(19);
  for (int i = 0; i < 200; ++i) {
    autotune::Config c = task.space().sample(rng);
    SCOPED_TRACE(c.to_string());
    const int64_t xi = c.split("tile_x").back(), yi = c.split("tile_y").back(), inner = c.split("tile_inner").back();
    EXPECT_EQ(xi % 16, 0);
    const int64_t rows = inner > 1 ? inner : yi, nv = (xi + 15) / 16;
    EXPECT_LE(rows * nv + nv + 1, 32);
    if (inner > 1) {
      EXPECT_EQ(yi % inner, 0);
    }
  }
  EXPECT_FALSE(task.space().is_valid(task.space().from_digits(std::vector<int64_t>(4, 0))));
}

TEST(Gemm, DefaultConfigFollowsTheVectorWidth) {
  Json args = Json::object({{"data", tensor({16, 64})}, {"weight", tensor({64, 64})}});
  auto avx512 = ops::Task("dense_pack.x86", args, driver::resolve_target("llvm -mcpu=znver4")).default_config();
  auto avx2 = ops::Task("dense_pack.x86", args, driver::resolve_target("llvm -mcpu=haswell")).default_config();
  auto plain = ops::Task("dense_pack.x86", args, driver::resolve_target("llvm")).default_config();
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
