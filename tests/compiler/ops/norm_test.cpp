// Softmax and layer norm against naive C++ in double precision; every axis position; default and
// sampled configs through the C back end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ops/epilogue.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;
using testing::Host;
using testing::tensor;

const ops::Target kTarget = driver::resolve_target("llvm -mcpu=znver4");

Host naive_softmax(const Host &x, int64_t axis, bool log) {
  Host out(x.shape);
  std::vector<int64_t> rshape = x.shape;
  rshape[static_cast<size_t>(axis)] = 1;
  const int64_t K = x.shape[static_cast<size_t>(axis)];
  testing::for_each_index(rshape, [&](const std::vector<int64_t> &r) {
    std::vector<int64_t> i = r;
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      i[static_cast<size_t>(axis)] = k;
      mx = std::max(mx, x.at(i));
    }
    for (int64_t k = 0; k < K; ++k) {
      i[static_cast<size_t>(axis)] = k;
      sum += std::exp(x.at(i) - mx);
    }
    for (int64_t k = 0; k < K; ++k) {
      i[static_cast<size_t>(axis)] = k;
      out.at(i) = log ? x.at(i) - mx - std::log(sum) : std::exp(x.at(i) - mx) / sum;
    }
  });
  return out;
}

TEST(Norm, SoftmaxEveryAxis) {
  const std::vector<int64_t> shape = {3, 5, 20};
  for (int64_t axis : {int64_t{0}, int64_t{1}, int64_t{2}}) {
    for (bool log : {false, true}) {
      ops::Task task("softmax.x86", Json::object({{"data", tensor(shape)}, {"axis", axis}, {"log", log}}), kTarget);
      testing::check_against_reference(
          task, testing::test_configs(task, 1, 80 + static_cast<uint64_t>(axis)),
          [&](const std::vector<Host> &in) { return naive_softmax(in[0], axis, log); }, 2e-5);
    }
  }
}

TEST(Norm, SoftmaxRowsWithEpilogueAndOneDimension) {
  Json epi = Json::array({ops::epilogue::scale(2.0), ops::epilogue::add()});
  ops::Task task("softmax.x86", Json::object({{"data", tensor({4, 37})}, {"epilogue", epi}}), kTarget);
  EXPECT_EQ(task.workload().args["axis"].as_int(), 1);
  testing::check_against_reference(
      task, testing::test_configs(task, 3, 85),
      [&](const std::vector<Host> &in) {
        return testing::apply_epilogue(naive_softmax(in[0], 1, false), epi, {in[1]},
                                       [](const std::vector<int64_t> &i) { return i[1]; });
      },
      2e-5);
  ops::Task one("softmax.x86", Json::object({{"data", tensor({29})}}), kTarget);
  testing::check_against_reference(
      one, testing::test_configs(one, 2, 86),
      [&](const std::vector<Host> &in) { return naive_softmax(in[0], 0, false); }, 2e-5);
}

// Masks rows of a softmax input of `rows` rows of `len`: row 0 all -inf but one value (at len / 3),
// row 1 -inf at every even position, the last row all -inf.
void mask_rows(deploy::Tensor &x, int64_t len, int64_t rows) {
  for (int64_t k = 0; k < len; ++k) {
    if (k != len / 3) testing::set_elem(x, k, -INFINITY);      // row 0: one value left
    if (k % 2 == 0) testing::set_elem(x, len + k, -INFINITY);  // row 1: half masked
    testing::set_elem(x, (rows - 1) * len + k, -INFINITY);     // last row: all masked
  }
}

// Checks `got` against the float64 `want` element by element (within 1e-5 relative plus `abs_tol`;
// equal values, infinities included, match) where `want` is not NaN; returns how many elements
// are NaN in both.
int64_t expect_close_but_nans(const Host &want, const deploy::Tensor &got, double abs_tol) {
  int64_t bad = 0, nans = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double w = want.data[static_cast<size_t>(i)], g = testing::get_elem(got, i);
    if (std::isnan(w)) {
      nans += std::isnan(g) ? 1 : 0;
      continue;
    }
    if (g != w && !(std::fabs(g - w) <= 1e-5 * std::fabs(w) + abs_tol)) {
      if (bad++ < 3) ADD_FAILURE() << "element " << i << ": " << g << " against " << w;
    }
  }
  EXPECT_EQ(bad, 0);
  return nans;
}

// Softmax over the last axis through the LLVM back end (the vector exp with vscalefps where the
// host has AVX-512) against the double reference, element by element: rows a vector divides
// (128: the unrolled loops) and rows it does not (1000, 33, 7), at the default config and with
// the exp inlined. Values spread over +-40, so the exps span about 35 decades. Masked rows: all
// -inf but one value (that value's probability is 1, the others 0), half -inf, and all -inf
// (NaN everywhere, as in torch).
TEST(Norm, SoftmaxLastAxisMatchesDoubleWithTailsAndInfiniteRows) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 1000}, {1, 7, 33}, {2, 3, 7}, {1, 4, 3, 128}};
  for (const auto &shape : shapes) {
    ops::Task task("softmax.x86", Json::object({{"data", tensor(shape)}}), kTarget);
    ops::Compute c = task.compute(task.default_config());
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 31);
    const int64_t len = shape.back(), rows = inputs[0].numel() / len;
    std::mt19937_64 rng(static_cast<uint64_t>(len));
    std::normal_distribution<double> value(0.0, 12.0);
    for (int64_t i = 0; i < inputs[0].numel(); ++i)
      testing::set_elem(inputs[0], i, std::clamp(value(rng), -40.0, 40.0));
    if (rows >= 3) mask_rows(inputs[0], len, rows);
    const Host want = naive_softmax(testing::to_host(inputs[0]), static_cast<int64_t>(shape.size()) - 1, false);
    const autotune::Config def = task.default_config();
    for (const autotune::Config &cfg : {def, task.space().parse_config_text("exp_inline=1", def)}) {
      SCOPED_TRACE(testing::tensor(shape).dump() + " config " + cfg.to_string());
      const deploy::Tensor got = testing::run_config_llvm(task, cfg, inputs)[0];
      EXPECT_EQ(expect_close_but_nans(want, got, 1e-44), rows >= 3 ? len : 0)
          << "an all -inf row gives NaN, no other row does";
      if (rows >= 3) {
        EXPECT_EQ(testing::get_elem(got, len / 3), 1.0);
        EXPECT_EQ(testing::get_elem(got, 0), 0.0);
      }
    }
  }
}

// Softmax along the last axis with every number of interleaved rows (`rows`), through the LLVM
// back end, against the double reference element by element: rows the block divides and rows it
// does not (6 and 3 rows in blocks of 4, 5 rows in blocks of 2, 8 and 16: the last block runs
// over rows past the tensor's), short, vector-length and long rows, log-softmax too. The first
// row is all -inf but one value, the second half -inf, the last all -inf (NaN, as in torch).
TEST(Norm, SoftmaxInterleavedRowsMatchDoubleWithTails) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 6, 128}, {2, 3, 37}, {5, 16}, {1, 12, 1000}, {7, 3}};
  for (const auto &shape : shapes) {
    for (bool log : {false, true}) {
      ops::Task task("softmax.x86", Json::object({{"data", tensor(shape)}, {"log", log}}), kTarget);
      ops::Compute c = task.compute(task.default_config());
      std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 41);
      const int64_t len = shape.back(), rows = inputs[0].numel() / len;
      std::mt19937_64 rng(static_cast<uint64_t>(rows * 1000 + len));
      std::normal_distribution<double> value(0.0, 12.0);
      for (int64_t i = 0; i < inputs[0].numel(); ++i)
        testing::set_elem(inputs[0], i, std::clamp(value(rng), -40.0, 40.0));
      mask_rows(inputs[0], len, rows);
      const Host want = naive_softmax(testing::to_host(inputs[0]), static_cast<int64_t>(shape.size()) - 1, log);
      // Softmax: the exps stored and summed in one loop (one_pass=1, the default) and in two.
      for (const char *pass :
           log ? std::vector<const char *>{""} : std::vector<const char *>{";one_pass=1", ";one_pass=0"}) {
        for (int64_t r : {1, 2, 4, 8, 16}) {
          const autotune::Config cfg =
              task.space().parse_config_text("rows=" + std::to_string(r) + pass, task.default_config());
          ASSERT_EQ(cfg.choice_int("rows"), r);
          SCOPED_TRACE(testing::tensor(shape).dump() + (log ? " log" : "") + " config " + cfg.to_string());
          const deploy::Tensor got = testing::run_config_llvm(task, cfg, inputs)[0];
          // Log-softmax's values are logs, near 0 for the likeliest: an absolute margin too.
          EXPECT_EQ(expect_close_but_nans(want, got, log ? 1e-5 : 1e-44), len)
              << "the all -inf row gives NaN, no other row does";
          EXPECT_EQ(testing::get_elem(got, len / 3), log ? 0.0 : 1.0);
        }
      }
    }
  }
}

// The default schedule of short rows interleaves them: the max reduction's loop reads several
// rows an iteration (rows=1, the loop nest of version 2, reads one), and the tree of each row's
// partial maxima is in the same loop body.
TEST(Norm, SoftmaxDefaultInterleavesShortRows) {
  ops::Task task("softmax.x86", Json::object({{"data", tensor({1, 12, 128, 128})}}), kTarget);
  auto max_reads = [&](const autotune::Config &cfg) {
    std::ostringstream lowered;
    lowered << task.lower(cfg, "op");
    const std::string text = lowered.str();
    // The statements of the first loop over the row's vectors: each max(...) reading the data.
    const size_t loop = text.find("for (k.outer");
    EXPECT_NE(loop, std::string::npos) << text;
    const size_t end = text.find('}', loop);
    const std::string body = text.substr(loop, end - loop);
    int reads = 0;
    for (size_t at = body.find("data["); at != std::string::npos; at = body.find("data[", at + 1)) ++reads;
    return reads;
  };
  const autotune::Config def = task.default_config();
  EXPECT_GE(def.choice_int("rows"), 4);
  EXPECT_EQ(max_reads(def), def.choice_int("rows"));
  EXPECT_EQ(max_reads(task.space().parse_config_text("rows=1", def)), 1);
  // One row: nothing to interleave.
  ops::Task one("softmax.x86", Json::object({{"data", tensor({1, 1000})}}), kTarget);
  EXPECT_EQ(one.default_config().choice_int("rows"), 1);
}

// The rows the default interleaves follow the row's vectors, at 8 lanes (AVX2) as at 16 (AVX-512):
// rows of more than 8 vectors one at a time, of 5 to 8 vectors four, of 4 or fewer eight. So rows
// of 128 floats (16 AVX2 vectors, 8 AVX-512 ones) are one at a time on AVX2 and four on AVX-512.
TEST(Norm, SoftmaxInterleavedRowsFollowTheRowsVectors) {
  const ops::Target avx2 = driver::resolve_target("llvm -mcpu=znver3");
  ASSERT_EQ(avx2.float_lanes(), 8);
  ASSERT_EQ(kTarget.float_lanes(), 16);
  for (const auto &[len, on_avx2, on_avx512] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {256, 1, 1}, {128, 1, 4}, {96, 1, 4}, {64, 4, 8}, {32, 8, 8}, {512, 1, 1}}) {
    SCOPED_TRACE("rows of " + std::to_string(len));
    const Json args = Json::object({{"data", tensor({1, 12, 128, len})}});
    EXPECT_EQ(ops::Task("softmax.x86", args, avx2).default_config().choice_int("rows"), on_avx2);
    EXPECT_EQ(ops::Task("softmax.x86", args, kTarget).default_config().choice_int("rows"), on_avx512);
  }
}

// The loops (but the parallel one over the rows) that both store into and load the exp buffer.
int loops_storing_and_summing_exps(const ir::LoweredFunc &f) {
  int n = 0;
  ir::post_order_visit(f.body, [&](const ir::IRNode *node) {
    if (node->node_type != ir::NodeType::For) return;
    const auto *loop = static_cast<const ir::ForNode *>(node);
    if (loop->kind == ir::ForKind::Parallel) return;
    bool loads = false, stores = false;
    ir::post_order_visit(loop->body, [&](const ir::IRNode *m) {
      loads = loads || (m->node_type == ir::NodeType::Load &&
                        static_cast<const ir::LoadNode *>(m)->buffer_var->name == "softmax.exp");
      stores = stores || (m->node_type == ir::NodeType::Store &&
                          static_cast<const ir::StoreNode *>(m)->buffer_var->name == "softmax.exp");
    });
    n += loads && stores;
  });
  return n;
}

// The default schedule (version 4) computes the exps and their sum in one loop over the row: one
// loop stores each exp and adds it to the sum's accumulators (one_pass=0, version 3's loop nest,
// stores them all, then reads them back in another loop), for interleaved short rows and for one
// long row; the other loops that read the exps are the normalization's.
TEST(Norm, SoftmaxDefaultStoresAndSumsTheExpsInOneLoop) {
  for (const auto &shape : std::vector<std::vector<int64_t>>{{1, 12, 128, 128}, {1, 1000}, {2, 3, 37}}) {
    SCOPED_TRACE(testing::tensor(shape).dump());
    ops::Task task("softmax.x86", Json::object({{"data", tensor(shape)}}), kTarget);
    const autotune::Config def = task.default_config();
    EXPECT_TRUE(def.choice_bool("one_pass"));
    const ir::LoweredFunc one = task.lower(def, "op");
    EXPECT_EQ(loops_storing_and_summing_exps(one), 1) << one;
    const ir::LoweredFunc two = task.lower(task.space().parse_config_text("one_pass=0", def), "op");
    EXPECT_EQ(loops_storing_and_summing_exps(two), 0) << two;
  }
  // Log-softmax has no exp stage, hence no such knob.
  ops::Task log("softmax.x86", Json::object({{"data", tensor({4, 128})}, {"log", true}}), kTarget);
  EXPECT_FALSE(log.space().has_knob("one_pass"));
}

Host naive_layer_norm(const Host &x, int64_t first, double eps, const Host *gamma, const Host *beta) {
  Host out(x.shape);
  std::vector<int64_t> pre(x.shape.begin(), x.shape.begin() + first);
  std::vector<int64_t> norm(x.shape.begin() + first, x.shape.end());
  if (pre.empty()) pre.push_back(1);
  int64_t n = 1;
  for (int64_t d : norm) n *= d;
  testing::for_each_index(pre, [&](const std::vector<int64_t> &p) {
    auto full = [&](const std::vector<int64_t> &q) {
      std::vector<int64_t> i = first == 0 ? std::vector<int64_t>{} : p;
      i.insert(i.end(), q.begin(), q.end());
      return i;
    };
    double mean = 0, var = 0;
    testing::for_each_index(norm, [&](const std::vector<int64_t> &q) { mean += x.at(full(q)); });
    mean /= static_cast<double>(n);
    testing::for_each_index(norm, [&](const std::vector<int64_t> &q) {
      double d = x.at(full(q)) - mean;
      var += d * d;
    });
    var /= static_cast<double>(n);
    testing::for_each_index(norm, [&](const std::vector<int64_t> &q) {
      double v = (x.at(full(q)) - mean) / std::sqrt(var + eps);
      if (gamma) v *= gamma->at(q);
      if (beta) v += beta->at(q);
      out.at(full(q)) = v;
    });
  });
  return out;
}

TEST(Norm, LayerNormTrailingAxes) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int64_t> axes;
    bool scale, center;
  };
  for (const Case &k : {Case{{4, 24}, {-1}, true, true}, Case{{2, 3, 5, 6}, {2, 3}, true, false},
                        Case{{30}, {0}, false, true}, Case{{2, 4, 48}, {1, 2}, true, true}}) {
    Json args = Json::object({{"data", tensor(k.shape)},
                              {"axes", Json::array_of(k.axes)},
                              {"epsilon", 1e-3},
                              {"scale", k.scale},
                              {"center", k.center}});
    ops::Task task("layer_norm.x86", args, kTarget);
    const int64_t first = task.workload().args["axes"][0].as_int();
    testing::check_against_reference(
        task, testing::test_configs(task, 2, 90),
        [&](const std::vector<Host> &in) {
          const Host *g = k.scale ? &in[1] : nullptr;
          const Host *b = k.center ? &in[k.scale ? 2 : 1] : nullptr;
          return naive_layer_norm(in[0], first, 1e-3, g, b);
        },
        5e-5);
  }
}

// Rows long enough for several independent vector accumulators and the pairwise sum of their
// partial results, with tails that no vector width divides; the values of a row differ widely
// (a sum that drops low-order partial results loses them). Layer norm's normalize loop is
// unrolled by 4 vectors (768, 320), by 2 (96) or not at all (48, 133, 1000).
TEST(Norm, LongRowsUseSeveralAccumulatorsAndTails) {
  for (int64_t len : {int64_t{1000}, int64_t{768}, int64_t{320}, int64_t{133}, int64_t{96}, int64_t{48}}) {
    ops::Task sm("softmax.x86", Json::object({{"data", tensor({3, len})}}), kTarget);
    testing::check_against_reference(
        sm, testing::test_configs(sm, 3, 95 + static_cast<uint64_t>(len)),
        [&](const std::vector<Host> &in) { return naive_softmax(in[0], 1, false); }, 2e-5);
    ops::Task ln("layer_norm.x86", Json::object({{"data", tensor({2, len})}, {"epsilon", 1e-5}}), kTarget);
    testing::check_against_reference(
        ln, testing::test_configs(ln, 3, 97 + static_cast<uint64_t>(len)),
        [&](const std::vector<Host> &in) { return naive_layer_norm(in[0], 1, 1e-5, &in[1], &in[2]); }, 5e-5);
  }
}

// Rows with a large mean and a small spread (mean 1e3, standard deviation 1e-1): the statistics
// are taken in one pass, and a plain sum of squares minus the squared mean would lose the variance
// to cancellation in float32 (its error would exceed the variance itself). The default config (one
// pass), the two-pass form and sampled configs, through the C and the LLVM back ends, against a
// two-pass double reference.
TEST(Norm, LayerNormLargeMeanKeepsTheVariance) {
  for (int64_t len : {int64_t{768}, int64_t{133}, int64_t{1000}, int64_t{7}}) {
    ops::Task ln("layer_norm.x86", Json::object({{"data", tensor({3, len})}, {"epsilon", 1e-5}}), kTarget);
    ops::Compute c = ln.compute(ln.default_config());
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 11);
    std::mt19937_64 rng(static_cast<uint64_t>(len));
    std::normal_distribution<double> spread(1e3, 1e-1);
    for (int64_t i = 0; i < inputs[0].numel(); ++i) testing::set_elem(inputs[0], i, spread(rng));
    std::vector<Host> host;
    for (const auto &t : inputs) host.push_back(testing::to_host(t));
    const Host want = naive_layer_norm(host[0], 1, 1e-5, &host[1], &host[2]);
    std::vector<autotune::Config> configs = testing::test_configs(ln, 2, 120 + static_cast<uint64_t>(len));
    ASSERT_TRUE(configs[0].choice_bool("one_pass"));
    configs.push_back(ln.space().parse_config_text("one_pass=0", configs[0]));
    for (const auto &cfg : configs) {
      SCOPED_TRACE("length " + std::to_string(len) + " config " + cfg.to_string());
      // float32 holds values near 1e3 to about 3e-5, so (x - mean) / 0.1 is good to a few 1e-4 with
      // the shifted sums; the two-pass form's mean, a float32 sum of the raw values (about 1e6),
      // loses a little more.
      const double tol = cfg.choice_bool("one_pass") ? 2e-3 : 5e-3;
      EXPECT_LE(testing::rel_error(want, testing::run_config(ln, cfg, inputs)[0]), tol);
      EXPECT_LE(testing::rel_error(want, testing::run_config_llvm(ln, cfg, inputs)[0]), tol);
    }
  }
}

// Every block of rows (`tile_rows`) with both forms of the statistics, through the C and the LLVM
// back ends: BERT-like rows, rows no vector width divides, blocks that are the whole dimension,
// a single short row; and rows of mean 1e4 and standard deviation 1, whose variance a plain sum of
// squares in float32 would lose (1e8 against 1, below float32's resolution there).
TEST(Norm, LayerNormRowBlocksMatchTheReference) {
  struct Case {
    std::vector<int64_t> shape;
    double mean, spread, tol;
  };
  for (const Case &k :
       {Case{{1, 16, 768}, 0.0, 1.0, 5e-5}, Case{{1, 6, 33}, 0.0, 1.0, 5e-5}, Case{{2, 7, 33}, 0.0, 1.0, 5e-5},
        Case{{1, 1, 5}, 0.0, 1.0, 5e-5}, Case{{1, 8, 133}, 1e4, 1.0, 2e-3}, Case{{1, 4, 768}, 1e4, 1.0, 2e-3}}) {
    ops::Task ln("layer_norm.x86", Json::object({{"data", tensor(k.shape)}, {"epsilon", 1e-5}}), kTarget);
    ops::Compute c = ln.compute(ln.default_config());
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 13);
    std::mt19937_64 rng(static_cast<uint64_t>(k.shape[1] * 1000 + k.shape[2]));
    std::normal_distribution<double> value(k.mean, k.spread);
    for (int64_t i = 0; i < inputs[0].numel(); ++i) testing::set_elem(inputs[0], i, value(rng));
    std::vector<Host> host;
    for (const auto &t : inputs) host.push_back(testing::to_host(t));
    const Host want = naive_layer_norm(host[0], 2, 1e-5, &host[1], &host[2]);
    const int64_t rows = k.shape[1];
    int checked = 0;
    for (int64_t r = 1; r <= std::min<int64_t>(rows, 8); ++r) {
      if (rows % r != 0) continue;
      for (int one_pass : {1, 0}) {
        const std::string knobs = "tile_rows=[" + std::to_string(rows / r) + "," + std::to_string(r) +
                                  "];one_pass=" + std::to_string(one_pass);
        autotune::Config cfg = ln.space().parse_config_text(knobs, ln.default_config());
        SCOPED_TRACE("shape " + std::to_string(k.shape[1]) + "x" + std::to_string(k.shape[2]) + " " + cfg.to_string());
        ASSERT_EQ(cfg.split("tile_rows")[1], r);
        // The two-pass form's mean is a float32 sum of the raw values: at mean 1e4 it loses more.
        const double tol = one_pass || k.mean == 0.0 ? k.tol : 2 * k.tol;
        EXPECT_LE(testing::rel_error(want, testing::run_config(ln, cfg, inputs)[0]), tol);
        EXPECT_LE(testing::rel_error(want, testing::run_config_llvm(ln, cfg, inputs)[0]), tol);
        ++checked;
      }
    }
    EXPECT_GE(checked, 2);
  }
}

// The loops of a lowered layer norm that store both the output and the statistics' accumulators
// and allocate nothing: the loop over a row's vectors of a pipelined block (the next row's
// statistics beside this row's normalization), not the loop over the rows.
int pipelined_row_loops(const ir::LoweredFunc &f) {
  int n = 0;
  ir::post_order_visit(f.body, [&](const ir::IRNode *node) {
    if (node->node_type != ir::NodeType::For) return;
    bool out = false, stats = false, allocates = false;
    ir::post_order_visit(static_cast<const ir::ForNode *>(node)->body, [&](const ir::IRNode *m) {
      allocates = allocates || m->node_type == ir::NodeType::Allocate;
      if (m->node_type != ir::NodeType::Store) return;
      const std::string &name = static_cast<const ir::StoreNode *>(m)->buffer_var->name;
      out = out || name == "layer_norm";
      stats = stats || name.rfind("layer_norm.stats", 0) == 0;
    });
    n += out && stats && !allocates;
  });
  return n;
}

// Pipelined blocks (the knob pipeline): the next block's statistics computed in the loop that
// normalizes this block, for several blocks a parallel iteration, with one and two rows a block,
// both forms of the statistics, rows the knob does not divide, and a large mean.
TEST(Norm, LayerNormPipelinedBlocksMatchTheReference) {
  struct Case {
    std::vector<int64_t> shape;
    double mean, tol;
  };
  for (const Case &k : {Case{{1, 16, 768}, 0.0, 5e-5}, Case{{2, 7, 33}, 0.0, 5e-5}, Case{{3, 10, 100}, 0.0, 5e-5},
                        Case{{1, 1, 5}, 0.0, 5e-5}, Case{{1, 12, 133}, 1e4, 2e-3}}) {
    ops::Task ln("layer_norm.x86", Json::object({{"data", tensor(k.shape)}, {"epsilon", 1e-5}}), kTarget);
    ops::Compute c = ln.compute(ln.default_config());
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 29);
    std::mt19937_64 rng(static_cast<uint64_t>(k.shape[1] * 1000 + k.shape[2]));
    std::normal_distribution<double> value(k.mean, 1.0);
    for (int64_t i = 0; i < inputs[0].numel(); ++i) testing::set_elem(inputs[0], i, value(rng));
    std::vector<Host> host;
    for (const auto &t : inputs) host.push_back(testing::to_host(t));
    const Host want = naive_layer_norm(host[0], 2, 1e-5, &host[1], &host[2]);
    const int64_t rows = k.shape[1];
    for (int64_t r : {int64_t{1}, int64_t{2}}) {
      if (rows % r != 0) continue;
      for (int pipeline : {4, 8, 64}) {
        for (int one_pass : {1, 0}) {
          const std::string knobs = "tile_rows=[" + std::to_string(rows / r) + "," + std::to_string(r) +
                                    "];one_pass=" + std::to_string(one_pass) + ";pipeline=" + std::to_string(pipeline);
          autotune::Config cfg = ln.space().parse_config_text(knobs, ln.default_config());
          SCOPED_TRACE(testing::tensor(k.shape).dump() + " " + cfg.to_string());
          const double tol = one_pass || k.mean == 0.0 ? k.tol : 2 * k.tol;
          EXPECT_LE(testing::rel_error(want, testing::run_config(ln, cfg, inputs)[0]), tol);
          EXPECT_LE(testing::rel_error(want, testing::run_config_llvm(ln, cfg, inputs)[0]), tol);
        }
      }
    }
  }
}

// Every config of layer norm's space lowers (the tuner samples any of them): where a config's
// rows cannot be pipelined (statistics of one step, a single block) the knob leaves version 5's
// nest, never a ScheduleError. Shapes with a BERT row, rows no vector divides, one short row.
TEST(Norm, LayerNormEveryConfigLowers) {
  for (const auto &shape : std::vector<std::vector<int64_t>>{{1, 12, 768}, {2, 7, 33}, {4, 24}, {1, 1, 5}}) {
    ops::Task ln("layer_norm.x86", Json::object({{"data", tensor(shape)}}), kTarget);
    SCOPED_TRACE(testing::tensor(shape).dump());
    int64_t lowered = 0, pipelined = 0;
    ln.space().for_each_valid([&](const autotune::Config &cfg) {
      try {
        pipelined += pipelined_row_loops(ln.lower(cfg, "op")) > 0;
        ++lowered;
      } catch (const std::exception &e) {
        ADD_FAILURE() << cfg.to_string() << ": " << e.what();
        return false;
      }
      return true;
    });
    EXPECT_EQ(lowered, ln.space().count_valid());
    // The BERT row and the rows of 33 have configs that pipeline; a tensor of one row has none.
    if (shape[shape.size() - 2] > 1 && shape.back() > 24) {
      EXPECT_GT(pipelined, 0);
    }
    if (shape[1] == 1) {
      EXPECT_EQ(pipelined, 0);
    }
  }
}

// Epsilon is added to the variance: rows of +1 and -1 (variance 1) with epsilon 0.5 scale by
// 1 / sqrt(1.5), not by 1; constant rows (variance 0) give beta, not NaN or infinity. Both forms of
// the statistics, blocks of 1 and 4 rows.
TEST(Norm, LayerNormEpsilonIsAddedToTheVariance) {
  for (double eps : {0.5, 1e-5}) {
    ops::Task ln("layer_norm.x86", Json::object({{"data", tensor({1, 8, 40})}, {"epsilon", eps}}), kTarget);
    ops::Compute c = ln.compute(ln.default_config());
    std::vector<deploy::Tensor> inputs = testing::make_inputs(c, 17);
    for (int64_t i = 0; i < inputs[0].numel(); ++i) {
      const int64_t row = i / 40;
      // Rows 0-3 alternate +1 and -1 around 3; rows 4-7 are constant.
      testing::set_elem(inputs[0], i, row < 4 ? 3.0 + (i % 2 == 0 ? 1.0 : -1.0) : static_cast<double>(row));
    }
    std::vector<Host> host;
    for (const auto &t : inputs) host.push_back(testing::to_host(t));
    const Host want = naive_layer_norm(host[0], 2, eps, &host[1], &host[2]);
    // The reference itself: the first element of row 0 is gamma[0] / sqrt(1 + eps) + beta[0], the
    // first of row 4 is beta[0].
    ASSERT_NEAR(want.data[0], host[1].data[0] / std::sqrt(1.0 + eps) + host[2].data[0], 1e-12);
    ASSERT_EQ(want.data[4 * 40], host[2].data[0]);
    for (const char *knobs :
         {"tile_rows=[8,1];one_pass=1", "tile_rows=[2,4];one_pass=1", "tile_rows=[2,4];one_pass=0"}) {
      autotune::Config cfg = ln.space().parse_config_text(knobs, ln.default_config());
      SCOPED_TRACE("epsilon " + std::to_string(eps) + " " + cfg.to_string());
      EXPECT_LE(testing::rel_error(want, testing::run_config_llvm(ln, cfg, inputs)[0]), 1e-5);
    }
  }
}

// The default schedule of layer norm 1x128x768 pipelines two rows a block, 32 blocks a parallel
// iteration: a loop over the row stores the next block's statistics and this block's output (none
// with pipeline=0, version 5's nest); an odd number of rows pipelines one row a block, the largest
// divisor of the rows that 32 does not divide; a tensor past 1 MiB keeps version 5's nest.
TEST(Norm, LayerNormDefaultPipelinesRows) {
  ops::Task ln("layer_norm.x86", Json::object({{"data", tensor({1, 128, 768})}}), kTarget);
  const autotune::Config def = ln.default_config();
  EXPECT_EQ(def.split("tile_rows")[1], 2);
  EXPECT_EQ(def.choice_int("pipeline"), 32);
  const ir::LoweredFunc f = ln.lower(def, "op");
  EXPECT_EQ(pipelined_row_loops(f), 1) << f;
  EXPECT_EQ(pipelined_row_loops(ln.lower(ln.space().parse_config_text("pipeline=0", def), "op")), 0);
  ops::Task odd("layer_norm.x86", Json::object({{"data", tensor({1, 7, 768})}}), kTarget);
  EXPECT_EQ(odd.default_config().split("tile_rows")[1], 1);
  EXPECT_EQ(pipelined_row_loops(odd.lower(odd.default_config(), "op")), 1);
  ops::Task long_rows("layer_norm.x86", Json::object({{"data", tensor({1, 8, 4096})}}), kTarget);
  EXPECT_EQ(long_rows.default_config().split("tile_rows")[1], 1) << "a row past 2048 values takes a block alone";
  ops::Task large("layer_norm.x86", Json::object({{"data", tensor({1, 384, 1024})}}), kTarget);
  EXPECT_EQ(large.default_config().choice_int("pipeline"), 0) << "past 1 MiB memory, not latency, bounds it";
  EXPECT_EQ(pipelined_row_loops(large.lower(large.default_config(), "op")), 0);
}

TEST(Norm, LayerNormRejectsLeadingAxes) {
  Json args = Json::object({{"data", tensor({4, 8})}, {"axes", Json::array_of(std::vector<int64_t>{0})}});
  EXPECT_THROW(ops::Task("layer_norm.x86", args, kTarget), ops::OpError);
}

}  // namespace
}  // namespace kiln
