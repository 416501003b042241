// The VTA compiler path for conv2d: conv2d_nchw_int8.vta lowered and turned into a VTA program,
// run on the simulator and checked bit-exactly against an integer reference written here
// (conv -> >> 8 -> + bias -> clip [0, 127] -> int8, REFERENCE-VTA's conv benchmark). ResNet-18's
// convolutions C2-C11 with their channel counts, kernels and strides at a reduced spatial size;
// C2 at full size with one and two virtual threads over the output channels.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <random>

#include "bench/vta/resnet_layers.h"
#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/ops/registry.h"

namespace kiln {
namespace {

using contracts::Json;
using kiln::vta::SimCounters;
using kiln::vta::VtaConfig;

// ResNet-18's convolutions after the first (C2-C11), as in the reference's benchmark.
using Layer = bench::VtaConvLayer;
const auto &kResnet = bench::kResnet18Layers;

std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> v(n);
  for (auto &x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  return v;
}

struct ConvRun {
  std::vector<int8_t> out;  // packed [O/16][OH][OW][16]
  SimCounters counters;
};

ConvRun run_conv(const Layer &l, int64_t h, const autotune::Config *cfg_in, const std::vector<int8_t> &x,
                 const std::vector<int8_t> &w, const std::vector<int32_t> &bias, int64_t oh) {
  ops::Task task("conv2d_nchw_int8.vta", bench::vta_conv_args(l, h), ops::Target(contracts::Target::parse("vta"), 128));
  const autotune::Config cfg = cfg_in ? *cfg_in : task.default_config();
  const ir::LoweredFunc f = task.lower(cfg, "conv", codegen::vta::vta_lower_options());
  codegen::vta::VtaProgram program(f, VtaConfig{});
  kiln::vta::Runtime rt;
  ConvRun r;
  r.out.assign(l.oc * oh * oh, 0);
  std::vector<int8_t> xc = x, wc = w;
  std::vector<int32_t> bc = bias;
  r.counters = program.run_host(
      rt, {{xc.data(), xc.size()}, {wc.data(), wc.size()}, {bc.data(), bc.size() * 4}, {r.out.data(), r.out.size()}});
  return r;
}

// The integer reference on the packed layouts.
std::vector<int8_t> reference(const Layer &l, int64_t h, const std::vector<int8_t> &x, const std::vector<int8_t> &w,
                              const std::vector<int32_t> &bias, int64_t oh) {
  const int64_t icb = l.ic / 16, k = l.k;
  std::vector<int8_t> y(l.oc * oh * oh);
  for (int64_t o = 0; o < l.oc; ++o)
    for (int64_t yy = 0; yy < oh; ++yy)
      for (int64_t xx = 0; xx < oh; ++xx) {
        int32_t s = 0;
        for (int64_t c = 0; c < l.ic; ++c)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t iy = yy * l.stride + ky - l.pad, ix = xx * l.stride + kx - l.pad;
              if (iy < 0 || ix < 0 || iy >= h || ix >= h) continue;
              const int32_t a = x[((c / 16 * h + iy) * h + ix) * 16 + c % 16];
              const int32_t b = w[((((o / 16) * icb + c / 16) * k + ky) * k + kx) * 256 + (o % 16) * 16 + c % 16];
              s += a * b;
            }
        // The template's int32 add wraps, as the accumulator does.
        s = static_cast<int32_t>(static_cast<uint32_t>(s >> 8) + static_cast<uint32_t>(bias[o]));
        s = std::min(127, std::max(0, s));
        y[((o / 16 * oh + yy) * oh + xx) * 16 + o % 16] = static_cast<int8_t>(s);
      }
  return y;
}

struct Inputs {
  std::vector<int8_t> x, w;
  std::vector<int32_t> bias;
};
Inputs inputs(const Layer &l, int64_t h, uint32_t seed) {
  Inputs in;
  in.x = random_int8(l.ic * h * h, seed);
  in.w = random_int8(l.oc * l.ic * l.k * l.k, seed + 1);
  std::mt19937 rng(seed + 2);
  for (int64_t o = 0; o < l.oc; ++o) in.bias.push_back(static_cast<int32_t>(rng() % 65536) - 32768);
  return in;
}

int64_t out_size(const Layer &l, int64_t h) { return (h + 2 * l.pad - l.k) / l.stride + 1; }

class VtaResnetLayer : public ::testing::TestWithParam<Layer> {};

TEST_P(VtaResnetLayer, DefaultConfigIsBitExactAtReducedSize) {
  const Layer l = GetParam();
  const int64_t h = 8, oh = out_size(l, h);
  const Inputs in = inputs(l, h, 11);
  const ConvRun r = run_conv(l, h, nullptr, in.x, in.w, in.bias, oh);
  EXPECT_EQ(r.out, reference(l, h, in.x, in.w, in.bias, oh));
  EXPECT_EQ(r.counters.gemm_counter, static_cast<uint64_t>(l.oc / 16 * oh * oh * l.ic / 16 * l.k * l.k));
}

INSTANTIATE_TEST_SUITE_P(C2toC11, VtaResnetLayer, ::testing::ValuesIn(kResnet),
                         [](const ::testing::TestParamInfo<Layer> &p) { return std::string(p.param.name); });

// Biases at the edges of int32 (and of the range where b << 8 still fits) over every output
// channel: the shifted sum plus the bias wraps in int32 exactly as the template's arithmetic does,
// so large positive biases over positive sums clip to 0 and over negative sums to 127.
TEST(VtaConv2d, BiasesAtTheInt32EdgesAreBitExact) {
  const std::vector<int32_t> edges = {INT32_MIN,     INT32_MIN + 1, -(1 << 23) - 1,  -(1 << 23),    -1,       0, 1, 127,
                                      (1 << 23) - 1, 1 << 23,       INT32_MAX - 127, INT32_MAX - 1, INT32_MAX};
  for (const Layer &l : {kResnet[0], kResnet[1]}) {
    SCOPED_TRACE(l.name);
    const int64_t h = 8, oh = out_size(l, h);
    Inputs in = inputs(l, h, 31);
    for (size_t o = 0; o < in.bias.size(); ++o) in.bias[o] = edges[o % edges.size()];
    const ConvRun r = run_conv(l, h, nullptr, in.x, in.w, in.bias, oh);
    const auto want = reference(l, h, in.x, in.w, in.bias, oh);
    EXPECT_EQ(r.out, want);
    // The data reaches the wrap: channel 12 (bias INT32_MAX) has outputs of 0 (a positive sum
    // wrapped) beside outputs of 127.
    std::vector<int8_t> ch12;
    for (int64_t p = 0; p < oh * oh; ++p) ch12.push_back(want[p * 16 + 12]);
    EXPECT_NE(std::count(ch12.begin(), ch12.end(), int8_t{0}), 0);
    EXPECT_NE(std::count(ch12.begin(), ch12.end(), int8_t{127}), 0);
  }
}

TEST(VtaConv2d, C2AtFullSizeWithTwoVirtualThreadsIsBitExactAndFaster) {
  const Layer l = kResnet[0];
  const int64_t h = 56, oh = 56;
  const Inputs in = inputs(l, h, 21);
  ops::Task task("conv2d_nchw_int8.vta", bench::vta_conv_args(l, h), ops::Target(contracts::Target::parse("vta"), 128));
  // The same tiles (two output blocks, four rows, two input blocks), with and without two virtual threads over the
  // output channels.
  auto config = [&](int64_t ot) {
    return task.space().from_values({{"tile_co", Json::array_of(std::vector<int64_t>{2, 2})},
                                     {"tile_h", Json::array_of(std::vector<int64_t>{14, 4})},
                                     {"tile_w", Json::array_of(std::vector<int64_t>{1, 56})},
                                     {"tile_ci", Json::array_of(std::vector<int64_t>{2, 2})},
                                     {"oc_nthread", Json(ot)},
                                     {"h_nthread", Json(int64_t{1})}});
  };
  const autotune::Config one_cfg = config(1), two_cfg = config(2);
  const ConvRun one = run_conv(l, h, &one_cfg, in.x, in.w, in.bias, oh);
  const ConvRun two = run_conv(l, h, &two_cfg, in.x, in.w, in.bias, oh);
  const auto want = reference(l, h, in.x, in.w, in.bias, oh);
  EXPECT_EQ(one.out, want);
  EXPECT_EQ(two.out, want);
  EXPECT_EQ(two.counters.gemm_counter, one.counters.gemm_counter);
  EXPECT_LT(two.counters.total_cycles, one.counters.total_cycles);
}

}  // namespace
}  // namespace kiln
