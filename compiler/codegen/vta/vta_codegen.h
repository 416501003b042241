#pragma once
// The VTA code generator: a lowered function whose schedule follows the VTA conventions becomes a
// program for the VTA runtime (deploy/vta/runtime.h).
//
// The conventions (what the VTA templates and intrinsics produce):
//   - on-chip buffers are realized in the scopes local.inp_buffer, local.wgt_buffer and
//     local.acc_buffer (kInpScope, kWgtScope, kAccScope);
//   - copies between DRAM and them are loop nests under `pragma dma_copy`: global int8 into the
//     input or weight buffer (LOAD INP/WGT), global int32 or int8 into the accumulator (LOAD ACC /
//     ACC_8BIT), the accumulator into a global int8 tensor (STORE); zero padding (a select or
//     if_then_else with zero) becomes the instruction's padding;
//   - the 1x16 x 16x16 GEMM is the tensor intrinsic gemm_intrin() (calls vta.gemm and
//     vta.gemm_reset); a loop nest of them becomes one GEMM instruction;
//   - element-wise accumulator stages are loop nests under `pragma alu`, each one operation in
//     place: floordiv by 2^k (SHR), max, min, add, mul with an immediate or a second accumulator
//     tensor;
//   - loops bound to "vthread" are virtual threads: each thread gets its own share of the buffers
//     and the threads' instruction groups are interleaved.
// The outer loops are run at compile time: the program is the exact instruction sequence with the
// DRAM tensors as parameters. Micro-op kernels are folded into at most two loops (the
// instructions' iteration and factor fields) when their indices are affine, and dependency tokens
// are placed between the load, compute and store stages for every read-after-write and
// write-after-read hazard between instruction groups of one thread, loop-carried ones included.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "deploy/vta/runtime.h"

namespace kiln::codegen::vta {

constexpr const char *kInpScope = "local.inp_buffer";
constexpr const char *kWgtScope = "local.wgt_buffer";
constexpr const char *kAccScope = "local.acc_buffer";

// A schedule whose on-chip tiles do not fit a buffer of the configuration. The message names the
// buffer, what the tile needs and what the buffer holds.
class VtaBufferOverflowError : public kiln::vta::VtaError {
 public:
  using VtaError::VtaError;
};

// A lowered function the code generator cannot map to VTA instructions (a store outside a DMA or
// ALU region, an ALU expression without an instruction, a copy that is not a 2-D DMA, ...).
class VtaCodegenError : public kiln::vta::VtaError {
 public:
  using VtaError::VtaError;
};

// The 1xBLOCK x (BLOCKxBLOCK)^T GEMM intrinsic of the configuration: out[i, j] (int32) =
// sum_k int32(x[i, k]) * int32(w[j, k]) with int8 x and w.
te::TensorIntrin gemm_intrin(const kiln::vta::VtaConfig &cfg);

// The lowering a VTA schedule needs: loops, buffers and pragma regions as the schedule made them
// (no loop partitioning, unrolling, vectorizing or storage reuse), so that the code generator sees
// the DMA and ALU regions whole. Task::lower uses it for `vta` targets.
lower::LowerOptions vta_lower_options();

// The VTA configuration a target string's -model names (the reference design without one).
// Throws VtaConfigError for a model name that does not parse.
kiln::vta::VtaConfig vta_target_config(const std::string &target);

// A host tensor argument of a program run.
struct HostArg {
  void *data = nullptr;
  uint64_t bytes = 0;
};

// Instruction counts of a program, for listings and tests.
struct VtaProgramStats {
  int64_t loads = 0, stores = 0, gemms = 0, alus = 0, tokens = 0;
  int64_t kernels = 0;  // distinct micro-op kernels
};

class VtaProgram {
 public:
  // Generates the program. Throws VtaBufferOverflowError or VtaCodegenError.
  VtaProgram(const ir::LoweredFunc &f, const kiln::vta::VtaConfig &cfg);

  const std::string &name() const { return name_; }
  const std::vector<ir::Buffer> &params() const { return params_; }
  const kiln::vta::VtaConfig &config() const { return cfg_; }
  const VtaProgramStats &stats() const { return stats_; }
  // Elements of each on-chip buffer the program uses (inp, wgt, acc).
  int64_t inp_used() const { return used_[0]; }
  int64_t wgt_used() const { return used_[1]; }
  int64_t acc_used() const { return used_[2]; }

  // Appends the program to rt's stream with `args` (one DRAM buffer a parameter, in order), then
  // synchronizes and returns the run's counters.
  kiln::vta::SimCounters run(kiln::vta::Runtime &rt, const std::vector<kiln::vta::DramBuffer> &args) const;
  // The same with host tensors: copies them in, runs, copies every parameter back.
  kiln::vta::SimCounters run_host(kiln::vta::Runtime &rt, const std::vector<HostArg> &args) const;

  struct Kernel {
    std::vector<kiln::vta::Uop> uops;
    std::vector<uint32_t> loops;  // extent, dst, src, wgt per loop, outer first
    std::string signature;
  };
  struct Action {
    enum class Kind : uint8_t { Load, Store, Gemm, Alu, Push, Pop } kind;
    int stage = 0;   // 1 load, 2 compute, 3 store
    int thread = 0;  // virtual thread
    // Load / Store.
    int param = 0;
    uint64_t elem_offset = 0;
    uint32_t x_size = 0, y_size = 0, x_stride = 0, sram = 0;
    kiln::vta::MemType mem = kiln::vta::MemType::Inp;
    kiln::vta::Pad pad{};
    // Gemm / Alu.
    int kernel = -1;
    bool reset = false;
    kiln::vta::AluOp alu = kiln::vta::AluOp::Add;
    std::optional<int32_t> imm{};
    // Push / Pop: stage -> to.
    int to = 0;
  };
  const std::vector<Action> &actions() const { return actions_; }

 private:
  friend class ProgramBuilder;
  std::string name_;
  std::vector<ir::Buffer> params_;
  kiln::vta::VtaConfig cfg_;
  std::vector<Action> actions_;
  std::vector<Kernel> kernels_;
  VtaProgramStats stats_;
  int64_t used_[3] = {0, 0, 0};
};

}  // namespace kiln::codegen::vta
