// conv1x1_depthwise_nchwc.x86 (a 1x1 convolution and a depthwise convolution of its result as one
// kernel) against a naive float64 reference and against conv2d_nchwc.x86 then
// depthwise_conv2d_nchwc.x86 run one after the other: MobileNetV2's expansion shapes scaled down,
// strides 1 and 2, widths no register tile divides, bands with a tail, bias + ReLU6 epilogues, and
// the errors for arguments that do not make a pair.
#include <gtest/gtest.h>

#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::Host;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");
const char *const kFused = "conv1x1_depthwise_nchwc.x86";

Json relu6() { return Json::array({ops::epilogue::bias_add(), ops::epilogue::clip(0, 6)}); }

struct Shape {
  int64_t n, ic, c, h, w, stride;
};

Json fused_args(const Shape &s, const Json &epi1, const Json &epi2) {
  return Json::object({{"data", tensor({s.n, s.ic, s.h, s.w})},
                       {"expand_kernel", tensor({s.c, s.ic, 1, 1})},
                       {"depthwise_kernel", tensor({s.c, 1, 3, 3})},
                       {"strides", s.stride},
                       {"padding", 1},
                       {"expand_epilogue", epi1},
                       {"epilogue", epi2}});
}

// The fused workload in float64 from its blocked inputs (data, expand kernel, depthwise kernel,
// then the epilogues' inputs: with bias + clip each, the expansion's bias then the depthwise's),
// as a logical [N, C, OH, OW] tensor.
Host reference(const Shape &s, const std::vector<Host> &in, int64_t icb, int64_t cb, bool epilogues) {
  const int64_t OH = (s.h + 2 - 3) / s.stride + 1, OW = (s.w + 2 - 3) / s.stride + 1;
  Host mid({s.n, s.c, s.h, s.w});
  testing::for_each_index(mid.shape, [&](const std::vector<int64_t> &i) {
    double acc = 0;
    for (int64_t ic = 0; ic < s.ic; ++ic) {
      acc +=
          in[0].at({i[0], ic / icb, i[2], i[3], ic % icb}) * in[1].at({i[1] / cb, ic / icb, 0, 0, ic % icb, i[1] % cb});
    }
    if (epilogues) acc = std::min(std::max(acc + in[3].data[static_cast<size_t>(i[1])], 0.0), 6.0);
    mid.at(i) = acc;
  });
  Host out({s.n, s.c, OH, OW});
  testing::for_each_index(out.shape, [&](const std::vector<int64_t> &i) {
    double acc = 0;
    for (int64_t kh = 0; kh < 3; ++kh) {
      for (int64_t kw = 0; kw < 3; ++kw) {
        const int64_t y = i[2] * s.stride + kh - 1, x = i[3] * s.stride + kw - 1;
        if (y < 0 || y >= s.h || x < 0 || x >= s.w) continue;
        acc += mid.at({i[0], i[1], y, x}) * in[2].at({i[1] / cb, 0, kh, kw, 0, i[1] % cb});
      }
    }
    if (epilogues) acc = std::min(std::max(acc + in[4].data[static_cast<size_t>(i[1])], 0.0), 6.0);
    out.at(i) = acc;
  });
  return out;
}

// Largest error of a blocked output against a logical reference, relative to max(1, |want|).
double blocked_error(const Host &want, const Host &got, int64_t cb) {
  double worst = 0;
  testing::for_each_index(want.shape, [&](const std::vector<int64_t> &i) {
    const double g = got.at({i[0], i[1] / cb, i[2], i[3], i[1] % cb});
    worst =
        std::max(worst, std::isnan(g) ? INFINITY : std::fabs(g - want.at(i)) / std::max(1.0, std::fabs(want.at(i))));
  });
  return worst;
}

// `tolerance`: relative to max(1, |want|); float32 sums of a hundred and more products (the
// expansions from 96 or 160 channels, unclipped) reach about 1e-5.
void check_configs(const Shape &s, bool epilogues, const std::vector<autotune::Config> &configs, uint64_t seed,
                   double tolerance = 1e-5) {
  const Json epi = epilogues ? relu6() : Json::array();
  ops::Task task(kFused, fused_args(s, epi, epi), kTarget);
  for (const auto &cfg : configs) {
    SCOPED_TRACE(cfg.to_string());
    const int64_t icb = cfg.split("tile_ic").back(), cb = cfg.split("tile_c").back();
    ops::Compute c = task.compute(cfg);
    std::vector<deploy::Tensor> in = testing::make_inputs(c, seed);
    ASSERT_EQ(in.size(), epilogues ? 5u : 3u);
    std::vector<Host> host;
    for (const auto &t : in) host.push_back(testing::to_host(t));
    ASSERT_EQ(host[0].shape, (std::vector<int64_t>{s.n, s.ic / icb, s.h, s.w, icb}));
    ASSERT_EQ(host[1].shape, (std::vector<int64_t>{s.c / cb, s.ic / icb, 1, 1, icb, cb}));
    ASSERT_EQ(host[2].shape, (std::vector<int64_t>{s.c / cb, 1, 3, 3, 1, cb}));
    const Host want = reference(s, host, icb, cb, epilogues);
    const Host got = testing::to_host(testing::run_config_llvm(task, cfg, in)[0]);
    ASSERT_EQ(got.shape, (std::vector<int64_t>{s.n, s.c / cb, want.shape[2], want.shape[3], cb}));
    EXPECT_LE(blocked_error(want, got, cb), tolerance);
  }
}

// MobileNetV2's expansion + depthwise pairs with the spatial size scaled down (16->96 at 112 with
// stride 2, 24->144 at 56, 32->192 at 28, 96->576 at 14), plus odd widths and a batch of two;
// the default config, sampled configs, and bands of one row and of a size that leaves a tail.
TEST(ConvFused, MatchesFloat64Reference) {
  const std::vector<Shape> shapes = {{1, 16, 96, 14, 14, 2}, {1, 24, 144, 11, 11, 1}, {1, 32, 192, 7, 9, 2},
                                     {1, 96, 576, 5, 5, 1},  {2, 16, 32, 9, 13, 1},   {1, 8, 24, 6, 7, 2}};
  uint64_t seed = 11;
  for (const Shape &s : shapes) {
    for (bool epilogues : {true, false}) {
      SCOPED_TRACE(std::to_string(s.ic) + "->" + std::to_string(s.c) + " at " + std::to_string(s.h) + "x" +
                   std::to_string(s.w) + " stride " + std::to_string(s.stride) + (epilogues ? " relu6" : ""));
      const Json epi = epilogues ? relu6() : Json::array();
      ops::Task task(kFused, fused_args(s, epi, epi), kTarget);
      std::vector<autotune::Config> configs = testing::test_configs(task, 3, ++seed);
      const int64_t oh = (s.h - 1) / s.stride + 1, ow = (s.w - 1) / s.stride + 1;
      const int64_t cb = std::min<int64_t>(s.c, 8);
      for (int64_t band : {int64_t{1}, int64_t{3}}) {
        configs.push_back(
            task.space().from_values({{"tile_ic", Json::array_of(std::vector<int64_t>{s.ic / 8, 8})},
                                      {"tile_c", Json::array_of(std::vector<int64_t>{s.c / cb, cb})},
                                      {"tile_band", Json::array_of(std::vector<int64_t>{(oh + band - 1) / band, band})},
                                      {"expand_cols", 4},
                                      {"tile_ow", Json::array_of(std::vector<int64_t>{(ow + 2) / 3, 3})}}));
      }
      check_configs(s, epilogues, configs, seed);
    }
  }
}

// The fused kernel gives what the two templates it replaces give run one after the other (the
// 1x1 convolution's output fed to the depthwise one), at their own default configs with the
// fused config's blocks.
TEST(ConvFused, MatchesTheTwoTemplatesInSequence) {
  const std::vector<Shape> shapes = {{1, 16, 96, 16, 16, 2},
                                     {1, 24, 144, 12, 13, 1},
                                     {1, 32, 192, 9, 9, 1},
                                     {1, 64, 384, 14, 14, 2},
                                     {1, 160, 960, 7, 7, 1}};
  uint64_t seed = 40;
  for (const Shape &s : shapes) {
    SCOPED_TRACE(std::to_string(s.ic) + "->" + std::to_string(s.c));
    ops::Task fused(kFused, fused_args(s, relu6(), relu6()), kTarget);
    const autotune::Config cfg = fused.default_config();
    const int64_t icb = cfg.split("tile_ic").back(), cb = cfg.split("tile_c").back();
    Json a1 = Json::object({{"data", tensor({s.n, s.ic, s.h, s.w})},
                            {"kernel", tensor({s.c, s.ic, 1, 1})},
                            {"ic_bn", icb},
                            {"oc_bn", cb},
                            {"epilogue", relu6()}});
    Json a2 = Json::object({{"data", tensor({s.n, s.c, s.h, s.w})},
                            {"kernel", tensor({s.c, 1, 3, 3})},
                            {"strides", s.stride},
                            {"padding", 1},
                            {"c_bn", cb},
                            {"epilogue", relu6()}});
    ops::Task expand("conv2d_nchwc.x86", a1, kTarget), depthwise("depthwise_conv2d_nchwc.x86", a2, kTarget);
    std::vector<deploy::Tensor> in = testing::make_inputs(fused.compute(cfg), ++seed);
    // Fused inputs: data, expand kernel, depthwise kernel, expand bias, depthwise bias.
    std::vector<deploy::Tensor> mid = testing::run_config_llvm(expand, expand.default_config(), {in[0], in[1], in[3]});
    std::vector<deploy::Tensor> two =
        testing::run_config_llvm(depthwise, depthwise.default_config(), {mid[0], in[2], in[4]});
    std::vector<deploy::Tensor> one = testing::run_config_llvm(fused, cfg, in);
    ASSERT_EQ(one[0].shape(), two[0].shape());
    const Host want = testing::to_host(two[0]);
    EXPECT_LE(testing::rel_error(want, one[0]), 1e-5);
    // And not trivially: ReLU6 leaves values on both sides of its bounds.
    int zeros = 0, sixes = 0, between = 0;
    for (double v : want.data) (v == 0 ? zeros : v == 6 ? sixes : between)++;
    EXPECT_GT(zeros, 0);
    EXPECT_GT(between, 0);
  }
}

// The default config keeps both register tiles within the vector registers, shares the expanded
// block between the two stages, and cuts the rows into bands (more than one for a 112x112 input).
TEST(ConvFused, DefaultConfigBandsTheRows) {
  ops::Task task(kFused, fused_args({1, 16, 96, 112, 112, 2}, relu6(), relu6()), kTarget);
  const autotune::Config cfg = task.default_config();
  EXPECT_EQ(cfg.split("tile_c").back(), 32);
  EXPECT_GT(cfg.split("tile_band")[0], 1);
  EXPECT_TRUE(task.space().is_valid(cfg));
}

// At 14x14 and 7x7 the 1x1 stage's register tile is 7 columns, as conv2d_nchwc.x86's one-row
// tile: a whole 7-wide row, two tiles of a 14-wide one, no tail tile; the values match the float64
// reference at strides 1 and 2, with and without epilogues.
TEST(ConvFused, SmallWidthsTakeTheSeparateTemplatesColumns) {
  const std::vector<Shape> shapes = {
      {1, 96, 576, 14, 14, 1}, {1, 96, 576, 14, 14, 2}, {1, 160, 960, 7, 7, 1}, {1, 32, 64, 7, 7, 2}};
  uint64_t seed = 70;
  for (const Shape &s : shapes) {
    SCOPED_TRACE(std::to_string(s.ic) + "->" + std::to_string(s.c) + " at " + std::to_string(s.w) + " stride " +
                 std::to_string(s.stride));
    ops::Task task(kFused, fused_args(s, relu6(), relu6()), kTarget);
    const autotune::Config cfg = task.default_config();
    EXPECT_EQ(cfg.choice_int("expand_cols"), 7);
    EXPECT_TRUE(task.space().is_valid(cfg));
    for (bool epilogues : {true, false}) {
      ops::Task t2(kFused, fused_args(s, epilogues ? relu6() : Json::array(), epilogues ? relu6() : Json::array()),
                   kTarget);
      check_configs(s, epilogues, {t2.default_config()}, ++seed, 5e-5);
    }
  }
}

// The default bands share the rows out evenly: 56 rows whose band may hold 50 are two bands of 28
// (a band of 50 and one of 6 kept one of two threads waiting on the other's last large band), 28
// strided rows two of 14; the values match the reference.
TEST(ConvFused, DefaultBandsAreEven) {
  for (const Shape &s : {Shape{1, 24, 144, 56, 56, 1}, Shape{1, 24, 144, 56, 56, 2}}) {
    SCOPED_TRACE("stride " + std::to_string(s.stride));
    ops::Task task(kFused, fused_args(s, relu6(), relu6()), kTarget);
    const autotune::Config cfg = task.default_config();
    const int64_t oh = 56 / s.stride;
    EXPECT_EQ(cfg.split("tile_band"), (std::vector<int64_t>{2, oh / 2}));
    check_configs(s, true, {cfg}, 90 + static_cast<uint64_t>(s.stride));
  }
}

// Threads share out bands of rows, each band across every channel block: the first of two threads
// writes the top half of every block, the rows the 1x1 layers before and after it write and read
// on that thread (a row read from another core's cache costs several times one from its own).
TEST(ConvFused, ThreadsShareBandsAcrossEveryChannelBlock) {
  ops::Task task(kFused, fused_args({1, 24, 144, 56, 56, 1}, relu6(), relu6()), kTarget);
  const autotune::Config cfg = task.default_config();
  ASSERT_EQ(cfg.split("tile_band")[0] % 2, 0) << cfg.to_json();
  deploy::Tensor out = testing::first_thread_share(task, cfg, 2)[0];
  ASSERT_GT(out.shape()[1], 1);
  EXPECT_EQ(testing::written_rows(out), testing::first_rows_of_every_block(out.shape()[1], 56, 28));
}

TEST(ConvFused, RejectsArgumentsThatAreNotAPair) {
  auto error_of = [](Json args) {
    try {
      ops::Registry::builtin().workload(kFused, args);
    } catch (const ops::OpError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Json not_1x1 = fused_args({1, 16, 96, 8, 8, 1}, Json::array(), Json::array());
  not_1x1.set("expand_kernel", tensor({96, 16, 3, 3}));
  EXPECT_NE(error_of(not_1x1).find("expand_kernel must be [C, 16, 1, 1]"), std::string::npos) << error_of(not_1x1);
  Json channels = fused_args({1, 16, 96, 8, 8, 1}, Json::array(), Json::array());
  channels.set("depthwise_kernel", tensor({64, 1, 3, 3}));
  EXPECT_NE(error_of(channels).find("depthwise_kernel must be [96, 1, KH, KW]"), std::string::npos)
      << error_of(channels);
  Json ints = fused_args({1, 16, 96, 8, 8, 1}, Json::array(), Json::array());
  ints.set("data", tensor({1, 16, 8, 8}, "int8"));
  EXPECT_NE(error_of(ints).find("the inputs must be float"), std::string::npos) << error_of(ints);
  Json block = fused_args({1, 16, 96, 8, 8, 1}, Json::array(), Json::array());
  block.set("c_bn", 7);
  EXPECT_NE(error_of(block).find("c_bn must divide the expanded channels"), std::string::npos) << error_of(block);
}

}  // namespace
}  // namespace kiln
