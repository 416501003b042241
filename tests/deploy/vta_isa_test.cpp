// VtaConfig names and validation, the instruction and micro-op layouts against the reference bit
// positions, encode/decode round trips, and random instruction words run without a crash.
#include <gtest/gtest.h>

#include <random>

#include "deploy/vta/config.h"
#include "deploy/vta/isa.h"
#include "deploy/vta/simulator.h"

namespace kiln::vta {
namespace {

TEST(VtaConfig, DefaultIsTheReferenceDesign) {
  const VtaConfig c;
  EXPECT_EQ(c.model_name(), "sim_1x16_i8w8a32");
  EXPECT_EQ(c.inp_elem_bytes(), 16);
  EXPECT_EQ(c.wgt_elem_bytes(), 256);
  EXPECT_EQ(c.acc_elem_bytes(), 64);
  EXPECT_EQ(c.out_elem_bytes(), 16);
  EXPECT_EQ(c.uop_depth(), 8192);
  EXPECT_EQ(c.inp_depth(), 2048);
  EXPECT_EQ(c.wgt_depth(), 1024);
  EXPECT_EQ(c.acc_depth(), 2048);
  EXPECT_DOUBLE_EQ(c.peak_gops(), 51.2);
  EXPECT_NO_THROW(c.validate());
}

TEST(VtaConfig, ParsesBothFormsOfTheName) {
  EXPECT_EQ(VtaConfig::parse("sim_1x16_i8w8a32"), VtaConfig{});
  EXPECT_EQ(VtaConfig::parse("sim_1x16_i8w8a32_15_15_18_17"), VtaConfig{});
  const VtaConfig c = VtaConfig::parse("sim_2x16_i8w8a32_15_16_18_17");
  EXPECT_EQ(c.batch(), 2);
  EXPECT_EQ(c.log_inp_buff_size, 16);
  EXPECT_EQ(c.model_name(), "sim_2x16_i8w8a32_15_16_18_17");
  EXPECT_EQ(VtaConfig::parse(c.model_name()), c);
}

TEST(VtaConfig, BadNamesAndConfigsAreConfigErrors) {
  for (const char *bad : {"vta", "sim_1x16", "sim_1x15_i8w8a32", "sim_1x16_i8w8a4", "sim_1x16_i8w8a32_15_15_24_17",
                          "sim_1x16_i8w8a32_15_15_18"}) {
    EXPECT_THROW(VtaConfig::parse(bad), VtaConfigError) << bad;
  }
  try {
    VtaConfig::parse("sim_1x15_i8w8a32");
    FAIL();
  } catch (const VtaConfigError &e) {
    EXPECT_NE(std::string(e.what()).find("not a power of two"), std::string::npos) << e.what();
  }
  VtaConfig c;
  c.bus_width_bytes = 12;
  EXPECT_THROW(c.validate(), VtaConfigError);
  c = VtaConfig{};
  c.log_wgt_buff_size = 24;  // 65536 weights: the index fields no longer fit 128 bits
  try {
    c.validate();
    FAIL();
  } catch (const VtaConfigError &e) {
    EXPECT_NE(std::string(e.what()).find("128 bits"), std::string::npos) << e.what();
  }
}

void expect_field(const BitField &f, int pos, int width, const char *name) {
  EXPECT_EQ(f.pos, pos) << name;
  EXPECT_EQ(f.width, width) << name;
}

TEST(VtaIsa, DefaultLayoutMatchesTheReferenceBitPositions) {
  const IsaLayout l = IsaLayout::from(VtaConfig{});
  expect_field(l.opcode, 0, 3, "opcode");
  expect_field(l.pop_prev, 3, 1, "pop_prev");
  expect_field(l.pop_next, 4, 1, "pop_next");
  expect_field(l.push_prev, 5, 1, "push_prev");
  expect_field(l.push_next, 6, 1, "push_next");
  expect_field(l.mem_type, 7, 3, "memory_type");
  expect_field(l.sram_base, 10, 16, "sram_base");
  expect_field(l.dram_base, 26, 32, "dram_base");
  expect_field(l.y_size, 64, 16, "y_size");
  expect_field(l.x_size, 80, 16, "x_size");
  expect_field(l.x_stride, 96, 16, "x_stride");
  expect_field(l.y_pad_0, 112, 4, "y_pad_0");
  expect_field(l.y_pad_1, 116, 4, "y_pad_1");
  expect_field(l.x_pad_0, 120, 4, "x_pad_0");
  expect_field(l.x_pad_1, 124, 4, "x_pad_1");
  expect_field(l.reset, 7, 1, "reset_reg");
  expect_field(l.uop_bgn, 8, 13, "uop_bgn");
  expect_field(l.uop_end, 21, 14, "uop_end");
  expect_field(l.iter_out, 35, 14, "iter_out");
  expect_field(l.iter_in, 49, 14, "iter_in");
  expect_field(l.gemm_dst_factor_out, 64, 11, "dst_factor_out");
  expect_field(l.gemm_dst_factor_in, 75, 11, "dst_factor_in");
  expect_field(l.gemm_src_factor_out, 86, 11, "src_factor_out");
  expect_field(l.gemm_src_factor_in, 97, 11, "src_factor_in");
  expect_field(l.wgt_factor_out, 108, 10, "wgt_factor_out");
  expect_field(l.wgt_factor_in, 118, 10, "wgt_factor_in");
  expect_field(l.alu_dst_factor_out, 64, 11, "alu dst_factor_out");
  expect_field(l.alu_src_factor_in, 97, 11, "alu src_factor_in");
  expect_field(l.alu_opcode, 108, 3, "alu_opcode");
  expect_field(l.use_imm, 111, 1, "use_imm");
  expect_field(l.imm, 112, 16, "imm");
  expect_field(l.uop_dst, 0, 11, "uop dst");
  expect_field(l.uop_src, 11, 11, "uop src");
  expect_field(l.uop_wgt, 22, 10, "uop wgt");
}

TEST(VtaIsa, EncodesALoadAtTheReferenceBits) {
  const Isa isa{VtaConfig{}};
  Insn i;
  i.opcode = Opcode::Load;
  i.deps.pop_next = true;
  i.mem = MemInsn{MemType::Inp, 5, 0x1234, 1, 4, 4, 0, 0, 0, 0};
  i.mem.x_pad_1 = 3;
  const InsnWord w = isa.encode(i);
  EXPECT_EQ(w.lo, (uint64_t{1} << 4) | (uint64_t{2} << 7) | (uint64_t{5} << 10) | (uint64_t{0x1234} << 26));
  EXPECT_EQ(w.hi, uint64_t{1} | (uint64_t{4} << 16) | (uint64_t{4} << 32) | (uint64_t{3} << 60));
  EXPECT_EQ(isa.decode(w), i);
  EXPECT_EQ(isa.encode_uop(Uop{3, 5, 7}), 3u | (5u << 11) | (7u << 22));
  EXPECT_EQ(isa.decode_uop(3u | (5u << 11) | (7u << 22)), (Uop{3, 5, 7}));
}

TEST(VtaIsa, RandomInstructionsRoundTrip) {
  const Isa isa{VtaConfig{}};
  std::mt19937 rng(7);
  auto r = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  for (int k = 0; k < 2000; ++k) {
    Insn i;
    i.opcode = static_cast<Opcode>(r(5));
    i.deps = DepFlags{r(2) == 1, r(2) == 1, r(2) == 1, r(2) == 1};
    switch (i.opcode) {
      case Opcode::Load:
        i.mem = MemInsn{static_cast<MemType>(r(4)),
                        r(65536),
                        r(1u << 31),
                        r(65536),
                        r(65536),
                        r(65536),
                        r(16),
                        r(16),
                        r(16),
                        r(16)};
        break;
      case Opcode::Store:
        i.mem = MemInsn{MemType::Out, r(65536), r(1u << 31), r(65536), r(65536), r(65536), 0, 0, 0, 0};
        break;
      case Opcode::Gemm:
        i.gemm.reset = r(2) == 1;
        i.gemm.loop = LoopNest{r(8192), r(16384), r(16384), r(16384), r(2048), r(2048), r(2048), r(2048)};
        i.gemm.wgt_factor_out = r(1024);
        i.gemm.wgt_factor_in = r(1024);
        break;
      case Opcode::Alu:
        i.alu.loop = LoopNest{r(8192), r(16384), r(16384), r(16384), r(2048), r(2048), r(2048), r(2048)};
        i.alu.op = static_cast<AluOp>(r(5));
        i.alu.use_imm = r(2) == 1;
        i.alu.imm = static_cast<int32_t>(r(65536)) - 32768;
        break;
      case Opcode::Finish:
        break;
    }
    const Module m = module_of(i);
    if (m == Module::Load) i.deps.pop_prev = i.deps.push_prev = false;
    if (m == Module::Store) i.deps.pop_next = i.deps.push_next = false;
    ASSERT_EQ(isa.decode(isa.encode(i)), i) << disassemble(i);
  }
}

TEST(VtaIsa, BadWordsAreDecodeErrors) {
  const Isa isa{VtaConfig{}};
  EXPECT_THROW(isa.decode(InsnWord{7, 0}), VtaDecodeError);                                        // opcode 7
  EXPECT_THROW(isa.decode(InsnWord{1 | (uint64_t{2} << 7), 0}), VtaDecodeError);                   // STORE of INP
  EXPECT_THROW(isa.decode(InsnWord{(uint64_t{1} << 3) | (uint64_t{2} << 7), 0}), VtaDecodeError);  // load pop_prev
  Insn i;
  i.opcode = Opcode::Load;
  i.mem.x_pad_0 = 16;
  try {
    isa.encode(i);
    FAIL();
  } catch (const VtaDecodeError &e) {
    EXPECT_NE(std::string(e.what()).find("x_pad_0"), std::string::npos) << e.what();
  }
}

TEST(VtaIsa, DisassemblyNamesTheFields) {
  Insn i;
  i.opcode = Opcode::Alu;
  i.alu.op = AluOp::Shr;
  i.alu.use_imm = true;
  i.alu.imm = -3;
  i.alu.loop.uop_end = 1;
  i.deps.push_next = true;
  EXPECT_EQ(disassemble(i), "ALU SHR imm=-3 uop=[0,1) iter=1x1 dst=(0,0) src=(0,0) [push_next]");
}

// Random words (biased towards valid opcodes and small fields) run on the simulator either to
// completion or to a VTA error; never a crash, a hang or another exception type.
TEST(VtaFuzz, RandomStreamsEndInAVtaErrorOrFinish) {
  const VtaConfig cfg;
  Dram dram;
  const uint64_t region = dram.alloc(1 << 16);
  SimOptions opt;
  opt.max_steps = 1 << 16;
  Simulator sim(cfg, dram, opt);
  const Isa &isa = sim.isa();
  std::mt19937_64 rng(11);
  int finished = 0, errors = 0;
  for (int k = 0; k < 3000; ++k) {
    std::vector<InsnWord> s;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int j = 0; j < n; ++j) {
      InsnWord w{rng(), rng()};
      if (rng() % 2) {
        // Mostly valid opcodes and memory types, small sizes and addresses near the region.
        w.lo = (w.lo & ~uint64_t{0x3ff}) | (rng() % 5) | ((rng() % 6) << 7);
        w.lo &= ~(uint64_t{0xffffffff} << 26);
        w.lo |= ((region / 16 + rng() % 64) << 26);
        w.hi &= 0xf0f0000f000f000full;
        w.lo &= ~(uint64_t{0x3fff} << 35) & ~(uint64_t{0x3fff} << 49);
        w.lo |= (rng() % 4) << 35 | (rng() % 4) << 49;
      }
      s.push_back(w);
    }
    if (rng() % 4) s.push_back(isa.encode(Insn{}));
    try {
      sim.run(s);
      ++finished;
    } catch (const VtaError &) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(finished, 0);
}

}  // namespace
}  // namespace kiln::vta
