// layout_transform.x86 to and from NCHW: the transposed schedule (the code generator rearranging
// a block's strided loads or stores with shuffles) and the plain one give every element where a
// naive reference puts it, for blocks that are powers of two (a butterfly of shuffles) and blocks
// that are not (a chain of shuffles per vector), narrower and wider than a vector, with positions
// (rows x columns) that no vector width divides, at 16 and 8 lanes; where the positions fill whole
// vectors, the transposed code has no gather or scatter; a block of two vectors spills nothing.
#include <gtest/gtest.h>

#include <sstream>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/op_test_util.h"

namespace kiln {
namespace {

using contracts::Json;

struct Case {
  std::vector<int64_t> nchw;
  int64_t src, dst;
};

std::vector<int64_t> blocked(const std::vector<int64_t> &nchw, int64_t block) {
  if (block == 0) return nchw;
  return {nchw[0], nchw[1] / block, nchw[2], nchw[3], block};
}

// Offset of NCHW element (n, c, h, w) in the layout with channel blocks of `block` (0: NCHW).
int64_t offset(const std::vector<int64_t> &nchw, int64_t block, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t C = nchw[1], H = nchw[2], W = nchw[3];
  if (block == 0) return ((n * C + c) * H + h) * W + w;
  return ((((n * (C / block) + c / block) * H + h) * W + w) * block) + c % block;
}

std::string describe(const Case &c) {
  std::ostringstream o;
  o << "[" << c.nchw[0] << "," << c.nchw[1] << "," << c.nchw[2] << "," << c.nchw[3] << "] " << c.src << " -> "
    << c.dst;
  return o.str();
}

struct Built {
  ops::Task task;
  ir::LoweredFunc func;
  std::string llvm_ir;
};

void check_values(const Case &c, const char *target_text, bool transpose, bool expect_no_gather) {
  SCOPED_TRACE(describe(c) + " on " + target_text + (transpose ? ", transposed" : ", plain"));
  const ops::Target target = driver::resolve_target(target_text);
  ops::Task task("layout_transform.x86",
                 Json::object({{"data", testing::tensor(blocked(c.nchw, c.src))},
                               {"src_block", c.src},
                               {"dst_block", c.dst}}),
                 target);
  autotune::Config cfg = task.default_config();
  ASSERT_TRUE(cfg.choice_bool("transpose")) << "the transposed schedule is the default to and from NCHW";
  cfg = task.space().parse_config_text(transpose ? "transpose=1" : "transpose=0", cfg);
  ops::Instance inst = task.instantiate(cfg);
  ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
  codegen::LLVMBuildOptions options;
  options.target = target_text;
  if (expect_no_gather) {
    const std::string text = codegen::emit_llvm_ir({f}, options);
    std::ostringstream lowered;
    lowered << f;
    EXPECT_EQ(text.find("masked.gather"), std::string::npos) << lowered.str();
    EXPECT_EQ(text.find("masked.scatter"), std::string::npos) << lowered.str();
  }
  deploy::Tensor in = deploy::Tensor::empty(blocked(c.nchw, c.src), deploy::DType::of<float>());
  deploy::Tensor out = deploy::Tensor::empty(blocked(c.nchw, c.dst), deploy::DType::of<float>());
  // Every element distinct (its own offset), so a misplaced one shows.
  for (int64_t i = 0; i < in.numel(); ++i) in.data_as<float>()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < out.numel(); ++i) out.data_as<float>()[i] = -1.0f;
  codegen::LLVMModule m(f, options);
  std::vector<deploy::Tensor> args = {in, out};
  ASSERT_EQ(m.call_status("op", args), 0) << m.last_error();
  int64_t wrong = 0;
  std::string first;
  for (int64_t n = 0; n < c.nchw[0]; ++n) {
    for (int64_t ch = 0; ch < c.nchw[1]; ++ch) {
      for (int64_t h = 0; h < c.nchw[2]; ++h) {
        for (int64_t w = 0; w < c.nchw[3]; ++w) {
          const float want = static_cast<float>(offset(c.nchw, c.src, n, ch, h, w));
          const float got = out.data_as<float>()[offset(c.nchw, c.dst, n, ch, h, w)];
          if (got == want) continue;
          if (wrong++ == 0) {
            std::ostringstream o;
            o << "element (" << n << "," << ch << "," << h << "," << w << "): got " << got << ", want " << want;
            first = o.str();
          }
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0) << first;
}

const char *kAvx512 = "llvm -mcpu=native";  // 16 lanes on the machines CI runs on
const char *kAvx2 = "llvm -mcpu=native -mattr=-avx512f";  // 8 lanes

TEST(LayoutTransform, TransposedAndPlainSchedulesPlaceEveryElement) {
  const std::vector<Case> cases = {
      {{1, 64, 14, 14}, 16, 0},  // square butterfly at 16 lanes; 196 positions: a partial last vector
      {{1, 128, 7, 7}, 32, 0},   // a block of two vectors
      {{2, 24, 7, 5}, 8, 0},     // a block narrower than a vector, batch 2
      {{1, 58, 6, 7}, 29, 0},    // no power of two: a chain of shuffles per vector
      {{1, 3, 17, 19}, 0, 3},    // a network's input into blocks of 3 (one block: positions in parallel)
      {{1, 116, 9, 9}, 0, 29},
      {{1, 64, 14, 14}, 0, 16},
      {{1, 96, 5, 5}, 0, 32},
      {{1, 48, 6, 7}, 0, 24},
      {{3, 16, 1, 1}, 0, 16},  // fewer positions than a vector
      {{3, 16, 1, 1}, 16, 0},
      {{1, 16, 20, 20}, 16, 0},  // one block: 25 vectors of positions in parallel ranges, the last partial
  };
  for (const Case &c : cases) {
    for (const char *target : {kAvx512, kAvx2}) {
      check_values(c, target, true, false);
      check_values(c, target, false, false);
    }
  }
}

TEST(LayoutTransform, TransposedCodeHasNoGatherOrScatterWherePositionsFillVectors) {
  // 64 positions: four vectors of 16, eight of 8.
  for (const Case &c : std::vector<Case>{{{1, 32, 8, 8}, 16, 0},
                                         {{1, 64, 8, 8}, 32, 0},
                                         {{1, 32, 8, 8}, 8, 0},
                                         {{1, 58, 8, 8}, 29, 0},
                                         {{1, 3, 8, 8}, 0, 3},
                                         {{1, 32, 8, 8}, 0, 16},
                                         {{1, 64, 8, 8}, 0, 32},
                                         {{1, 58, 8, 8}, 0, 29}}) {
    for (const char *target : {kAvx512, kAvx2}) check_values(c, target, true, true);
  }
}

// A block of two vectors (32 channels at 16 lanes, four at 8) is transposed as independent
// squares, one after the other: loaded, shuffled and stored a square at a time, so no vector is
// spilled to the stack (all 32 vectors of the block at once, with the butterfly's temporaries,
// spilled about 40 vectors an iteration and ran the transform at 0.6 of a copy's speed).
TEST(LayoutTransform, BlocksOfTwoVectorsAreTransposedWithoutSpills) {
  for (const Case &c : std::vector<Case>{{{1, 64, 8, 8}, 32, 0}, {{1, 64, 8, 8}, 0, 32}}) {
    for (const char *target_text : {kAvx512, kAvx2}) {
      SCOPED_TRACE(describe(c) + " on " + target_text);
      const ops::Target target = driver::resolve_target(target_text);
      ops::Task task("layout_transform.x86",
                     Json::object({{"data", testing::tensor(blocked(c.nchw, c.src))},
                                   {"src_block", c.src},
                                   {"dst_block", c.dst}}),
                     target);
      ops::Instance inst = task.instantiate(task.default_config());
      ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
      codegen::LLVMBuildOptions options;
      options.target = target_text;
      std::istringstream text(codegen::emit_assembly({f}, options));
      int spills = 0;
      std::string first;
      for (std::string line; std::getline(text, line);) {
        const bool vector = line.find("mm") != std::string::npos;  // %xmm, %ymm, %zmm
        if (!vector || line.find("(%rsp)") == std::string::npos) continue;
        if (spills++ == 0) first = line;
      }
      EXPECT_EQ(spills, 0) << "first: " << first;
      check_values(c, target_text, true, true);
    }
  }
}

TEST(LayoutTransform, OnlyTransformsToOrFromNchwHaveTheTransposeKnob) {
  const ops::Target target = driver::resolve_target(kAvx512);
  ops::Task between("layout_transform.x86",
                    Json::object({{"data", testing::tensor({1, 2, 4, 4, 16})}, {"src_block", 16}, {"dst_block", 8}}),
                    target);
  EXPECT_THROW(between.space().parse_config_text("transpose=1", between.default_config()), UserError);
}

}  // namespace
}  // namespace kiln
