// The VTA compiler path for dense: the dense_int8.vta template lowered and turned into a VTA
// program by the code generator, run on the simulator and checked bit-exactly against an integer
// reference written here. The reference design's golden tests: the 4x16x64 GEMM with its
// shift/clip epilogue, without and with the batch split over virtual threads; the 1x256x256
// tutorial GEMM and its counters; then the config space and the buffer overflow error.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/ops/registry.h"

namespace kiln {
namespace {

using contracts::Json;
using kiln::vta::SimCounters;
using kiln::vta::VtaConfig;

std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> v(n);
  for (auto &x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  return v;
}

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", Json("int8")}});
}

ops::Target vta_target(const std::string &model = "sim_1x16_i8w8a32") {
  return ops::Target(contracts::Target::parse("vta -model=" + model), 128);
}

struct DenseRun {
  std::vector<int8_t> out;
  SimCounters counters;
  codegen::vta::VtaProgramStats stats;
  std::vector<codegen::vta::VtaProgram::Action> actions;
};

// data [nb][kb][1][16], weight [mb][kb][16][16] -> out [nb][mb][1][16].
DenseRun run_dense(const Json &args, const std::vector<std::pair<std::string, Json>> &knobs,
                   const std::vector<int8_t> &x, const std::vector<int8_t> &w, int64_t out_size) {
  ops::Task task("dense_int8.vta", args, vta_target());
  const autotune::Config cfg = knobs.empty() ? task.default_config() : task.space().from_values(knobs);
  const ir::LoweredFunc f = task.lower(cfg, "dense", codegen::vta::vta_lower_options());
  codegen::vta::VtaProgram program(f, VtaConfig{});
  kiln::vta::Runtime rt;
  DenseRun r;
  r.out.assign(out_size, 0);
  std::vector<int8_t> xc = x, wc = w;
  r.counters = program.run_host(rt, {{xc.data(), xc.size()}, {wc.data(), wc.size()}, {r.out.data(), r.out.size()}});
  r.stats = program.stats();
  r.actions = program.actions();
  return r;
}

// The integer reference: int32 block dot products, >> shift, clip (when clip), int8.
std::vector<int8_t> reference(const std::vector<int8_t> &x, const std::vector<int8_t> &w, int64_t nb, int64_t kb,
                              int64_t mb, int shift, bool clip) {
  std::vector<int8_t> y(nb * mb * 16);
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t m = 0; m < mb * 16; ++m) {
      int32_t s = 0;
      for (int64_t k = 0; k < kb * 16; ++k) {
        s += int32_t{x[(n * kb + k / 16) * 16 + k % 16]} *
             int32_t{w[((m / 16 * kb + k / 16) * 16 + m % 16) * 16 + k % 16]};
      }
      s >>= shift;
      if (clip) s = std::min(127, std::max(0, s));
      y[(n * mb + m / 16) * 16 + m % 16] = static_cast<int8_t>(s);
    }
  return y;
}

Json gemm_4x16x64() { return Json::object({{"data", tensor({4, 1, 1, 16})}, {"weight", tensor({4, 1, 16, 16})}}); }

std::vector<std::pair<std::string, Json>> dense_knobs(int64_t tb, int64_t tco, int64_t tci, int64_t bt, int64_t ot,
                                                      int64_t nb, int64_t mb, int64_t kb) {
  return {{"tile_b", Json::array_of(std::vector<int64_t>{nb / tb, tb})},
          {"tile_co", Json::array_of(std::vector<int64_t>{mb / tco, tco})},
          {"tile_ci", Json::array_of(std::vector<int64_t>{kb / tci, tci})},
          {"b_nthread", Json(bt)},
          {"oc_nthread", Json(ot)}};
}

TEST(VtaDense, Gemm4x16x64WithShiftAndClipIsBitExact) {
  const auto x = random_int8(4 * 16, 1), w = random_int8(64 * 16, 2);
  const DenseRun r = run_dense(gemm_4x16x64(), dense_knobs(4, 4, 1, 1, 1, 4, 4, 1), x, w, 4 * 64);
  EXPECT_EQ(r.out, reference(x, w, 4, 1, 4, 8, true));
  // One tile: 4 x 4 micro-ops of 256 MACs.
  EXPECT_EQ(r.counters.gemm_counter, 16u);
  EXPECT_EQ(r.counters.inp_load_nbytes, 64u);
  EXPECT_EQ(r.counters.wgt_load_nbytes, 1024u);
  EXPECT_EQ(r.counters.out_store_nbytes, 256u);
  // >> 8, max 0, min 127 over 16 accumulator rows.
  EXPECT_EQ(r.counters.alu_counter, 48u);
}

TEST(VtaDense, Gemm4x16x64WithTheBatchSplitOverVirtualThreadsIsBitExact) {
  const auto x = random_int8(4 * 16, 3), w = random_int8(64 * 16, 4);
  const DenseRun one = run_dense(gemm_4x16x64(), dense_knobs(2, 4, 1, 1, 1, 4, 4, 1), x, w, 4 * 64);
  const DenseRun two = run_dense(gemm_4x16x64(), dense_knobs(2, 4, 1, 2, 1, 4, 4, 1), x, w, 4 * 64);
  const auto want = reference(x, w, 4, 1, 4, 8, true);
  EXPECT_EQ(one.out, want);
  EXPECT_EQ(two.out, want);
  EXPECT_EQ(two.counters.gemm_counter, 16u);
  // Two tiles either way, each with its weights.
  EXPECT_EQ(two.counters.wgt_load_nbytes, one.counters.wgt_load_nbytes);
  // The threads' streams are interleaved: the second thread loads before the first computes.
  using Kind = codegen::vta::VtaProgram::Action::Kind;
  auto first = [&](auto pred) {
    const auto &a = two.actions;
    return std::find_if(a.begin(), a.end(), pred) - a.begin();
  };
  EXPECT_LT(first([](const auto &a) { return a.kind == Kind::Load && a.thread == 1; }),
            first([](const auto &a) { return a.kind == Kind::Gemm; }));
}

TEST(VtaDense, OutputChannelsOverVirtualThreadsIsBitExact) {
  const auto x = random_int8(4 * 2 * 16, 5), w = random_int8(8 * 2 * 256, 6);
  const Json args = Json::object({{"data", tensor({4, 2, 1, 16})}, {"weight", tensor({8, 2, 16, 16})}});
  const DenseRun r = run_dense(args, dense_knobs(2, 2, 1, 2, 2, 4, 8, 2), x, w, 4 * 8 * 16);
  EXPECT_EQ(r.out, reference(x, w, 4, 2, 8, 8, true));
}

TEST(VtaDense, Tutorial1x256x256HasTheReferenceCounters) {
  const auto x = random_int8(256, 7), w = random_int8(256 * 256, 8);
  const Json args = Json::object({{"data", tensor({1, 16, 1, 16})},
                                  {"weight", tensor({16, 16, 16, 16})},
                                  {"shift", Json(0)},
                                  {"clip", Json(false)}});
  const DenseRun r = run_dense(args, dense_knobs(1, 16, 16, 1, 1, 1, 16, 16), x, w, 256);
  EXPECT_EQ(r.out, reference(x, w, 1, 16, 16, 0, false));
  EXPECT_EQ(r.counters.inp_load_nbytes, 256u);
  EXPECT_EQ(r.counters.wgt_load_nbytes, 65536u);
  EXPECT_EQ(r.counters.out_store_nbytes, 256u);
  EXPECT_EQ(r.counters.gemm_counter, 256u);
  EXPECT_EQ(r.counters.alu_counter, 0u);
}

TEST(VtaDense, DefaultConfigFitsAndIsBitExact) {
  const auto x = random_int8(8 * 4 * 16, 9), w = random_int8(16 * 4 * 256, 10);
  const Json args = Json::object({{"data", tensor({8, 4, 1, 16})}, {"weight", tensor({16, 4, 16, 16})}});
  const DenseRun r = run_dense(args, {}, x, w, 8 * 16 * 16);
  EXPECT_EQ(r.out, reference(x, w, 8, 4, 16, 8, true));
}

TEST(VtaDense, ConfigSpaceKeepsOnlyTilesThatFit) {
  const Json args = Json::object({{"data", tensor({64, 64, 1, 16})}, {"weight", tensor({64, 64, 16, 16})}});
  ops::Task big("dense_int8.vta", args, vta_target());
  ops::Task small("dense_int8.vta", args, vta_target("sim_1x16_i8w8a32_15_12_16_13"));
  EXPECT_LT(small.space().count_valid(), big.space().count_valid());
  EXPECT_LT(big.space().count_valid(), big.space().size());
  // Every valid config of the small device fits it.
  const VtaConfig vc = VtaConfig::parse("sim_1x16_i8w8a32_15_12_16_13");
  small.space().for_each_valid([&](const autotune::Config &c) {
    const int64_t threads = c.choice_int("b_nthread") * c.choice_int("oc_nthread");
    EXPECT_LE(c.split("tile_b").back() * c.split("tile_ci").back() * threads, vc.inp_depth()) << c.to_string();
    EXPECT_LE(c.split("tile_co").back() * c.split("tile_ci").back() * threads, vc.wgt_depth()) << c.to_string();
    EXPECT_LE(c.split("tile_b").back() * c.split("tile_co").back() * threads, vc.acc_depth()) << c.to_string();
    return true;
  });
}

TEST(VtaDense, TilesBeyondABufferAreABufferOverflowError) {
  // Scheduled for the reference design, compiled for a device with a 4 KiB input buffer (256
  // elements): the 64x64-block tile of inputs does not fit.
  const Json args = Json::object({{"data", tensor({64, 8, 1, 16})}, {"weight", tensor({4, 8, 16, 16})}});
  ops::Task task("dense_int8.vta", args, vta_target());
  const ir::LoweredFunc f = task.lower(task.space().from_values(dense_knobs(64, 4, 8, 1, 1, 64, 4, 8)), "dense",
                                       codegen::vta::vta_lower_options());
  try {
    codegen::vta::VtaProgram program(f, VtaConfig::parse("sim_1x16_i8w8a32_15_12_18_17"));
    FAIL() << "expected VtaBufferOverflowError";
  } catch (const codegen::vta::VtaBufferOverflowError &e) {
    EXPECT_NE(std::string(e.what()).find("input buffer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("512 elements"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
