// Convolution templates against naive C++ convolutions: padding, stride, dilation and groups;
// NCHWc with the layouts packed and unpacked by the test; depthwise; transposed; int8 with int32
// accumulation; the default config and sampled configs, through the C back end.
#include <gtest/gtest.h>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::Host;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");

struct ConvParams {
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1, groups = 1;
};

// One stride along both axes and the padding as [top, left, bottom, right].
ConvParams strided_padded(int64_t stride, const std::vector<int64_t> &pad) {
  ConvParams p;
  p.sh = p.sw = stride;
  p.pt = pad[0];
  p.pl = pad[1];
  p.pb = pad[2];
  p.pr = pad[3];
  return p;
}

Json conv_args(const std::vector<int64_t> &data, const std::vector<int64_t> &kernel, const ConvParams &p,
               const Json &epi = Json::array(), const std::string &dtype = "float32",
               const std::string &kdtype = "float32") {
  return Json::object({{"data", tensor(data, dtype)},
                       {"kernel", tensor(kernel, kdtype)},
                       {"strides", Json::array_of(std::vector<int64_t>{p.sh, p.sw})},
                       {"padding", Json::array_of(std::vector<int64_t>{p.pt, p.pl, p.pb, p.pr})},
                       {"dilation", Json::array_of(std::vector<int64_t>{p.dh, p.dw})},
                       {"epilogue", epi}});
}

// out[n, oc, y, x] = sum over ic in oc's group, kh, kw of data[n, ic, y*s + kh*d - p, ...] * w[oc, ic', kh, kw].
Host naive_conv(const Host &x, const Host &w, const ConvParams &p) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OC = w.shape[0], ICG = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH = (H + p.pt + p.pb - (KH - 1) * p.dh - 1) / p.sh + 1;
  const int64_t OW = (W + p.pl + p.pr - (KW - 1) * p.dw - 1) / p.sw + 1;
  const int64_t ocpg = OC / p.groups;
  (void)C;
  Host out({N, OC, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t xx = 0; xx < OW; ++xx) {
          double acc = 0;
          for (int64_t ic = 0; ic < ICG; ++ic)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iy = y * p.sh + kh * p.dh - p.pt, ix = xx * p.sw + kw * p.dw - p.pl;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t ch = (oc / ocpg) * ICG + ic;
                acc += x.at({n, ch, iy, ix}) * w.at({oc, ic, kh, kw});
              }
          out.at({n, oc, y, xx}) = acc;
        }
  return out;
}

Host channel_epilogue(const Host &x, const Json &epi, const std::vector<Host> &extra) {
  return testing::apply_epilogue(x, epi, extra, [](const std::vector<int64_t> &i) { return i[1]; });
}

void check_nchw(const std::vector<int64_t> &data, const std::vector<int64_t> &kernel, const ConvParams &p,
                const Json &epi, int samples, uint64_t seed) {
  Json args = conv_args(data, kernel, p, epi);
  args.set("groups", p.groups);
  ops::Task task("conv2d_nchw.x86", args, kTarget);
  testing::check_against_reference(
      task, testing::test_configs(task, samples, seed),
      [&](const std::vector<Host> &in) {
        return channel_epilogue(naive_conv(in[0], in[1], p), epi, std::vector<Host>(in.begin() + 2, in.end()));
      },
      1e-5);
}

TEST(Conv2d, NchwPaddingStrideDilation) {
  ConvParams p;
  p.pt = 1;
  p.pl = 2;
  p.pb = 0;
  p.pr = 1;
  check_nchw({1, 3, 9, 10}, {8, 3, 3, 3}, p, Json::array(), 2, 21);
  ConvParams q;
  q.sh = 2;
  q.sw = 2;
  q.pt = q.pl = q.pb = q.pr = 1;
  q.dh = 2;
  q.dw = 1;
  check_nchw({2, 4, 11, 9}, {6, 4, 3, 2}, q, Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()}), 2, 22);
}

TEST(Conv2d, NchwGroupsAndResidual) {
  ConvParams p;
  p.groups = 2;
  p.pt = p.pl = p.pb = p.pr = 1;
  check_nchw({1, 4, 6, 7}, {6, 2, 3, 3}, p, Json::array({ops::epilogue::add(), ops::epilogue::clip(-4, 4)}), 2, 23);
}

TEST(Conv2d, NchwOneByOne) {
  ConvParams p;
  check_nchw({1, 8, 5, 6}, {16, 8, 1, 1}, p, Json::array({ops::epilogue::bias_add()}), 2, 24);
}

// NCHWc: the test packs the NCHW data and OIHW kernel into the blocked layouts the config chose,
// runs, unpacks the NCHW[oc_bn]c output and compares with the naive NCHW convolution.
void check_nchwc_configs(const ops::Task &task, const std::vector<int64_t> &data, const std::vector<int64_t> &kernel,
                         const ConvParams &p, const Json &epi, const std::vector<autotune::Config> &configs,
                         uint64_t seed, double tol, bool llvm = false) {
  const int64_t N = data[0], C = data[1], H = data[2], W = data[3], OC = kernel[0], KH = kernel[2], KW = kernel[3];
  for (const auto &cfg : configs) {
    SCOPED_TRACE(cfg.to_string());
    const int64_t ib = cfg.split("tile_ic").back(), ob = cfg.split("tile_oc").back();
    ops::Compute c = task.compute(cfg);
    std::vector<deploy::Tensor> in = testing::make_inputs(c, seed);
    Host x({N, C, H, W}), w({OC, C, KH, KW});
    Host xb = testing::to_host(in[0]), wb = testing::to_host(in[1]);
    testing::for_each_index(x.shape, [&](const std::vector<int64_t> &i) {
      x.at(i) = xb.at({i[0], i[1] / ib, i[2], i[3], i[1] % ib});
    });
    testing::for_each_index(w.shape, [&](const std::vector<int64_t> &i) {
      w.at(i) = wb.at({i[0] / ob, i[1] / ib, i[2], i[3], i[1] % ib, i[0] % ob});
    });
    Host ref = naive_conv(x, w, p);
    // Epilogue inputs: the bias is [OC]; a residual has the blocked output shape.
    std::vector<Host> extra;
    for (size_t k = 2; k < in.size(); ++k) {
      Host e = testing::to_host(in[k]);
      if (e.shape.size() == 5) {
        Host u(ref.shape);
        testing::for_each_index(u.shape, [&](const std::vector<int64_t> &i) {
          u.at(i) = e.at({i[0], i[1] / ob, i[2], i[3], i[1] % ob});
        });
        e = u;
      }
      extra.push_back(e);
    }
    ref = channel_epilogue(ref, epi, extra);
    auto outs = llvm ? testing::run_config_llvm(task, cfg, in) : testing::run_config(task, cfg, in);
    Host got_b = testing::to_host(outs[0]);
    ASSERT_EQ(got_b.shape, (std::vector<int64_t>{N, OC / ob, ref.shape[2], ref.shape[3], ob}));
    double worst = 0;
    testing::for_each_index(ref.shape, [&](const std::vector<int64_t> &i) {
      double g = got_b.at({i[0], i[1] / ob, i[2], i[3], i[1] % ob});
      worst =
          std::max(worst, std::isnan(g) ? INFINITY : std::fabs(g - ref.at(i)) / std::max(1.0, std::fabs(ref.at(i))));
    });
    EXPECT_LE(worst, tol);
  }
}

void check_nchwc(const std::vector<int64_t> &data, const std::vector<int64_t> &kernel, const ConvParams &p,
                 const Json &epi, const std::string &dtype, const std::string &kdtype, int samples, uint64_t seed,
                 double tol) {
  ops::Task task("conv2d_nchwc.x86", conv_args(data, kernel, p, epi, dtype, kdtype), kTarget);
  check_nchwc_configs(task, data, kernel, p, epi, testing::test_configs(task, samples, seed), seed, tol);
}

TEST(Conv2d, NchwcBlockedLayouts) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  check_nchwc({1, 8, 7, 9}, {16, 8, 3, 3}, p, Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()}),
              "float32", "float32", 3, 31, 1e-5);
  ConvParams q;
  q.sh = q.sw = 2;
  q.pt = q.pl = 1;
  q.dh = q.dw = 1;
  check_nchwc({2, 4, 9, 8}, {8, 4, 3, 3}, q, Json::array({ops::epilogue::add()}), "float32", "float32", 2, 32, 1e-5);
}

TEST(Conv2d, NchwcDilatedWithTailTiles) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 2;
  p.dh = p.dw = 2;
  ops::Task task("conv2d_nchwc.x86", conv_args({1, 4, 7, 9}, {8, 4, 3, 3}, p), kTarget);
  // tile_ow = [3, 4] covers the 9 output columns with a tail.
  auto cfg = task.space().from_values({{"tile_ic", Json::array_of(std::vector<int64_t>{2, 2})},
                                       {"tile_oc", Json::array_of(std::vector<int64_t>{1, 8})},
                                       {"tile_ow", Json::array_of(std::vector<int64_t>{3, 4})},
                                       {"unroll_kw", 1}});
  check_nchwc_configs(task, {1, 4, 7, 9}, {8, 4, 3, 3}, p, Json::array(), {cfg, task.default_config()}, 35, 1e-5);
}

// The prefetch of the next oc block's weights, through the LLVM back end (the one that emits
// it): the values stay those of the naive convolution, with and without kw unrolled, with a
// stride, with two images (the last block of one image prefetches the first of the next) and
// int8 weights (64 to a cache line).
TEST(Conv2d, NchwcPrefetchedWeightsKeepTheValues) {
  struct Case {
    std::vector<int64_t> data, kernel;
    ConvParams p;
    std::string dtype, kdtype;
    int64_t ic_bn, oc_bn, ow_tile;
  };
  ConvParams pad1 = strided_padded(1, {1, 1, 1, 1}), stride2 = strided_padded(2, {1, 1, 0, 0});
  for (const Case &k : {Case{{1, 32, 7, 7}, {64, 32, 3, 3}, pad1, "float32", "float32", 16, 16, 7},
                        Case{{1, 16, 9, 9}, {32, 16, 3, 3}, stride2, "float32", "float32", 8, 16, 4},
                        Case{{2, 8, 6, 5}, {32, 8, 3, 3}, ConvParams{}, "float32", "float32", 8, 8, 3},
                        Case{{1, 16, 6, 6}, {32, 16, 3, 3}, pad1, "uint8", "int8", 16, 16, 6}}) {
    ops::Task task("conv2d_nchwc.x86", conv_args(k.data, k.kernel, k.p, Json::array(), k.dtype, k.kdtype), kTarget);
    const int64_t OW = testing::const_shape(task.compute(task.default_config()).outputs[0])[3];
    std::vector<autotune::Config> configs;
    for (int unroll : {0, 1}) {
      configs.push_back(task.space().from_values(
          {{"tile_ic", Json::array_of(std::vector<int64_t>{k.data[1] / k.ic_bn, k.ic_bn})},
           {"tile_oc", Json::array_of(std::vector<int64_t>{k.kernel[0] / k.oc_bn, k.oc_bn})},
           {"tile_ow", Json::array_of(std::vector<int64_t>{(OW + k.ow_tile - 1) / k.ow_tile, k.ow_tile})},
           {"unroll_kw", unroll},
           {"prefetch_weights", 1}}));
    }
    check_nchwc_configs(task, k.data, k.kernel, k.p, Json::array(), configs, 41, k.dtype == "float32" ? 1e-5 : 0.0,
                        /*llvm=*/true);
  }
}

// The knob puts llvm.prefetch in the kernel and nothing else does; the default turns it on from 1
// MiB of weights (layer 4 of ResNet-18), off below (layer 1), and never for 1x1 kernels.
TEST(Conv2d, NchwcPrefetchWeightsKnobAndDefault) {
  ConvParams pad1 = strided_padded(1, {1, 1, 1, 1});
  ops::Task big("conv2d_nchwc.x86", conv_args({1, 512, 7, 7}, {512, 512, 3, 3}, pad1), kTarget);
  ops::Task small("conv2d_nchwc.x86", conv_args({1, 64, 56, 56}, {64, 64, 3, 3}, pad1), kTarget);
  ops::Task one("conv2d_nchwc.x86", conv_args({1, 256, 14, 14}, {1024, 256, 1, 1}, ConvParams{}), kTarget);
  EXPECT_TRUE(big.default_config().choice_bool("prefetch_weights"));
  EXPECT_FALSE(small.default_config().choice_bool("prefetch_weights"));
  EXPECT_FALSE(one.space().has_knob("prefetch_weights"));

  auto prefetches = [](const ops::Task &task, const autotune::Config &cfg) {
    ops::Instance inst = task.instantiate(cfg);
    ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
    codegen::LLVMBuildOptions o;
    o.target = "llvm -mcpu=znver4";
    const std::string text = codegen::emit_llvm_ir({f}, o, false);
    int n = 0;
    for (size_t p = text.find("call void @llvm.prefetch"); p != std::string::npos;
         p = text.find("call void @llvm.prefetch", p + 1))
      ++n;
    return n;
  };
  ops::Task mid("conv2d_nchwc.x86", conv_args({1, 32, 7, 7}, {64, 32, 3, 3}, pad1), kTarget);
  autotune::Config on = mid.default_config(), off = mid.default_config();
  std::vector<std::pair<std::string, Json>> v;
  for (const auto &name : {"tile_ic", "tile_oc", "tile_ow"}) {
    v.emplace_back(name, Json::array_of(on.split(name)));
  }
  v.emplace_back("unroll_kw", Json(on.choice_bool("unroll_kw") ? 1 : 0));
  v.emplace_back("prefetch_weights", 1);
  on = mid.space().from_values(v);
  v.back().second = Json(0);
  off = mid.space().from_values(v);
  EXPECT_GE(prefetches(mid, on), 1);
  EXPECT_EQ(prefetches(mid, off), 0);
}

TEST(Conv2d, TailTilesOfNchwAndInt8) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::requantize(0.1, 0, "uint8")});
  for (const char *dt : {"float32", "int8"}) {
    Json args = conv_args({1, 3, 9, 11}, {4, 3, 3, 3}, p, std::string(dt) == "int8" ? epi : Json::array(), dt, dt);
    ops::Task task("conv2d_nchw.x86", args, kTarget);
    // Columns 11 = 3 x 4 with a tail; rows 9 = 3 x 3.
    auto tail = task.space().from_values({{"tile_oc", Json::array_of(std::vector<int64_t>{2, 2})},
                                          {"tile_oh", Json::array_of(std::vector<int64_t>{3, 3})},
                                          {"tile_ow", Json::array_of(std::vector<int64_t>{3, 4})},
                                          {"unroll_kw", 1}});
    const Json e = task.workload().args["epilogue"];
    testing::check_against_reference(
        task, {tail, task.default_config()},
        [&](const std::vector<Host> &in) {
          return channel_epilogue(naive_conv(in[0], in[1], p), e, std::vector<Host>(in.begin() + 2, in.end()));
        },
        0.0 + (std::string(dt) == "int8" ? 0.0 : 1e-5));
  }
}

TEST(Conv2d, NchwcOneByOneUsesTileOh) {
  ConvParams p;
  ops::Task task("conv2d_nchwc.x86", conv_args({1, 16, 6, 6}, {32, 16, 1, 1}, p), kTarget);
  EXPECT_TRUE(task.space().has_knob("tile_oh"));
  EXPECT_FALSE(task.space().has_knob("unroll_kw"));
  check_nchwc({1, 16, 6, 6}, {32, 16, 1, 1}, p, Json::array(), "float32", "float32", 3, 33, 1e-5);
}

// The default config of every vector width, on odd shapes: 3 input channels, 7 and prime output
// widths, 1x1 and 7x7 kernels, channel counts that are not multiples of the vector.
// Threads share out a 1x1 convolution by rows where its weights are no larger than its input: the
// first of two threads writes the top half of every output channel block, the rows it wrote in the
// layer before and reads in the layer after (a row read from another core's cache costs several
// times one from its own). Where the weights are larger (late, narrow layers), it writes the first
// half of the channel blocks, every row, so each thread keeps to half the weights.
TEST(Conv2d, NchwcOneByOneThreadsShareRowsUnlessTheWeightsAreLarger) {
  ConvParams p;
  ops::Task wide("conv2d_nchwc.x86", conv_args({1, 64, 28, 28}, {96, 64, 1, 1}, p), kTarget);
  const autotune::Config cfg = wide.default_config();
  ASSERT_EQ(28 % (2 * cfg.choice_int("tile_oh")), 0) << cfg.to_json();  // an even number of row tiles
  deploy::Tensor out = testing::first_thread_share(wide, cfg, 2)[0];
  const int64_t blocks = out.shape()[1];
  ASSERT_GT(blocks, 1);
  EXPECT_EQ(testing::written_rows(out), testing::first_rows_of_every_block(blocks, 28, 14));

  ops::Task narrow("conv2d_nchwc.x86", conv_args({1, 320, 7, 7}, {640, 320, 1, 1}, p), kTarget);
  out = testing::first_thread_share(narrow, narrow.default_config(), 2)[0];
  const int64_t nb = out.shape()[1];
  ASSERT_EQ(nb % 2, 0);
  std::vector<std::string> want(static_cast<size_t>(nb), ".......");
  for (int64_t b = 0; b < nb / 2; ++b) want[static_cast<size_t>(b)] = "#######";
  EXPECT_EQ(testing::written_rows(out), want);
}

TEST(Conv2d, NchwcDefaultsAcrossVectorWidths) {
  struct Case {
    std::vector<int64_t> data, kernel;
    int64_t stride, pad;
  };
  const std::vector<Case> cases = {{{1, 3, 20, 20}, {24, 3, 7, 7}, 2, 3},
                                   {{1, 12, 7, 7}, {40, 12, 3, 3}, 1, 1},
                                   {{1, 20, 13, 13}, {48, 20, 1, 1}, 1, 0},
                                   {{1, 32, 14, 14}, {64, 32, 1, 1}, 2, 0},
                                   {{1, 64, 9, 9}, {64, 64, 3, 3}, 2, 1}};
  for (const char *target : {"llvm -mcpu=znver4", "llvm -mcpu=haswell", "llvm"}) {
    for (const Case &k : cases) {
      ConvParams p;
      p.sh = p.sw = k.stride;
      p.pt = p.pl = p.pb = p.pr = k.pad;
      ops::Task task("conv2d_nchwc.x86", conv_args(k.data, k.kernel, p), driver::resolve_target(target));
      SCOPED_TRACE(std::string(target) + " " + task.default_config().to_string());
      // The default output block is a vector block (whole vectors or a part of one), the block the
      // layout pass gives the conv in a graph: 24 channels take 8 (not 24) at every width.
      const int64_t lanes = task.target().lanes(ir::Float(32)), oc = task.default_config().split("tile_oc").back();
      EXPECT_TRUE(ops::vector_block(oc, lanes)) << oc;
      if (k.kernel[0] == 24) {
        EXPECT_EQ(oc, 8);
      }
      check_nchwc_configs(task, k.data, k.kernel, p, Json::array(), {task.default_config()}, 36, 1e-5);
    }
  }
}

// The stem family: 3 input channels, stride 2, 3x3 kernels, odd output widths that few small tile
// widths divide (13 and 11 are prime, 111 = 3 x 37), with and without padding. The default config
// of every vector width (a power-of-two tile with a tail tile where the width's divisors are too
// small), sampled configs and a tail of one column, against the naive convolution.
TEST(Conv2d, NchwcStemShapes) {
  struct Case {
    std::vector<int64_t> data, kernel;
    std::vector<int64_t> pad;  // top, left, bottom, right
  };
  const std::vector<Case> cases = {{{1, 3, 27, 27}, {64, 3, 3, 3}, {0, 0, 0, 0}},
                                   {{1, 3, 25, 25}, {64, 3, 3, 3}, {1, 1, 1, 1}},
                                   {{1, 3, 24, 23}, {32, 3, 3, 3}, {0, 1, 1, 0}},
                                   {{1, 3, 224, 224}, {64, 3, 3, 3}, {0, 0, 0, 0}}};
  uint64_t seed = 80;
  for (const Case &k : cases) {
    const ConvParams p = strided_padded(2, k.pad);
    const Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
    const bool small = k.data[2] < 100;
    for (const char *target : {"llvm -mcpu=znver4", "llvm -mcpu=haswell"}) {
      if (!small && std::string(target) != "llvm -mcpu=znver4") continue;  // the full stem: one width
      ops::Task task("conv2d_nchwc.x86", conv_args(k.data, k.kernel, p, epi), driver::resolve_target(target));
      const autotune::Config def = task.default_config();
      SCOPED_TRACE(std::string(target) + " " + task.workload().args.dump() + " " + def.to_string());
      const int64_t ow = (k.data[3] + k.pad[1] + k.pad[3] - 3) / 2 + 1;
      const auto tow = def.split("tile_ow");
      EXPECT_GE(tow[0] * tow[1], ow);
      EXPECT_LT((tow[0] - 1) * tow[1], ow);
      std::vector<autotune::Config> configs = {def};
      if (small) {
        for (const auto &c : testing::test_configs(task, 3, ++seed)) configs.push_back(c);
        configs.push_back(
            task.space().from_values({{"tile_ic", Json::array_of(std::vector<int64_t>{1, 3})},
                                      {"tile_oc", Json::array_of(std::vector<int64_t>{2, k.kernel[0] / 2})},
                                      {"tile_ow", Json::array_of(std::vector<int64_t>{(ow + 3) / 4, 4})},
                                      {"unroll_kw", 1}}));
      }
      check_nchwc_configs(task, k.data, k.kernel, p, epi, configs, seed, 1e-5);
    }
  }
}

// The taps in the zero padding are skipped (bounds checks that loop partitioning turns into border
// and interior regions) rather than read from a padded copy: padding of 1 to 3 on small inputs
// (7x7, 4x4), kernels 1 to 7, strides 1 and 2, uneven padding, windows that cross both borders at
// once, and 1x1 kernels whose border outputs see only padding. Each case runs the default config,
// sampled ones and one-column tiles (several border tiles at each end).
TEST(Conv2d, NchwcPaddedBorders) {
  struct Case {
    std::vector<int64_t> data, kernel;
    int64_t stride;
    std::vector<int64_t> pad;  // top, left, bottom, right
  };
  const std::vector<Case> cases = {
      {{1, 8, 7, 7}, {16, 8, 3, 3}, 1, {1, 1, 1, 1}},   {{1, 8, 4, 4}, {8, 8, 3, 3}, 1, {1, 1, 1, 1}},
      {{1, 4, 4, 4}, {8, 4, 7, 7}, 1, {3, 3, 3, 3}},    {{1, 4, 4, 4}, {8, 4, 5, 5}, 2, {2, 2, 2, 2}},
      {{1, 3, 9, 9}, {8, 3, 7, 7}, 2, {3, 3, 3, 3}},    {{1, 8, 7, 7}, {8, 8, 1, 1}, 1, {1, 1, 1, 1}},
      {{1, 8, 4, 4}, {16, 8, 1, 1}, 2, {2, 2, 2, 2}},   {{1, 8, 8, 8}, {8, 8, 3, 3}, 2, {1, 1, 1, 1}},
      {{2, 4, 7, 7}, {8, 4, 5, 5}, 2, {2, 2, 2, 2}},    {{1, 4, 6, 5}, {8, 4, 3, 3}, 1, {0, 2, 3, 1}},
      {{1, 8, 14, 14}, {16, 8, 3, 3}, 1, {1, 1, 1, 1}}, {{1, 4, 7, 7}, {8, 4, 3, 3}, 2, {2, 1, 0, 3}}};
  uint64_t seed = 60;
  for (const Case &k : cases) {
    const ConvParams p = strided_padded(k.stride, k.pad);
    const Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
    ops::Task task("conv2d_nchwc.x86", conv_args(k.data, k.kernel, p, epi), kTarget);
    std::vector<autotune::Config> configs = testing::test_configs(task, 4, ++seed);
    std::vector<std::pair<std::string, Json>> one_column = {
        {"tile_ic", Json::array_of(std::vector<int64_t>{k.data[1], 1})},
        {"tile_oc", Json::array_of(std::vector<int64_t>{1, k.kernel[0]})},
        {"tile_ow",
         Json::array_of(std::vector<int64_t>{testing::const_shape(task.compute(configs[0]).outputs[0])[3], 1})}};
    one_column.emplace_back(k.kernel[2] == 1 && k.kernel[3] == 1 ? "tile_oh" : "unroll_kw", Json(1));
    configs.push_back(task.space().from_values(one_column));
    SCOPED_TRACE(task.workload().args.dump());
    check_nchwc_configs(task, k.data, k.kernel, p, epi, configs, seed, 1e-5);
  }
}

// A lowered kernel has neither a padded copy of its input nor a guard left once the register tile
// covers the output row: the border's taps are gone, not multiplied by zero.
TEST(Conv2d, NchwcBordersLowerWithoutGuards) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  for (int64_t n_oc : {int64_t{16}, int64_t{64}}) {
    ops::Task task("conv2d_nchwc.x86", conv_args({1, 16, 7, 7}, {n_oc, 16, 3, 3}, p), kTarget);
    auto cfg = task.space().from_values({{"tile_ic", Json::array_of(std::vector<int64_t>{1, 16})},
                                         {"tile_oc", Json::array_of(std::vector<int64_t>{n_oc / 16, 16})},
                                         {"tile_ow", Json::array_of(std::vector<int64_t>{1, 7})},
                                         {"unroll_kw", 1}});
    ir::LoweredFunc f = task.lower(cfg);
    int guards = 0, allocations = 0;
    ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
      guards += n->node_type == ir::NodeType::IfThenElse;
      allocations += n->node_type == ir::NodeType::Allocate;
    });
    EXPECT_EQ(guards, 0) << f;
    // One accumulator per copy of the tile loop (the first, last and inner rows when the output
    // channels are one block), and nothing else.
    EXPECT_LE(allocations, n_oc == 16 ? 3 : 1) << f;
  }
}

TEST(Conv2d, NchwcInt8Requantized) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::requantize(0.03, -2, "int8")});
  check_nchwc({1, 8, 5, 6}, {8, 8, 3, 3}, p, epi, "uint8", "int8", 2, 34, 0.0);
}

TEST(Conv2d, NchwcFixedBlocksAndSpaceSizes) {
  // AutoTVM's x86 conv2d_NCHWc space sizes for ResNet-18 layers (batch 1), times two for the
  // prefetch_weights knob.
  struct Layer {
    int64_t c, oc, hw, k, s, p, size;
  };
  for (const Layer &l : {Layer{3, 64, 224, 7, 2, 3, 2 * 308}, Layer{64, 64, 56, 3, 1, 1, 2 * 980},
                         Layer{128, 128, 28, 3, 1, 1, 2 * 1024}, Layer{256, 256, 14, 3, 1, 1, 2 * 972},
                         Layer{512, 512, 7, 3, 1, 1, 2 * 800}}) {
    ConvParams p;
    p.sh = p.sw = l.s;
    p.pt = p.pl = p.pb = p.pr = l.p;
    ops::Task task("conv2d_nchwc.x86", conv_args({1, l.c, l.hw, l.hw}, {l.oc, l.c, l.k, l.k}, p), kTarget);
    EXPECT_EQ(task.space().size(), l.size) << l.c << "->" << l.oc;
  }
  ConvParams p;
  Json args = conv_args({1, 32, 8, 8}, {64, 32, 3, 3}, p);
  args.set("ic_bn", 8);
  args.set("oc_bn", 16);
  ops::Task task("conv2d_nchwc.x86", args, kTarget);
  EXPECT_EQ(task.space().knob("tile_ic").size(), 1);
  auto c = task.compute(task.default_config());
  EXPECT_EQ(testing::const_shape(c.inputs[0]), (std::vector<int64_t>{1, 4, 8, 8, 8}));
  EXPECT_EQ(testing::const_shape(c.outputs[0]), (std::vector<int64_t>{1, 4, 6, 6, 16}));
}

Host naive_depthwise(const Host &x, const Host &w, const ConvParams &p) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH = (H + p.pt + p.pb - (KH - 1) * p.dh - 1) / p.sh + 1;
  const int64_t OW = (W + p.pl + p.pr - (KW - 1) * p.dw - 1) / p.sw + 1;
  Host out({N, C * M, OH, OW});
  testing::for_each_index(out.shape, [&](const std::vector<int64_t> &i) {
    const int64_t c = i[1] / M, q = i[1] % M;
    double acc = 0;
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        int64_t iy = i[2] * p.sh + kh * p.dh - p.pt, ix = i[3] * p.sw + kw * p.dw - p.pl;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) acc += x.at({i[0], c, iy, ix}) * w.at({c, q, kh, kw});
      }
    out.at(i) = acc;
  });
  return out;
}

TEST(Conv2d, DepthwiseWithMultiplier) {
  ConvParams p;
  p.sh = 2;
  p.sw = 1;
  p.pt = p.pl = p.pb = p.pr = 1;
  p.dw = 2;
  for (int64_t m : {int64_t{1}, int64_t{2}}) {
    Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::clip(0, 6)});
    ops::Task task("depthwise_conv2d_nchw.x86", conv_args({1, 3, 9, 12}, {3, m, 3, 3}, p, epi), kTarget);
    testing::check_against_reference(
        task, testing::test_configs(task, 2, 40 + static_cast<uint64_t>(m)),
        [&](const std::vector<Host> &in) {
          return channel_epilogue(naive_depthwise(in[0], in[1], p), epi, std::vector<Host>(in.begin() + 2, in.end()));
        },
        1e-5);
  }
}

// Depthwise NCHWc: the test packs the NCHW data and [C, 1, KH, KW] kernel into the blocked layouts
// the config chose, runs, unpacks the NCHW[c_bn]c output and compares with the naive depthwise
// convolution.
void check_depthwise_nchwc(const ops::Task &task, const std::vector<int64_t> &data, const std::vector<int64_t> &kernel,
                           const ConvParams &p, const Json &epi, const std::vector<autotune::Config> &configs,
                           uint64_t seed) {
  const int64_t N = data[0], C = data[1], H = data[2], W = data[3], KH = kernel[2], KW = kernel[3];
  for (const auto &cfg : configs) {
    SCOPED_TRACE(cfg.to_string());
    const int64_t cb = cfg.split("tile_c").back();
    ops::Compute c = task.compute(cfg);
    std::vector<deploy::Tensor> in = testing::make_inputs(c, seed);
    Host xb = testing::to_host(in[0]), wb = testing::to_host(in[1]);
    ASSERT_EQ(xb.shape, (std::vector<int64_t>{N, C / cb, H, W, cb}));
    ASSERT_EQ(wb.shape, (std::vector<int64_t>{C / cb, 1, KH, KW, 1, cb}));
    Host x({N, C, H, W}), w({C, 1, KH, KW});
    testing::for_each_index(x.shape, [&](const std::vector<int64_t> &i) {
      x.at(i) = xb.at({i[0], i[1] / cb, i[2], i[3], i[1] % cb});
    });
    testing::for_each_index(w.shape, [&](const std::vector<int64_t> &i) {
      w.at(i) = wb.at({i[0] / cb, 0, i[2], i[3], 0, i[0] % cb});
    });
    std::vector<Host> extra;
    for (size_t k = 2; k < in.size(); ++k) extra.push_back(testing::to_host(in[k]));
    Host ref = channel_epilogue(naive_depthwise(x, w, p), epi, extra);
    Host got_b = testing::to_host(testing::run_config(task, cfg, in)[0]);
    ASSERT_EQ(got_b.shape, (std::vector<int64_t>{N, C / cb, ref.shape[2], ref.shape[3], cb}));
    double worst = 0;
    testing::for_each_index(ref.shape, [&](const std::vector<int64_t> &i) {
      double g = got_b.at({i[0], i[1] / cb, i[2], i[3], i[1] % cb});
      worst =
          std::max(worst, std::isnan(g) ? INFINITY : std::fabs(g - ref.at(i)) / std::max(1.0, std::fabs(ref.at(i))));
    });
    EXPECT_LE(worst, 1e-5);
  }
}

TEST(Conv2d, DepthwiseNchwcBlockedLayouts) {
  // Padding on every side, then stride 2 with uneven padding and dilation; tail tiles of rows and
  // columns; a bias and a clip fused.
  Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::clip(0, 6)});
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  ops::Task task("depthwise_conv2d_nchwc.x86", conv_args({1, 8, 9, 11}, {8, 1, 3, 3}, p, epi), kTarget);
  auto tail = task.space().from_values({{"tile_c", Json::array_of(std::vector<int64_t>{2, 4})},
                                        {"tile_oh", Json::array_of(std::vector<int64_t>{3, 4})},
                                        {"tile_ow", Json::array_of(std::vector<int64_t>{3, 4})},
                                        {"unroll_kw", 1},
                                        {"unroll_kh", 0}});
  std::vector<autotune::Config> configs = testing::test_configs(task, 4, 41);
  configs.push_back(tail);
  check_depthwise_nchwc(task, {1, 8, 9, 11}, {8, 1, 3, 3}, p, epi, configs, 41);

  ConvParams q;
  q.sh = q.sw = 2;
  q.pt = 2;
  q.pl = 1;
  q.pb = 0;
  q.pr = 2;
  q.dh = 2;
  ops::Task strided("depthwise_conv2d_nchwc.x86", conv_args({2, 16, 10, 9}, {16, 1, 3, 3}, q), kTarget);
  check_depthwise_nchwc(strided, {2, 16, 10, 9}, {16, 1, 3, 3}, q, Json::array(), testing::test_configs(strided, 3, 42),
                        42);
}

// The taps in the padding skipped by border and interior regions (skip_padding) or masked:
// strides 1 and 2, padding 0, 1 and uneven, widths and heights that the register tile does not
// divide (tail tiles), one-column tiles (several border tiles at each end) and random configs.
TEST(Conv2d, DepthwiseNchwcSkippedPadding) {
  struct Case {
    std::vector<int64_t> data;
    int64_t stride;
    std::vector<int64_t> pad;  // top, left, bottom, right
  };
  const std::vector<Case> cases = {{{1, 16, 13, 13}, 1, {1, 1, 1, 1}},
                                   {{1, 8, 12, 11}, 2, {0, 0, 0, 0}},
                                   {{2, 32, 7, 9}, 2, {0, 1, 2, 1}},
                                   {{1, 16, 5, 4}, 1, {2, 2, 2, 2}}};
  uint64_t seed = 70;
  for (const Case &k : cases) {
    const ConvParams p = strided_padded(k.stride, k.pad);
    const std::vector<int64_t> kernel = {k.data[1], 1, 3, 3};
    const Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
    ops::Task task("depthwise_conv2d_nchwc.x86", conv_args(k.data, kernel, p, epi), kTarget);
    SCOPED_TRACE(task.workload().args.dump());
    const autotune::Config def = task.default_config();
    EXPECT_TRUE(def.choice_bool("skip_padding"));
    const std::vector<int64_t> oshape = testing::const_shape(task.compute(def).outputs[0]);
    const int64_t oh = oshape[2], ow = oshape[3];
    std::vector<autotune::Config> configs = testing::test_configs(task, 2, ++seed);
    configs.push_back(def);
    // Tiles of 2 rows x 4 columns (tails where they do not divide) in both forms, and of one
    // column with the padding skipped.
    for (int64_t skip : {0, 1}) {
      for (int64_t cols : {int64_t{4}, int64_t{1}}) {
        if (cols == 1 && !skip) continue;
        configs.push_back(
            task.space().from_values({{"tile_c", Json::array_of(std::vector<int64_t>{k.data[1] / 8, 8})},
                                      {"tile_oh", Json::array_of(std::vector<int64_t>{(oh + 1) / 2, 2})},
                                      {"tile_ow", Json::array_of(std::vector<int64_t>{(ow + cols - 1) / cols, cols})},
                                      {"unroll_kw", 1},
                                      {"unroll_kh", 1},
                                      {"skip_padding", skip}}));
      }
    }
    check_depthwise_nchwc(task, k.data, kernel, p, epi, configs, seed);
  }
}

// Either form lowers without a guard or a masked load (the checks become border and interior
// regions), but only with the padding skipped are the border taps gone: the masked form
// multiplies the kernel by a zero vector there.
TEST(Conv2d, DepthwiseNchwcSkippedPaddingDropsBorderTaps) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  ops::Task task("depthwise_conv2d_nchwc.x86", conv_args({1, 16, 8, 8}, {16, 1, 3, 3}, p), kTarget);
  auto count = [&](int64_t skip, int *guards, int *zero_taps) {
    auto cfg = task.space().from_values({{"tile_c", Json::array_of(std::vector<int64_t>{1, 16})},
                                         {"tile_oh", Json::array_of(std::vector<int64_t>{8, 1})},
                                         {"tile_ow", Json::array_of(std::vector<int64_t>{1, 8})},
                                         {"unroll_kw", 1},
                                         {"unroll_kh", 0},
                                         {"skip_padding", skip}});
    ir::LoweredFunc f = task.lower(cfg);
    auto zero = [](const ir::Expr &e) {
      const auto *b = e.as<ir::BroadcastNode>();
      const auto *v = b ? b->value.as<ir::FloatImmNode>() : nullptr;
      return v && v->value == 0.0;
    };
    *guards = *zero_taps = 0;
    ir::post_order_visit(f.body, [&](const ir::IRNode *n) {
      const bool masked = n->node_type == ir::NodeType::Call &&
                          static_cast<const ir::CallNode *>(n)->name == ir::intrinsic::kIfThenElse;
      *guards += n->node_type == ir::NodeType::IfThenElse || n->node_type == ir::NodeType::Select || masked;
      if (n->node_type == ir::NodeType::Mul) {
        const auto *m = static_cast<const ir::MulNode *>(n);
        *zero_taps += zero(m->a) || zero(m->b);
      }
    });
  };
  int guards = 0, zero_taps = 0;
  count(1, &guards, &zero_taps);
  EXPECT_EQ(guards, 0);
  EXPECT_EQ(zero_taps, 0);
  count(0, &guards, &zero_taps);
  EXPECT_EQ(guards, 0);
  EXPECT_GT(zero_taps, 0);
}

// With eight or more channel blocks the row tiles are a loop of their own rather than part of the
// parallel loop: tiles of two rows (with a tail) in both padding forms, strides 1 and 2, against
// the naive depthwise.
TEST(Conv2d, DepthwiseNchwcRowTilesOutsideParallelLoop) {
  struct Case {
    std::vector<int64_t> data;
    int64_t stride, cb;
  };
  const std::vector<Case> cases = {{{1, 64, 6, 7}, 1, 8}, {{1, 32, 7, 7}, 2, 4}, {{2, 16, 5, 6}, 1, 2}};
  uint64_t seed = 90;
  for (const Case &k : cases) {
    ConvParams p;
    p.sh = p.sw = k.stride;
    p.pt = p.pl = p.pb = p.pr = 1;
    const std::vector<int64_t> kernel = {k.data[1], 1, 3, 3};
    const Json epi = Json::array({ops::epilogue::bias_add(), ops::epilogue::relu()});
    ops::Task task("depthwise_conv2d_nchwc.x86", conv_args(k.data, kernel, p, epi), kTarget);
    SCOPED_TRACE(task.workload().args.dump());
    const std::vector<int64_t> oshape = testing::const_shape(task.compute(task.default_config()).outputs[0]);
    const int64_t oh = oshape[2], ow = oshape[3];
    std::vector<autotune::Config> configs = {task.default_config()};
    for (int64_t skip : {0, 1}) {
      configs.push_back(
          task.space().from_values({{"tile_c", Json::array_of(std::vector<int64_t>{k.data[1] / k.cb, k.cb})},
                                    {"tile_oh", Json::array_of(std::vector<int64_t>{(oh + 1) / 2, 2})},
                                    {"tile_ow", Json::array_of(std::vector<int64_t>{(ow + 3) / 4, 4})},
                                    {"unroll_kw", 1},
                                    {"unroll_kh", 1},
                                    {"skip_padding", skip}}));
    }
    check_depthwise_nchwc(task, k.data, kernel, p, epi, configs, ++seed);
  }
}

// The padding checks of the kernel rows leave the interior row tiles only when the row tiles are a
// loop of their own (eight or more channel blocks); within the parallel loop they stay guards.
TEST(Conv2d, DepthwiseNchwcRowTileChecksPeeled) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  auto guards = [&](int64_t channels) {
    ops::Task task("depthwise_conv2d_nchwc.x86", conv_args({1, channels, 16, 16}, {channels, 1, 3, 3}, p), kTarget);
    auto cfg = task.space().from_values({{"tile_c", Json::array_of(std::vector<int64_t>{channels / 16, 16})},
                                         {"tile_oh", Json::array_of(std::vector<int64_t>{8, 2})},
                                         {"tile_ow", Json::array_of(std::vector<int64_t>{2, 8})},
                                         {"unroll_kw", 1},
                                         {"unroll_kh", 1},
                                         {"skip_padding", 1}});
    int n = 0;
    ir::post_order_visit(task.lower(cfg).body, [&](const ir::IRNode *node) {
      n += node->node_type == ir::NodeType::IfThenElse || node->node_type == ir::NodeType::Select;
    });
    return n;
  };
  EXPECT_EQ(guards(128), 0);
  EXPECT_GT(guards(64), 0);
}

// With fewer than eight channel blocks the row tiles join the parallel loop outside the blocks:
// the first of two threads writes the top half of every block, as the 1x1 layers around it do.
TEST(Conv2d, DepthwiseNchwcThreadsShareRowsWhereTheRowTilesArePartOfTheParallelLoop) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  ops::Task task("depthwise_conv2d_nchwc.x86", conv_args({1, 64, 32, 32}, {64, 1, 3, 3}, p), kTarget);
  const autotune::Config cfg = task.default_config();
  ASSERT_LT(cfg.split("tile_c")[0], 8);
  ASSERT_EQ(cfg.split("tile_oh")[0] % 2, 0) << cfg.to_json();
  deploy::Tensor out = testing::first_thread_share(task, cfg, 2)[0];
  ASSERT_GT(out.shape()[1], 1);
  EXPECT_EQ(testing::written_rows(out), testing::first_rows_of_every_block(out.shape()[1], 32, 16));
}

TEST(Conv2d, DepthwiseNchwcFixedBlockAndMultiplier) {
  ConvParams p;
  p.pt = p.pl = p.pb = p.pr = 1;
  Json args = conv_args({1, 32, 6, 6}, {32, 1, 3, 3}, p);
  args.set("c_bn", 8);
  ops::Task task("depthwise_conv2d_nchwc.x86", args, kTarget);
  EXPECT_EQ(task.space().knob("tile_c").size(), 1);
  EXPECT_EQ(task.default_config().split("tile_c").back(), 8);
  check_depthwise_nchwc(task, {1, 32, 6, 6}, {32, 1, 3, 3}, p, Json::array(), {task.default_config()}, 43);
  // The default block is one vector of channels.
  ops::Task free("depthwise_conv2d_nchwc.x86", conv_args({1, 32, 6, 6}, {32, 1, 3, 3}, p), kTarget);
  EXPECT_EQ(free.default_config().split("tile_c").back(), 16);
  // A channel multiplier other than 1 is a user error naming the template.
  try {
    ops::Task("depthwise_conv2d_nchwc.x86", conv_args({1, 4, 6, 6}, {4, 2, 3, 3}, p), kTarget);
    ADD_FAILURE() << "a multiplier of 2 was accepted";
  } catch (const ops::OpError &e) {
    EXPECT_NE(std::string(e.what()).find("depthwise_conv2d_nchwc.x86"), std::string::npos) << e.what();
  }
}

// Scatter form: every input pixel adds its kernel-weighted patch to the output.
Host naive_transpose(const Host &x, const Host &w, int64_t s, int64_t pt, int64_t pl, int64_t pb, int64_t pr,
                     int64_t op) {
  const int64_t N = x.shape[0], IC = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OC = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH = (H - 1) * s - pt - pb + KH + op, OW = (W - 1) * s - pl - pr + KW + op;
  Host out({N, OC, OH, OW});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ic = 0; ic < IC; ++ic)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx)
          for (int64_t oc = 0; oc < OC; ++oc)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t oy = y * s - pt + kh, ox = xx * s - pl + kw;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                out.at({n, oc, oy, ox}) += x.at({n, ic, y, xx}) * w.at({ic, oc, kh, kw});
              }
  return out;
}

TEST(Conv2d, TransposeWithStrideAndOutputPadding) {
  Json epi = Json::array({ops::epilogue::bias_add()});
  Json args = Json::object({{"data", tensor({1, 4, 5, 4})},
                            {"kernel", tensor({4, 6, 3, 3})},
                            {"strides", Json::array_of(std::vector<int64_t>{2, 2})},
                            {"padding", Json::array_of(std::vector<int64_t>{1, 0, 1, 2})},
                            {"output_padding", Json::array_of(std::vector<int64_t>{1, 1})},
                            {"epilogue", epi}});
  ops::Task task("conv2d_transpose_nchw.x86", args, kTarget);
  testing::check_against_reference(
      task, testing::test_configs(task, 2, 50),
      [&](const std::vector<Host> &in) {
        return channel_epilogue(naive_transpose(in[0], in[1], 2, 1, 0, 1, 2, 1), epi,
                                std::vector<Host>(in.begin() + 2, in.end()));
      },
      1e-5);
}

TEST(Conv2d, BadArgumentsAreUserErrors) {
  ConvParams p;
  EXPECT_THROW(ops::Task("conv2d_nchw.x86", conv_args({1, 3, 4, 4}, {8, 4, 3, 3}, p), kTarget), ops::OpError);
  EXPECT_THROW(ops::Task("conv2d_nchw.x86", conv_args({1, 3, 2, 2}, {8, 3, 3, 3}, p), kTarget), ops::OpError);
  Json bad = conv_args({1, 3, 8, 8}, {8, 3, 3, 3}, p);
  bad.set("stride", 2);  // misspelled
  EXPECT_THROW(ops::Task("conv2d_nchw.x86", bad, kTarget), ops::OpError);
}

}  // namespace
}  // namespace kiln
