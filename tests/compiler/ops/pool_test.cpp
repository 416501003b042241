// Pooling templates against naive C++: max and average, padding, stride, dilation, ceil_mode,
// count_include_pad, NCHW and NCHW[x]c, global pooling; default and sampled configs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <sstream>
#include <tuple>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::Host;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");

struct PoolParams {
  bool is_max = true;
  int64_t kh = 2, kw = 2, sh = 2, sw = 2, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1;
  bool ceil_mode = false, include_pad = false;
};

// A global pool of `shape` (N, C, H, W[, c]) as a window of the whole plane.
PoolParams global_params(const std::vector<int64_t> &shape, bool is_max) {
  PoolParams p;
  p.is_max = is_max;
  p.kh = shape[2];
  p.kw = shape[3];
  p.sh = p.sw = 1;
  return p;
}

// An average pool 3x2, stride 2x1, padded 1 above and left, 2 below and none right.
PoolParams uneven_average() {
  PoolParams p;
  p.is_max = false;
  p.kh = 3;
  p.kw = 2;
  p.sh = 2;
  p.sw = 1;
  p.pt = 1;
  p.pl = 1;
  p.pb = 2;
  return p;
}

int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, bool ceil_mode) {
  int64_t span = in + p0 + p1 - (k - 1) * d - 1;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p0) --o;
  return o;
}

// Works on NCHW or NCHWc (the block is just another independent channel dimension).
Host naive_pool(const Host &x, const PoolParams &p) {
  const bool blocked = x.shape.size() == 5;
  const int64_t H = x.shape[2], W = x.shape[3];
  const int64_t OH = out_len(H, p.kh, p.sh, p.pt, p.pb, p.dh, p.ceil_mode);
  const int64_t OW = out_len(W, p.kw, p.sw, p.pl, p.pr, p.dw, p.ceil_mode);
  std::vector<int64_t> shape = {x.shape[0], x.shape[1], OH, OW};
  if (blocked) shape.push_back(x.shape[4]);
  Host out(shape);
  testing::for_each_index(shape, [&](const std::vector<int64_t> &i) {
    double acc = p.is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t count = 0;
    for (int64_t a = 0; a < p.kh; ++a)
      for (int64_t b = 0; b < p.kw; ++b) {
        int64_t y = i[2] * p.sh + a * p.dh - p.pt, z = i[3] * p.sw + b * p.dw - p.pl;
        bool inside = y >= 0 && y < H && z >= 0 && z < W;
        bool in_pad = y >= -p.pt && y < H + p.pb && z >= -p.pl && z < W + p.pr;
        if (p.include_pad ? in_pad : inside) ++count;
        if (!inside) {
          if (p.is_max && in_pad) acc = std::max(acc, -std::numeric_limits<double>::infinity());
          continue;
        }
        std::vector<int64_t> j = {i[0], i[1], y, z};
        if (blocked) j.push_back(i[4]);
        acc = p.is_max ? std::max(acc, x.at(j)) : acc + x.at(j);
      }
    out.at(i) = p.is_max ? acc : acc / static_cast<double>(std::max<int64_t>(count, 1));
  });
  return out;
}

Json pool_args(const std::vector<int64_t> &shape, const PoolParams &p, const Json &epi = Json::array()) {
  return Json::object({{"data", tensor(shape)},
                       {"pool_type", p.is_max ? "max" : "avg"},
                       {"kernel", Json::array_of(std::vector<int64_t>{p.kh, p.kw})},
                       {"strides", Json::array_of(std::vector<int64_t>{p.sh, p.sw})},
                       {"padding", Json::array_of(std::vector<int64_t>{p.pt, p.pl, p.pb, p.pr})},
                       {"dilation", Json::array_of(std::vector<int64_t>{p.dh, p.dw})},
                       {"ceil_mode", p.ceil_mode},
                       {"count_include_pad", p.include_pad},
                       {"epilogue", epi}});
}

void check_pool(const std::vector<int64_t> &shape, const PoolParams &p, const Json &epi, uint64_t seed) {
  ops::Task task("pool2d.x86", pool_args(shape, p, epi), kTarget);
  const bool blocked = shape.size() == 5;
  const int64_t cb = blocked ? shape[4] : 1;
  testing::check_against_reference(
      task, testing::test_configs(task, 2, seed),
      [&](const std::vector<Host> &in) {
        return testing::apply_epilogue(
            naive_pool(in[0], p), epi, std::vector<Host>(in.begin() + 1, in.end()),
            [&](const std::vector<int64_t> &i) { return blocked ? i[1] * cb + i[4] : i[1]; });
      },
      1e-5);
}

// The separable form (kernel rows into a row buffer, then columns) and the direct one, each with
// the padding inline and as a copy, at the default tile and a whole-row one; where the input is
// padded, the separable form also with its row stage's border vector blocks split off (interior)
// and without.
void check_pool_forms(const std::vector<int64_t> &shape, const PoolParams &p, const Json &epi) {
  ops::Task task("pool2d.x86", pool_args(shape, p, epi), kTarget);
  ASSERT_TRUE(task.space().has_knob("separable"));
  const int64_t ow = out_len(shape[3], p.kw, p.sw, p.pl, p.pr, p.dw, p.ceil_mode);
  std::vector<autotune::Config> configs;
  for (const char *form : {"separable=0", "separable=1", "separable=1;interior=0", "separable=1;interior=1"}) {
    if (std::string(form).find("interior") != std::string::npos && !task.space().has_knob("interior")) continue;
    for (const char *pad : {"", ";pad_inline=0", ";pad_inline=1"}) {
      if (*pad && !task.space().has_knob("pad_inline")) continue;
      const autotune::Config d = task.default_config();
      configs.push_back(task.space().parse_config_text(std::string(form) + pad, d));
      configs.push_back(
          task.space().parse_config_text(std::string(form) + pad + ";tile_ow=[1," + std::to_string(ow) + "]", d));
    }
  }
  testing::check_against_reference(
      task, configs,
      [&](const std::vector<Host> &in) {
        return testing::apply_epilogue(naive_pool(in[0], p), epi, std::vector<Host>(in.begin() + 1, in.end()),
                                       [&](const std::vector<int64_t> &i) { return i[1]; });
      },
      1e-5);
}

TEST(Pool, SeparableFormMatchesTheDirectOne) {
  PoolParams p;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  // The benchmark's max pool at a small size, and widths no vector width divides.
  check_pool_forms({1, 3, 12, 12}, p, Json::array());
  check_pool_forms({2, 2, 13, 37}, p, Json::array({ops::epilogue::relu()}));
  // Padded rows of 52 and 114 columns: border and interior vector blocks, and a tail block; a
  // row narrower than a vector has no interior block.
  check_pool_forms({1, 2, 9, 50}, p, Json::array());
  check_pool_forms({1, 2, 5, 112}, p, Json::array());
  check_pool_forms({1, 2, 6, 7}, p, Json::array());
  p.ceil_mode = true;
  p.pb = p.pr = 0;
  check_pool_forms({1, 2, 10, 19}, p, Json::array());
  // Average, uneven padding, counting it or not, a dilated window and a stride of 1.
  p = uneven_average();
  check_pool_forms({1, 4, 7, 23}, p, Json::array());
  p.include_pad = true;
  check_pool_forms({1, 4, 7, 23}, p, Json::array());
  p = PoolParams();
  p.kh = 3;
  p.kw = 2;
  p.sh = p.sw = 1;
  p.dh = 2;
  p.dw = 2;
  check_pool_forms({1, 2, 11, 17}, p, Json::array());
}

// The interior form through the LLVM back end (vector blocks with likely() bounds, partitioned):
// max and average, widths with and without an interior block, against naive C++.
TEST(Pool, InteriorFormThroughLlvm) {
  PoolParams mx;
  mx.kh = mx.kw = 3;
  mx.pt = mx.pl = mx.pb = mx.pr = 1;
  for (const auto &[shape, p] :
       {std::make_pair(std::vector<int64_t>{1, 3, 11, 113}, mx), std::make_pair(std::vector<int64_t>{2, 2, 7, 9}, mx),
        std::make_pair(std::vector<int64_t>{1, 4, 7, 45}, uneven_average())}) {
    ops::Task task("pool2d.x86", pool_args(shape, p), kTarget);
    ASSERT_TRUE(task.space().has_knob("interior"));
    const autotune::Config cfg = task.space().parse_config_text("separable=1;interior=1", task.default_config());
    ops::Compute c = task.compute(cfg);
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 3);
    const Host want = naive_pool(testing::to_host(inputs[0]), p);
    SCOPED_TRACE("width " + std::to_string(shape[3]));
    EXPECT_LE(testing::rel_error(want, testing::run_config_llvm(task, cfg, inputs)[0]), 1e-5);
  }
}

TEST(Pool, SeparableByDefaultWhereWindowsOverlapAlongH) {
  PoolParams p;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  ops::Task overlap("pool2d.x86", pool_args({1, 64, 112, 112}, p, Json::array()), kTarget);
  EXPECT_TRUE(overlap.default_config().choice_bool("separable"));
  EXPECT_TRUE(overlap.default_config().choice_bool("pad_inline"));
  EXPECT_TRUE(overlap.default_config().choice_bool("interior"));
  ops::Task disjoint("pool2d.x86", pool_args({1, 64, 56, 56}, PoolParams(), Json::array()), kTarget);
  EXPECT_FALSE(disjoint.default_config().choice_bool("separable"));
  PoolParams one_row;
  one_row.kh = 1;
  one_row.sh = 1;
  ops::Task single("pool2d.x86", pool_args({1, 4, 8, 8}, one_row, Json::array()), kTarget);
  EXPECT_FALSE(single.space().has_knob("separable"));
}

// A strided NCHW pool whose output row is no multiple of a vector takes whole vectors by default,
// the row's tail split off (28 columns: 16 and a tail of 12, not two 14s); the default config then
// agrees with naive C++ at rows of 28, 37 and 35 columns, and at one shorter than a vector.
TEST(Pool, StridedRowsTakeWholeVectorsAndATail) {
  ops::Task avg("pool2d.x86",
                pool_args({1, 64, 56, 56},
                          [] {
                            PoolParams p;
                            p.is_max = false;
                            return p;
                          }()),
                kTarget);
  EXPECT_EQ(avg.default_config().split("tile_ow"), (std::vector<int64_t>{2, 16}));
  PoolParams a;
  a.is_max = false;
  PoolParams m;
  m.kh = m.kw = 3;
  m.pt = m.pl = m.pb = m.pr = 1;
  check_pool({1, 3, 6, 56}, a, Json::array(), 140);
  check_pool({1, 2, 5, 75}, a, Json::array(), 141);
  check_pool({1, 2, 9, 70}, m, Json::array(), 142);
  check_pool({2, 2, 4, 19}, a, Json::array(), 143);
}

// The direct form's window rows are unrolled by default for windows of up to 4x4 (avg pool 2x2 s2:
// each output vector its four strided loads and their adds), not for larger ones; unrolled or not,
// through the LLVM back end, it agrees with naive C++ (2x2 s2 at rows of 56 and 37 columns, an
// uneven padded 3x2 window).
TEST(Pool, SmallWindowRowsUnrolledByDefault) {
  PoolParams avg;
  avg.is_max = false;
  ops::Task small("pool2d.x86", pool_args({1, 64, 56, 56}, avg), kTarget);
  EXPECT_TRUE(small.default_config().choice_bool("unroll_kh"));
  PoolParams wide;
  wide.kh = wide.kw = 5;
  ops::Task large("pool2d.x86", pool_args({1, 4, 20, 20}, wide), kTarget);
  EXPECT_FALSE(large.default_config().choice_bool("unroll_kh"));
  for (const auto &[shape, p] :
       {std::make_pair(std::vector<int64_t>{1, 3, 8, 56}, avg), std::make_pair(std::vector<int64_t>{1, 2, 6, 37}, avg),
        std::make_pair(std::vector<int64_t>{1, 4, 7, 23}, uneven_average())}) {
    ops::Task task("pool2d.x86", pool_args(shape, p), kTarget);
    for (const char *form : {"unroll_kh=0", "unroll_kh=1"}) {
      std::string text = form;
      if (task.space().has_knob("separable")) text += ";separable=0";
      const autotune::Config cfg = task.space().parse_config_text(text, task.default_config());
      std::vector<deploy::Tensor> inputs = testing::make_inputs(task.compute(cfg), 9);
      SCOPED_TRACE(cfg.to_string() + " width " + std::to_string(shape[3]));
      EXPECT_LE(testing::rel_error(naive_pool(testing::to_host(inputs[0]), p),
                                   testing::run_config_llvm(task, cfg, inputs)[0]),
                1e-5);
    }
  }
}

// Average pooling of -0.0 gives -0.0, as IEEE addition (and numpy's mean) does: the sums start from
// -0.0, not 0.0 (0.0 + -0.0 is 0.0), windowed and global, through the LLVM back end.
TEST(Pool, AverageOfNegativeZerosIsNegativeZero) {
  PoolParams avg;
  avg.is_max = false;
  const std::vector<std::pair<std::string, Json>> tasks = {
      {"pool2d.x86", pool_args({1, 2, 4, 40}, avg)},
      {"global_pool2d.x86", Json::object({{"data", tensor({1, 40, 7, 7})}, {"pool_type", "avg"}})},
      {"global_pool2d.x86", Json::object({{"data", tensor({1, 4, 14, 14})}, {"pool_type", "avg"}})}};
  for (const auto &[name, args] : tasks) {
    ops::Task task(name, args, kTarget);
    const autotune::Config cfg = task.default_config();
    std::vector<deploy::Tensor> inputs = testing::make_inputs(task.compute(cfg), 3);
    for (int64_t i = 0; i < inputs[0].numel(); ++i) inputs[0].data_as<float>()[i] = -0.0f;
    const deploy::Tensor out = testing::run_config_llvm(task, cfg, inputs)[0];
    SCOPED_TRACE(name + " " + cfg.to_string());
    for (int64_t i = 0; i < out.numel(); ++i) {
      ASSERT_EQ(out.data_as<float>()[i], 0.0f) << "element " << i;
      ASSERT_TRUE(std::signbit(out.data_as<float>()[i])) << "element " << i;
    }
  }
}

// A 2x2 stride-2 NCHW pool's window columns x[2j] and x[2j + 1] read whole strides together: the
// default config loads its input rows unmasked (two contiguous loads and a deinterleave per row of
// a full output vector; no masked 32-lane load, no gather). Through the LLVM back end, max and
// average agree with naive C++ at rows of 112, 75 (odd: the last input column unread) and 32
// columns, plain, with ceil_mode (the last window half outside), and padded with the padding
// counted or not.
TEST(Pool, StridedWindowPairsLoadUnmasked) {
  for (bool is_max : {false, true}) {
    PoolParams p;
    p.is_max = is_max;
    ops::Task task("pool2d.x86", pool_args({1, 64, 112, 112}, p), kTarget);
    ir::LoweredFunc f = task.lower(task.default_config(), "op");
    codegen::LLVMBuildOptions o;
    o.target = "llvm -mcpu=znver4";
    const std::string text = codegen::emit_llvm_ir({f}, o);
    SCOPED_TRACE(is_max ? "max" : "avg");
    EXPECT_EQ(text.find("masked.gather"), std::string::npos);
    EXPECT_EQ(text.find("masked.load.v32f32"), std::string::npos) << text;
    EXPECT_NE(text.find("load <32 x float>"), std::string::npos) << text;
    PoolParams ceil = p, padded = p, counted;
    ceil.ceil_mode = true;
    padded.pt = padded.pl = padded.pb = padded.pr = 1;
    counted = padded;
    counted.include_pad = true;
    for (const PoolParams &q : {p, ceil, padded, counted}) {
      for (const std::vector<int64_t> &shape :
           {std::vector<int64_t>{1, 3, 8, 112}, std::vector<int64_t>{1, 2, 7, 75}, std::vector<int64_t>{2, 2, 5, 32}}) {
        ops::Task small("pool2d.x86", pool_args(shape, q), kTarget);
        const autotune::Config cfg = small.default_config();
        std::vector<deploy::Tensor> inputs = testing::make_inputs(small.compute(cfg), 5);
        SCOPED_TRACE(cfg.to_string() + " width " + std::to_string(shape[3]) + (q.ceil_mode ? " ceil" : "") +
                     (q.pt ? " padded" : "") + (q.include_pad ? " counted" : ""));
        EXPECT_LE(testing::rel_error(naive_pool(testing::to_host(inputs[0]), q),
                                     testing::run_config_llvm(small, cfg, inputs)[0]),
                  1e-5);
      }
    }
  }
}

// A window of three columns at stride 2 (max pool 3x3 s2, ResNet's) reads one span of whole
// strides per output vector from its row buffer: x[2j] and x[2j + 1] are its even and odd
// elements and x[2j + 2] the even ones a lane further on with the element past the span, rather
// than a second span one element later (unaligned, straddling the stores that wrote the buffer).
// The row buffer is whole vectors, so no block of it is stored under a mask. Windows of 3 at
// stride 2, 4 at 3 and 5 at 4 (each a span and the element past it), separable and direct, agree
// with naive C++ at widths whose last window ends at, before and past the last vector.
TEST(Pool, WindowsOneColumnWiderThanTheStrideShareOneSpan) {
  PoolParams p;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  ops::Task task("pool2d.x86", pool_args({1, 64, 112, 112}, p), kTarget);
  ASSERT_TRUE(task.default_config().choice_bool("separable"));
  ir::LoweredFunc f = task.lower(task.default_config(), "op");
  codegen::LLVMBuildOptions o;
  o.target = "llvm -mcpu=znver4";
  const std::string text = codegen::emit_llvm_ir({f}, o);
  int spans = 0, unaligned = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("load <32 x float>") == std::string::npos) continue;
    ++spans;
    if (line.find("align 64") == std::string::npos) ++unaligned;
  }
  EXPECT_GE(spans, 1) << text;
  EXPECT_EQ(unaligned, 0) << text;  // before: a second span one element later, at align 4
  EXPECT_EQ(text.find("masked.store"), std::string::npos) << text;
  for (int64_t k : {3, 4, 5}) {
    PoolParams q;
    q.kh = q.kw = k;
    q.sh = q.sw = k - 1;
    q.pt = q.pl = q.pb = q.pr = 1;
    q.is_max = k != 4;
    for (int64_t width : {48, 47, 53, 112}) {
      ops::Task small("pool2d.x86", pool_args({1, 2, 7, width}, q), kTarget);
      for (const char *form : {"separable=1", "separable=0"}) {
        const autotune::Config cfg = small.space().parse_config_text(form, small.default_config());
        std::vector<deploy::Tensor> inputs = testing::make_inputs(small.compute(cfg), 11);
        SCOPED_TRACE(cfg.to_string() + " window " + std::to_string(k) + " width " + std::to_string(width));
        EXPECT_LE(testing::rel_error(naive_pool(testing::to_host(inputs[0]), q),
                                     testing::run_config_llvm(small, cfg, inputs)[0]),
                  1e-5);
      }
    }
  }
}

// Max pooling of -inf gives -inf, as ONNX Runtime and torch do (the windows start from -inf and
// the padding is -inf, not the lowest finite value), and a window with one finite value among
// -infs gives it: windowed (separable and direct) and global, through the LLVM back end, element
// for element against naive C++.
TEST(Pool, MaxOfMinusInfinitiesIsMinusInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  PoolParams p;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  const std::vector<std::tuple<std::string, Json, PoolParams>> tasks = {
      {"pool2d.x86", pool_args({1, 2, 9, 40}, p), p},
      {"global_pool2d.x86", Json::object({{"data", tensor({1, 40, 7, 7})}, {"pool_type", "max"}}),
       global_params({1, 40, 7, 7}, true)},
      {"global_pool2d.x86", Json::object({{"data", tensor({1, 4, 14, 14})}, {"pool_type", "max"}}),
       global_params({1, 4, 14, 14}, true)}};
  for (const auto &[name, args, params] : tasks) {
    ops::Task task(name, args, kTarget);
    std::vector<autotune::Config> cfgs = {task.default_config()};
    if (task.space().has_knob("separable")) cfgs.push_back(task.space().parse_config_text("separable=0", cfgs[0]));
    for (const autotune::Config &cfg : cfgs) {
      std::vector<deploy::Tensor> inputs = testing::make_inputs(task.compute(cfg), 3);
      float *x = inputs[0].data_as<float>();
      for (int64_t i = 0; i < inputs[0].numel(); ++i) x[i] = -inf;
      x[0] = 1.5f;
      const Host want = naive_pool(testing::to_host(inputs[0]), params);
      const deploy::Tensor out = testing::run_config_llvm(task, cfg, inputs)[0];
      SCOPED_TRACE(name + " " + cfg.to_string());
      ASSERT_EQ(static_cast<size_t>(out.numel()), want.data.size());
      int64_t minus_inf = 0;
      for (int64_t i = 0; i < out.numel(); ++i) {
        ASSERT_EQ(out.data_as<float>()[i], static_cast<float>(want.data[static_cast<size_t>(i)])) << "element " << i;
        minus_inf += want.data[static_cast<size_t>(i)] == -inf;
      }
      EXPECT_EQ(minus_inf, out.numel() - 1);  // one window holds the 1.5
    }
  }
}

TEST(Pool, MaxWithPaddingAndCeilMode) {
  PoolParams p;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  check_pool({1, 3, 9, 10}, p, Json::array(), 61);
  p.ceil_mode = true;
  p.pb = p.pr = 0;
  check_pool({2, 2, 8, 11}, p, Json::array({ops::epilogue::relu()}), 62);
}

TEST(Pool, AverageCountsPaddingOrNot) {
  PoolParams p = uneven_average();
  check_pool({1, 4, 7, 9}, p, Json::array(), 63);
  p.include_pad = true;
  check_pool({1, 4, 7, 9}, p, Json::array({ops::epilogue::bias_add()}), 64);
  p.ceil_mode = true;
  check_pool({1, 2, 8, 8}, p, Json::array(), 65);
}

TEST(Pool, DilatedMax) {
  PoolParams p;
  p.kh = p.kw = 2;
  p.sh = p.sw = 1;
  p.dh = 2;
  p.dw = 3;
  check_pool({1, 2, 8, 9}, p, Json::array(), 66);
}

TEST(Pool, BlockedLayout) {
  PoolParams p;
  p.kh = p.kw = 3;
  p.pt = p.pl = p.pb = p.pr = 1;
  check_pool({1, 2, 7, 7, 8}, p, Json::array({ops::epilogue::bias_add()}), 67);
  p.is_max = false;
  check_pool({1, 2, 6, 6, 4}, p, Json::array(), 68);
}

TEST(Pool, Global) {
  for (bool is_max : {true, false}) {
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{2, 6, 5, 7}, std::vector<int64_t>{1, 3, 4, 4, 8}}) {
      Json epi = Json::array({ops::epilogue::bias_add()});
      ops::Task task("global_pool2d.x86",
                     Json::object({{"data", tensor(shape)}, {"pool_type", is_max ? "max" : "avg"}, {"epilogue", epi}}),
                     kTarget);
      const bool blocked = shape.size() == 5;
      const PoolParams p = global_params(shape, is_max);
      testing::check_against_reference(
          task, testing::test_configs(task, 2, 69),
          [&](const std::vector<Host> &in) {
            return testing::apply_epilogue(naive_pool(in[0], p), epi, {in[1]}, [&](const std::vector<int64_t> &i) {
              return blocked ? i[1] * shape[4] + i[4] : i[1];
            });
          },
          1e-5);
    }
  }
}

// Each vector block of global NCHW pooling, on planes no block divides (7x7, 3x5) and one that
// four vectors cover (14x14), with channel tiles that do and do not leave a single plane.
TEST(Pool, GlobalEveryVectorBlock) {
  for (bool is_max : {true, false}) {
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{1, 40, 7, 7}, std::vector<int64_t>{2, 6, 3, 5},
                                              std::vector<int64_t>{1, 8, 14, 14}, std::vector<int64_t>{1, 24, 1, 3}}) {
      ops::Task task("global_pool2d.x86",
                     Json::object({{"data", tensor(shape)}, {"pool_type", is_max ? "max" : "avg"}}), kTarget);
      std::vector<autotune::Config> configs;
      for (const char *block : {"block=16", "block=8", "block=4", "transpose=1;wide=0", "transpose=1;wide=1"}) {
        configs.push_back(task.space().parse_config_text(block, task.default_config()));
        configs.push_back(task.space().parse_config_text(
            std::string(block) + ";tile_c=[" + std::to_string(shape[1]) + ",1]", task.default_config()));
      }
      const PoolParams p = global_params(shape, is_max);
      testing::check_against_reference(
          task, configs, [&](const std::vector<Host> &in) { return naive_pool(in[0], p); }, 1e-5);
    }
  }
}

// The transposed form (each plane into 4 partial sums, a vector of planes' partial sums added
// vertically), its planes read as vectors of 4 or (wide) in full vectors first, through the LLVM
// back end: planes of 49, 15 and 3 floats, chunks of 1 to 64 planes.
TEST(Pool, GlobalTransposedThroughLlvm) {
  for (bool is_max : {true, false}) {
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{1, 128, 7, 7}, std::vector<int64_t>{2, 6, 3, 5}, std::vector<int64_t>{1, 24, 1, 3}}) {
      ops::Task task("global_pool2d.x86",
                     Json::object({{"data", tensor(shape)}, {"pool_type", is_max ? "max" : "avg"}}), kTarget);
      const PoolParams p = global_params(shape, is_max);
      for (const auto &knob : task.space().knob("tile_c").entities)
        for (const char *wide : {"wide=0", "wide=1"}) {
          const autotune::Config cfg = task.space().parse_config_text(
              std::string("transpose=1;") + wide + ";tile_c=" + knob.dump(), task.default_config());
          ops::Compute c = task.compute(cfg);
          std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 5);
          SCOPED_TRACE(cfg.to_string());
          EXPECT_LE(testing::rel_error(naive_pool(testing::to_host(inputs[0]), p),
                                       testing::run_config_llvm(task, cfg, inputs)[0]),
                    1e-5);
        }
    }
  }
}

TEST(Pool, GlobalDefaultsForSmallPlanes) {
  // 7x7 planes (49 floats, under four 16-lane vectors): half vectors, 32 planes a parallel chunk,
  // transposed (a vector of planes' partial sums added vertically); 14x14 planes: a tree per plane.
  ops::Task small("global_pool2d.x86", Json::object({{"data", tensor({1, 1280, 7, 7})}, {"pool_type", "avg"}}),
                  kTarget);
  EXPECT_EQ(small.default_config().choice_int("block"), 8);
  EXPECT_EQ(small.default_config().split("tile_c")[1], 32);
  EXPECT_TRUE(small.default_config().choice_bool("transpose"));
  EXPECT_TRUE(small.default_config().choice_bool("wide"));
  ops::Task large("global_pool2d.x86", Json::object({{"data", tensor({1, 64, 14, 14})}, {"pool_type", "avg"}}),
                  kTarget);
  EXPECT_EQ(large.default_config().choice_int("block"), 16);
  EXPECT_EQ(large.default_config().split("tile_c")[1], 8);
  EXPECT_FALSE(large.default_config().choice_bool("transpose"));
  EXPECT_FALSE(large.default_config().choice_bool("wide"));
}

// The default config of every plane size through the LLVM back end against a sum in double: planes
// that no vector divides (7x7, 13x13, 5x5, 3x3), single elements and NCHW16c, max and average.
TEST(Pool, GlobalDefaultsThroughLlvm) {
  for (bool is_max : {true, false}) {
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{1, 1280, 7, 7}, std::vector<int64_t>{1, 512, 7, 7}, std::vector<int64_t>{1, 2048, 7, 7},
          std::vector<int64_t>{1, 1000, 13, 13}, std::vector<int64_t>{1, 64, 1, 1}, std::vector<int64_t>{2, 10, 5, 5},
          std::vector<int64_t>{1, 36, 3, 3}, std::vector<int64_t>{1, 8, 7, 7, 16}}) {
      ops::Task task("global_pool2d.x86",
                     Json::object({{"data", tensor(shape)}, {"pool_type", is_max ? "max" : "avg"}}), kTarget);
      const autotune::Config cfg = task.default_config();
      std::vector<deploy::Tensor> inputs = testing::make_inputs(task.compute(cfg), 11);
      SCOPED_TRACE(Json::array_of(shape).dump() + " " + cfg.to_string());
      EXPECT_LE(testing::rel_error(naive_pool(testing::to_host(inputs[0]), global_params(shape, is_max)),
                                   testing::run_config_llvm(task, cfg, inputs)[0]),
                1e-6);
    }
  }
}

// The wide form reads each 7x7 plane as full 16-lane vectors (3 of them and one element): every
// vector read of the input is a 16-lane contiguous vector, and the LLVM IR has no gather.
TEST(Pool, GlobalWideReadsFullVectors) {
  for (const char *type : {"avg", "max"}) {
    ops::Task task("global_pool2d.x86", Json::object({{"data", tensor({1, 1280, 7, 7})}, {"pool_type", type}}),
                   kTarget);
    std::ostringstream lowered;
    lowered << task.lower(task.default_config(), "op");
    const std::string text = lowered.str();
    SCOPED_TRACE(text);
    const std::regex vector_read("data\\[ramp\\(.*?, 1, ([0-9]+)\\)\\]");
    int reads = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), vector_read); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ((*it)[1].str(), "16");
      ++reads;
    }
    // Four planes an iteration (the plane loop unrolled by 4), 3 full vectors each.
    EXPECT_EQ(reads, 12);
    codegen::LLVMBuildOptions o;
    o.target = "llvm -mcpu=znver4";
    const std::string ir_text = codegen::emit_llvm_ir({task.lower(task.default_config(), "op")}, o);
    EXPECT_EQ(ir_text.find("masked.gather"), std::string::npos);
  }
}

TEST(Pool, AverageOfIntegersIsRejected) {
  PoolParams p;
  p.is_max = false;
  Json args = pool_args({1, 1, 4, 4}, p);
  args.set("data", tensor({1, 1, 4, 4}, "int8"));
  EXPECT_THROW(ops::Task("pool2d.x86", args, kTarget), ops::OpError);
}

// The window's arguments in their short spellings: an int for both dimensions, padding [H, W] for
// both sides, strides left out (the kernel: windows side by side), dilation left out ([1, 1]).
TEST(Pool, WindowArgumentsInEverySpelling) {
  auto canonical = [](const Json &window) {
    Json args = Json::object({{"data", tensor({1, 2, 9, 11})}});
    for (const auto &[k, v] : window.as_object()) args.set(k, v);
    return ops::Task("pool2d.x86", args, kTarget).workload().args;
  };
  auto ints = [](std::vector<int64_t> v) { return Json::array_of(v); };
  Json j = canonical(Json::object({{"kernel", 3}}));
  EXPECT_EQ(j.at("kernel").dump(), "[3,3]");
  EXPECT_EQ(j.at("strides").dump(), "[3,3]");
  EXPECT_EQ(j.at("padding").dump(), "[0,0,0,0]");
  EXPECT_EQ(j.at("dilation").dump(), "[1,1]");
  j = canonical(Json::object({{"kernel", ints({3, 2})}, {"padding", ints({1, 0})}, {"dilation", 2}}));
  EXPECT_EQ(j.at("strides").dump(), "[3,2]");
  EXPECT_EQ(j.at("padding").dump(), "[1,0,1,0]");
  EXPECT_EQ(j.at("dilation").dump(), "[2,2]");
  j = canonical(Json::object({{"kernel", 2}, {"strides", ints({1, 2})}, {"padding", ints({0, 1, 1, 0})}}));
  EXPECT_EQ(j.at("strides").dump(), "[1,2]");
  EXPECT_EQ(j.at("padding").dump(), "[0,1,1,0]");
  EXPECT_EQ(ops::Task("pool2d.x86", Json::object({{"data", tensor({1, 2, 9, 11})}, {"kernel", 2}}), kTarget).key(),
            ops::Task("pool2d.x86",
                      Json::object({{"data", tensor({1, 2, 9, 11})},
                                    {"kernel", ints({2, 2})},
                                    {"strides", ints({2, 2})},
                                    {"padding", ints({0, 0, 0, 0})},
                                    {"dilation", ints({1, 1})}}),
                      kTarget)
                .key());
}

// Bad window arguments are errors naming the argument; a bad kernel is reported as such even where
// the strides default to it.
TEST(Pool, BadWindowArgumentsNameTheArgument) {
  auto error = [](const Json &window) -> std::string {
    Json args = Json::object({{"data", tensor({1, 2, 9, 11})}});
    for (const auto &[k, v] : window.as_object()) args.set(k, v);
    try {
      ops::Task("pool2d.x86", args, kTarget);
    } catch (const ops::OpError &e) {
      return e.what();
    }
    return "";
  };
  auto ints = [](std::vector<int64_t> v) { return Json::array_of(v); };
  const std::string w = "workload pool2d.x86: ";
  EXPECT_EQ(error(Json::object({{"kernel", 2}})), "");
  EXPECT_EQ(error(Json::object({{"strides", 2}})), w + "missing \"kernel\"");
  EXPECT_EQ(error(Json::object({{"kernel", 0}})), w + "kernel must be positive");
  EXPECT_EQ(error(Json::object({{"kernel", ints({2, -1})}})), w + "kernel must be positive");
  EXPECT_EQ(error(Json::object({{"kernel", 2}, {"strides", ints({1, 0})}})), w + "strides must be positive");
  EXPECT_EQ(error(Json::object({{"kernel", 2}, {"dilation", -1}})), w + "dilation must be positive");
  EXPECT_EQ(error(Json::object({{"kernel", 2}, {"padding", ints({0, -1})}})), w + "padding must not be negative");
  EXPECT_EQ(error(Json::object({{"kernel", 3}, {"padding", 3}})),
            w + "padding must be smaller than the (dilated) window");
  EXPECT_EQ(error(Json::object({{"kernel", 2}, {"strides", ints({1, 2, 3})}})),
            w + "\"strides\" must be an integer or a list of 2 integers");
  EXPECT_EQ(error(Json::object({{"kernel", ints({2, 2, 2})}})),
            w + "\"kernel\" must be an integer or a list of 2 integers");
}

}  // namespace
}  // namespace kiln
