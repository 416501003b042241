// The reference design's golden tests on the simulator, built through the runtime API and checked
// bit-exactly against plain integer references written here: the 4x16x64 GEMM with its shift/clip
// epilogue (one stream, and two virtual threads with tokens), the 1x256x256 tutorial GEMM and its
// counters, padded loads, every ALU op with and without an immediate, a ResNet-18 layer with
// oc_nthread = 2; then the error classes of bad programs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "deploy/vta/conv2d_program.h"
#include "deploy/vta/runtime.h"
#include "deploy/vta/simulator.h"

namespace kiln::vta {
namespace {

std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> v(n);
  for (auto &x : v) x = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  return v;
}

// x: 4 rows of 16; w: 4 blocks of [16 oc][16 ic]; y: [row][block][16]. Each of `nthread` virtual
// threads handles 4 / nthread rows in its own half of the buffers.
std::vector<int8_t> gemm_4x16x64(Runtime &rt, const std::vector<int8_t> &x, const std::vector<int8_t> &w, int nthread,
                                 SimCounters *counters) {
  const VtaConfig &cfg = rt.config();
  const DramBuffer dx = rt.alloc(x.size()), dw = rt.alloc(w.size()), dy = rt.alloc(4 * 4 * 16);
  rt.copy_to_device(dx, x.data(), x.size());
  rt.copy_to_device(dw, w.data(), w.size());
  const uint32_t rows = 4 / nthread;
  for (int t = 0; t < nthread; ++t) {
    const uint32_t inp = t * cfg.inp_depth() / 2, wgt = t * cfg.wgt_depth() / 2;
    const std::string tag = std::to_string(t);
    rt.load_2d(dx, t * rows, rows, 1, rows, MemType::Inp, inp);
    rt.load_2d(dw, 0, 4, 1, 4, MemType::Wgt, wgt);
    rt.dep_push(Stage::Load, Stage::Compute);
  }
  for (int t = 0; t < nthread; ++t) {
    const uint32_t inp = t * cfg.inp_depth() / 2, wgt = t * cfg.wgt_depth() / 2, acc = t * cfg.acc_depth() / 2;
    const std::string tag = std::to_string(t);
    rt.dep_pop(Stage::Load, Stage::Compute);
    rt.push_gemm(
        "reset" + tag,
        [&](UopKernelBuilder &k) {
          k.loop_begin(rows, 4, 0);
          k.loop_begin(4, 1, 0);
          k.push(acc, 0, 0);
          k.loop_end();
          k.loop_end();
        },
        true);
    rt.push_gemm("gemm" + tag, [&](UopKernelBuilder &k) {
      k.loop_begin(rows, 4, 1, 0);
      k.loop_begin(4, 1, 0, 1);
      k.push(acc, inp, wgt);
      k.loop_end();
      k.loop_end();
    });
    auto all = [&](UopKernelBuilder &k) {
      k.loop_begin(rows * 4, 1, 1);
      k.push(acc, acc);
      k.loop_end();
    };
    rt.push_alu("epilogue" + tag, all, AluOp::Shr, 8);
    rt.push_alu("epilogue" + tag, all, AluOp::Max, 0);
    rt.push_alu("epilogue" + tag, all, AluOp::Min, 127);
    rt.dep_push(Stage::Compute, Stage::Store);
  }
  for (int t = 0; t < nthread; ++t) {
    rt.dep_pop(Stage::Compute, Stage::Store);
    rt.store_2d(dy, t * rows * 4, rows * 4, 1, rows * 4, t * cfg.acc_depth() / 2);
    rt.dep_push(Stage::Store, Stage::Compute);
  }
  for (int t = 0; t < nthread; ++t) rt.dep_pop(Stage::Store, Stage::Compute);
  *counters = rt.synchronize();
  std::vector<int8_t> y(dy.bytes);
  rt.copy_from_device(y.data(), dy, y.size());
  return y;
}

std::vector<int8_t> gemm_4x16x64_reference(const std::vector<int8_t> &x, const std::vector<int8_t> &w) {
  std::vector<int8_t> y(4 * 4 * 16);
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 4; ++j)
      for (int oc = 0; oc < 16; ++oc) {
        int32_t s = 0;
        for (int ic = 0; ic < 16; ++ic) s += int32_t{x[b * 16 + ic]} * w[(j * 16 + oc) * 16 + ic];
        y[(b * 4 + j) * 16 + oc] = static_cast<int8_t>(std::clamp(s >> 8, 0, 127));
      }
  return y;
}

TEST(VtaGolden, Gemm4x16x64WithShiftClipEpilogue) {
  const auto x = random_int8(4 * 16, 1), w = random_int8(4 * 16 * 16, 2);
  const auto expected = gemm_4x16x64_reference(x, w);
  ASSERT_GT(std::count_if(expected.begin(), expected.end(), [](int8_t v) { return v > 0 && v < 127; }), 4);
  for (int nthread : {1, 2}) {
    Runtime rt;
    SimCounters c;
    EXPECT_EQ(gemm_4x16x64(rt, x, w, nthread, &c), expected) << "nthread " << nthread;
    EXPECT_EQ(c.gemm_counter, 16u);
    EXPECT_EQ(c.alu_counter, 48u);
    EXPECT_EQ(c.inp_load_nbytes, 64u);
    EXPECT_EQ(c.wgt_load_nbytes, 1024u * nthread);
    EXPECT_EQ(c.out_store_nbytes, 256u);
    EXPECT_GT(c.total_cycles, 0u);
  }
}

TEST(VtaGolden, Tutorial1x256x256GemmAndItsCounters) {
  const auto x = random_int8(256, 3), w = random_int8(256 * 256, 4);
  // Weights packed as [oc block][ic block][16 oc][16 ic].
  std::vector<int8_t> wp(w.size());
  for (int o = 0; o < 256; ++o)
    for (int i = 0; i < 256; ++i) wp[(((o / 16) * 16 + i / 16) * 16 + o % 16) * 16 + i % 16] = w[o * 256 + i];
  Runtime rt;
  const DramBuffer dx = rt.alloc(256), dw = rt.alloc(wp.size()), dy = rt.alloc(256);
  rt.copy_to_device(dx, x.data(), 256);
  rt.copy_to_device(dw, wp.data(), wp.size());
  rt.load_2d(dx, 0, 16, 1, 16, MemType::Inp, 0);
  rt.load_2d(dw, 0, 256, 1, 256, MemType::Wgt, 0);
  rt.dep_push(Stage::Load, Stage::Compute);
  rt.dep_pop(Stage::Load, Stage::Compute);
  rt.push_gemm(
      "reset",
      [](UopKernelBuilder &k) {
        k.loop_begin(16, 1, 0);
        k.push(0, 0);
        k.loop_end();
      },
      true);
  rt.push_gemm("gemm", [](UopKernelBuilder &k) {
    k.loop_begin(16, 1, 0, 16);
    k.loop_begin(16, 0, 1, 1);
    k.push(0, 0, 0);
    k.loop_end();
    k.loop_end();
  });
  rt.dep_push(Stage::Compute, Stage::Store);
  rt.dep_pop(Stage::Compute, Stage::Store);
  rt.store_2d(dy, 0, 16, 1, 16, 0);
  const SimCounters c = rt.synchronize();
  std::vector<int8_t> y(256);
  rt.copy_from_device(y.data(), dy, 256);
  for (int o = 0; o < 256; ++o) {
    int32_t s = 0;
    for (int i = 0; i < 256; ++i) s += int32_t{x[i]} * w[o * 256 + i];
    ASSERT_EQ(y[o], static_cast<int8_t>(s)) << "output " << o;  // stored with wrap-around
  }
  EXPECT_EQ(c.inp_load_nbytes, 256u);
  EXPECT_EQ(c.wgt_load_nbytes, 65536u);
  EXPECT_EQ(c.out_store_nbytes, 256u);
  EXPECT_EQ(c.gemm_counter, 256u);
  EXPECT_EQ(c.acc_load_nbytes, 0u);
  EXPECT_EQ(c.uop_load_nbytes, 8u);  // two one-micro-op kernels
}

// A 3x5 block of INP elements loaded with padding, copied to OUT through an identity GEMM and
// stored whole: the zeros land where the padding says.
TEST(VtaGolden, PaddedLoads) {
  const int Y = 3, X = 5, stride = 7;
  const auto src = random_int8(Y * stride * 16, 5);
  std::vector<int8_t> eye(256, 0);
  for (int i = 0; i < 16; ++i) eye[i * 16 + i] = 1;
  for (Pad pad : {Pad{1, 0, 0, 0}, Pad{0, 2, 0, 0}, Pad{0, 0, 3, 0}, Pad{0, 0, 0, 1}, Pad{2, 1, 1, 2}}) {
    Runtime rt;
    const uint32_t rows = pad.y0 + Y + pad.y1, cols = pad.x0 + X + pad.x1, n = rows * cols;
    const DramBuffer ds = rt.alloc(src.size()), de = rt.alloc(256), dy = rt.alloc(n * 16);
    rt.copy_to_device(ds, src.data(), src.size());
    rt.copy_to_device(de, eye.data(), 256);
    rt.load_2d(ds, 0, X, Y, stride, MemType::Inp, 10, pad);
    rt.load_2d(de, 0, 1, 1, 1, MemType::Wgt, 0);
    rt.dep_push(Stage::Load, Stage::Compute);
    rt.dep_pop(Stage::Load, Stage::Compute);
    auto rows_kernel = [&](UopKernelBuilder &k) {
      k.loop_begin(n, 1, 1);
      k.push(0, 10, 0);
      k.loop_end();
    };
    rt.push_gemm("copy", rows_kernel, true);
    rt.push_gemm("copy", rows_kernel);
    rt.dep_push(Stage::Compute, Stage::Store);
    rt.dep_pop(Stage::Compute, Stage::Store);
    rt.store_2d(dy, 0, n, 1, n, 0);
    rt.synchronize();
    std::vector<int8_t> y(n * 16);
    rt.copy_from_device(y.data(), dy, y.size());
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c)
        for (int l = 0; l < 16; ++l) {
          const bool inside = r >= pad.y0 && r < pad.y0 + Y && c >= pad.x0 && c < pad.x0 + X;
          const int8_t want = inside ? src[((r - pad.y0) * stride + (c - pad.x0)) * 16 + l] : 0;
          ASSERT_EQ(y[(r * cols + c) * 16 + l], want)
              << "pad (" << pad.y0 << "," << pad.y1 << "," << pad.x0 << "," << pad.x1 << ") row " << r << " col " << c;
        }
  }
}

int64_t alu_reference(AluOp op, int64_t a, int64_t b) {
  switch (op) {
    case AluOp::Min:
      return std::min(a, b);
    case AluOp::Max:
      return std::max(a, b);
    case AluOp::Add:
      return a + b;
    case AluOp::Mul:
      return a * b;
    case AluOp::Shr:
      return b >= 0 ? a >> b : a * (int64_t{1} << -b);
  }
  return 0;
}

// int32 accumulators in [-16, 16) loaded from DRAM; dst = op(dst, src or imm) over 8 rows.
TEST(VtaGolden, EveryAluOpWithAndWithoutImmediate) {
  std::mt19937 rng(6);
  const int n = 8, lanes = 16;
  for (AluOp op : {AluOp::Min, AluOp::Max, AluOp::Add, AluOp::Shr, AluOp::Mul}) {
    for (bool use_imm : {false, true}) {
      std::vector<int32_t> a(2 * n * lanes);
      for (auto &v : a) v = static_cast<int32_t>(rng() % 32) - 16;
      const int32_t imm = static_cast<int32_t>(rng() % 32) - 16;
      Runtime rt;
      const DramBuffer da = rt.alloc(a.size() * 4), dy = rt.alloc(n * lanes);
      rt.copy_to_device(da, a.data(), a.size() * 4);
      rt.load_2d(da, 0, 2 * n, 1, 2 * n, MemType::Acc, 0);
      auto kernel = [&](UopKernelBuilder &k) {
        k.loop_begin(n, 1, 1);
        k.push(0, n);
        k.loop_end();
      };
      if (use_imm) {
        rt.push_alu("k", kernel, op, imm);
      } else {
        rt.push_alu("k", kernel, op);
      }
      rt.dep_push(Stage::Compute, Stage::Store);
      rt.dep_pop(Stage::Compute, Stage::Store);
      rt.store_2d(dy, 0, n, 1, n, 0);
      const SimCounters c = rt.synchronize();
      EXPECT_EQ(c.alu_counter, static_cast<uint64_t>(n));
      EXPECT_EQ(c.acc_load_nbytes, 2u * n * 64);
      std::vector<int8_t> y(n * lanes);
      rt.copy_from_device(y.data(), dy, y.size());
      for (int i = 0; i < n * lanes; ++i) {
        const int64_t want = alu_reference(op, a[i], use_imm ? imm : a[n * lanes + i]);
        ASSERT_EQ(rt.simulator().acc_buffer()[i], static_cast<int32_t>(want))
            << alu_op_name(op) << (use_imm ? " imm" : "") << " lane " << i;
        ASSERT_EQ(y[i], static_cast<int8_t>(want)) << alu_op_name(op) << (use_imm ? " imm" : "") << " lane " << i;
      }
    }
  }
}

// A bare ACC load leaves OUT stale on the hardware (STORE reads OUT); the functional simulator's
// mode stores the accumulator truncated to int8 instead.
TEST(VtaGolden, StoreAfterAccLoadReadsOutOrTruncatedAcc) {
  std::vector<int32_t> a(4 * 16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 37) - 1000;
  for (bool from_out : {true, false}) {
    SimOptions opt;
    opt.store_from_out = from_out;
    Runtime rt(VtaConfig{}, opt);
    const DramBuffer da = rt.alloc(a.size() * 4), dy = rt.alloc(64);
    rt.copy_to_device(da, a.data(), a.size() * 4);
    rt.load_2d(da, 0, 4, 1, 4, MemType::Acc, 0);
    rt.dep_push(Stage::Compute, Stage::Store);
    rt.dep_pop(Stage::Compute, Stage::Store);
    rt.store_2d(dy, 0, 4, 1, 4, 0);
    rt.synchronize();
    std::vector<int8_t> y(64);
    rt.copy_from_device(y.data(), dy, 64);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], from_out ? 0 : static_cast<int8_t>(a[i])) << i;
  }
}

// ResNet-18's C2 layer (56x56, 64 -> 64, 3x3, pad 1) against a plain NCHW convolution.
TEST(VtaGolden, ResNet18LayerWithTwoVirtualThreads) {
  Conv2dLayer layer;
  const auto input = random_int8(64 * 56 * 56, 8);
  // Small weights keep (conv >> 8) mostly inside [0, 127], so the clip does not hide errors.
  std::vector<int8_t> weight = random_int8(64 * 64 * 9, 9);
  for (auto &v : weight) v = static_cast<int8_t>(v / 8);
  std::vector<int8_t> expected(64 * 56 * 56);
  int unclipped = 0;
  for (int o = 0; o < 64; ++o)
    for (int y = 0; y < 56; ++y)
      for (int x = 0; x < 56; ++x) {
        int32_t s = 0;
        for (int i = 0; i < 64; ++i)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = y + ky - 1, ix = x + kx - 1;
              if (iy < 0 || iy >= 56 || ix < 0 || ix >= 56) continue;
              s += int32_t{input[(i * 56 + iy) * 56 + ix]} * weight[((o * 64 + i) * 3 + ky) * 3 + kx];
            }
        const int32_t v = std::clamp(s >> 8, 0, 127);
        unclipped += v > 0 && v < 127;
        expected[(o * 56 + y) * 56 + x] = static_cast<int8_t>(v);
      }
  ASSERT_GT(unclipped, 10000);
  Runtime one, two;
  const Conv2dResult r1 = run_conv2d(one, layer, Conv2dSchedule{2, 1}, input, weight);
  const Conv2dResult r2 = run_conv2d(two, layer, Conv2dSchedule{2, 2}, input, weight);
  EXPECT_EQ(r1.output, expected);
  EXPECT_EQ(r2.output, expected);
  EXPECT_EQ(r1.counters.gemm_counter, 56u * 56 * 4 * 4 * 9);
  EXPECT_EQ(r2.counters.gemm_counter, r1.counters.gemm_counter);
  // Two virtual threads hide the loads behind compute: fewer cycles, higher GEMM utilisation.
  EXPECT_LT(r2.counters.total_cycles, r1.counters.total_cycles);
  EXPECT_GT(r2.counters.gemm_utilization(), r1.counters.gemm_utilization());
  // Kernels are recorded once per thread and stay resident.
  EXPECT_EQ(two.kernels_recorded(), 6u);
  EXPECT_EQ(two.uop_loads_emitted(), 6u);
}

// A 64-element INP load (1 + 16 per row + 1024 B / 8 B per cycle = 145 cycles) and a 100 micro-op
// GEMM (1 + 4 fill + 100 = 105 cycles) overlap without tokens and run back to back with one.
TEST(VtaCycles, ModulesOverlapOnlyAsTokensAllow) {
  for (bool token : {false, true}) {
    Dram dram;
    const uint64_t region = dram.alloc(64 * 16);
    Simulator sim(VtaConfig{}, dram);
    Insn load;
    load.opcode = Opcode::Load;
    load.mem = MemInsn{MemType::Inp, 0, static_cast<uint32_t>(region / 16), 1, 64, 64, 0, 0, 0, 0};
    load.deps.push_next = token;
    Insn gemm;
    gemm.opcode = Opcode::Gemm;
    gemm.gemm.reset = true;
    gemm.gemm.loop = LoopNest{0, 1, 1, 100, 0, 1, 0, 0};
    gemm.deps.pop_prev = token;
    const SimCounters c = sim.run({sim.isa().encode(load), sim.isa().encode(gemm), sim.isa().encode(Insn{})});
    EXPECT_EQ(c.load_busy_cycles, 145u);
    EXPECT_EQ(c.gemm_cycles, 105u);
    EXPECT_EQ(c.total_cycles, token ? 145u + 105 + 1 : 145u) << "token " << token;
    EXPECT_EQ(c.inp_load_nbytes, 1024u);
    EXPECT_EQ(c.gemm_counter, 0u);  // reset micro-ops do no MACs
  }
}

// ---- error classes ----

TEST(VtaErrors, HandBuiltDeadlockIsDetected) {
  Dram dram;
  Simulator sim(VtaConfig{}, dram);
  Insn gemm;
  gemm.opcode = Opcode::Gemm;
  gemm.deps.pop_prev = true;  // waits for a load that never pushes
  Insn store;
  store.opcode = Opcode::Store;
  store.mem.mem_type = MemType::Out;
  store.deps.pop_prev = true;  // waits for compute, which is stuck
  const std::vector<InsnWord> s = {sim.isa().encode(gemm), sim.isa().encode(store), sim.isa().encode(Insn{})};
  try {
    sim.run(s);
    FAIL() << "no deadlock reported";
  } catch (const VtaDeadlockError &e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("instruction 0 (GEMM"), std::string::npos) << m;
    EXPECT_NE(m.find("load->compute"), std::string::npos) << m;
    EXPECT_NE(m.find("compute->store"), std::string::npos) << m;
  }
}

TEST(VtaErrors, OutOfRangeDramLoadIsAnAddressError) {
  Runtime rt;
  const DramBuffer small = rt.alloc(4 * 16);
  rt.load_2d(small, 0, 8, 1, 8, MemType::Inp, 0);  // 8 elements from a 4-element buffer
  try {
    rt.synchronize();
    FAIL() << "no error";
  } catch (const VtaAddressError &e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("outside every allocated region"), std::string::npos) << m;
    EXPECT_NE(m.find("LOAD INP"), std::string::npos) << m;
  }
  // The runtime is usable again after the error.
  EXPECT_NO_THROW(rt.synchronize());
}

TEST(VtaErrors, SramIndexBeyondTheBufferIsAnAddressError) {
  Runtime rt;
  rt.push_alu(
      "far", [](UopKernelBuilder &k) { k.push(2047, 0); }, AluOp::Add, 1);
  EXPECT_NO_THROW(rt.synchronize());
  rt.push_alu(
      "far2",
      [](UopKernelBuilder &k) {
        k.loop_begin(2, 1, 0);
        k.push(2047, 0);
        k.loop_end();
      },
      AluOp::Add, 1);
  try {
    rt.synchronize();
    FAIL();
  } catch (const VtaAddressError &e) {
    EXPECT_NE(std::string(e.what()).find("ACC element 2048 beyond the buffer depth 2048"), std::string::npos)
        << e.what();
  }
}

TEST(VtaErrors, FinishWithLeftoverTokensOrMissingFinishIsAProtocolError) {
  Dram dram;
  Simulator sim(VtaConfig{}, dram);
  Insn noop;
  noop.opcode = Opcode::Load;
  noop.mem.mem_type = MemType::Uop;
  noop.deps.push_next = true;  // a compute->store token nobody pops
  try {
    sim.run({sim.isa().encode(noop), sim.isa().encode(Insn{})});
    FAIL();
  } catch (const VtaProtocolError &e) {
    EXPECT_NE(std::string(e.what()).find("1 token(s) left on compute->store"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sim.run({}), VtaProtocolError);
  EXPECT_THROW(sim.run({sim.isa().encode(Insn{}), sim.isa().encode(Insn{})}), VtaProtocolError);
}

TEST(VtaErrors, StepLimitStopsAHugeLoop) {
  Dram dram;
  SimOptions opt;
  opt.max_steps = 1000;
  Simulator sim(VtaConfig{}, dram, opt);
  Insn g;
  g.opcode = Opcode::Gemm;
  g.gemm.loop = LoopNest{0, 8000, 16000, 16000, 0, 0, 0, 0};
  EXPECT_THROW(sim.run({sim.isa().encode(g), sim.isa().encode(Insn{})}), VtaStepLimitError);
}

TEST(VtaRuntime, KernelsAreRecordedOnceAndReloadedAfterSynchronize) {
  Runtime rt;
  int built = 0;
  auto k = [&](UopKernelBuilder &b) {
    ++built;
    b.push(0, 0);
  };
  rt.push_gemm("k", k, true);
  rt.push_gemm("k", k, true);
  rt.synchronize();
  rt.push_gemm("k", k, true);
  rt.synchronize();
  EXPECT_EQ(built, 1);
  EXPECT_EQ(rt.uop_loads_emitted(), 2u);
  EXPECT_NE(rt.dump_last().find("LOAD UOP"), std::string::npos) << rt.dump_last();
  EXPECT_NE(rt.dump_last().find("FINISH [pop_prev pop_next]"), std::string::npos) << rt.dump_last();
}

TEST(VtaRuntime, BadCallsAreRuntimeErrors) {
  Runtime rt;
  EXPECT_THROW(rt.dep_push(Stage::Load, Stage::Store), VtaRuntimeError);
  EXPECT_THROW(rt.dep_pop(Stage::Compute, Stage::Compute), VtaRuntimeError);
  EXPECT_THROW(rt.push_gemm("three",
                            [](UopKernelBuilder &b) {
                              b.loop_begin(2, 0, 0);
                              b.loop_begin(2, 0, 0);
                              b.loop_begin(2, 0, 0);
                            }),
               VtaRuntimeError);
  const DramBuffer buf = rt.alloc(16);
  EXPECT_THROW(rt.load_2d(buf, 0, 70000, 1, 1, MemType::Inp, 0), VtaRuntimeError);
  EXPECT_THROW(rt.load_2d(buf, 0, 1, 1, 1, MemType::Inp, 0, Pad{16, 0, 0, 0}), VtaRuntimeError);
}

}  // namespace
}  // namespace kiln::vta
