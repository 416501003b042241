#pragma once
// The behavioural VTA simulator: a DRAM model, the on-chip buffers, the load, compute and store
// modules with their in-order instruction queues and the four dependency-token queues, and a
// cycle model under which the modules overlap as far as the tokens allow.
//
// Results are bit-exact integer arithmetic: GEMM sums in the accumulator width (wrapping), ALU
// operations in the accumulator width, GEMM and ALU write the low output bits of each result to the
// OUT buffer (truncating, never saturating) and STORE reads OUT (or, in the functional simulator's
// mode, the accumulator truncated).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deploy/vta/config.h"
#include "deploy/vta/isa.h"

namespace kiln::vta {

// A DRAM access outside every allocated region, or an SRAM index beyond a buffer's depth.
class VtaAddressError : public VtaError {
 public:
  using VtaError::VtaError;
};
// No module can make progress: each waits for a token that will never come.
class VtaDeadlockError : public VtaError {
 public:
  using VtaError::VtaError;
};
// The program breaks the protocol: FINISH with instructions or tokens left over, a stream without
// FINISH, instructions after FINISH, a STORE with padding, a micro-op range beyond the buffer.
class VtaProtocolError : public VtaError {
 public:
  using VtaError::VtaError;
};
// The run took more micro-op or element steps than SimOptions::max_steps allows.
class VtaStepLimitError : public VtaError {
 public:
  using VtaError::VtaError;
};

// Host memory regions with physical addresses, in 4 KiB pages: region addresses start at 0x1000
// (0 is never valid) and every region is page-aligned, so element-unit DRAM addresses of any
// buffer type are exact.
class Dram {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  // A zero-filled region of `bytes` bytes (at least one page); returns its physical address.
  uint64_t alloc(uint64_t bytes);
  // Throws VtaAddressError unless `phys` is the start of a live region.
  void free(uint64_t phys);
  // Throws VtaAddressError unless [phys, phys + bytes) lies inside one live region.
  uint8_t *at(uint64_t phys, uint64_t bytes, const char *what);
  void write(uint64_t phys, const void *src, uint64_t bytes);
  void read(uint64_t phys, void *dst, uint64_t bytes);
  uint64_t allocated_bytes() const;

 private:
  std::map<uint64_t, std::vector<uint8_t>> regions_;  // by physical address
  uint64_t next_ = kPageBytes;
};

// Parameters of the cycle model (in cycles at VtaConfig::clock_mhz).
struct CycleModel {
  int gemm_pipeline_fill = 4;  // added to every GEMM instruction (MAC stages and adder tree)
  int gemm_cycles_per_uop = 1;
  int alu_pipeline_fill = 4;
  int alu_cycles_per_uop = 2;
  int dma_row_latency = 16;  // per DRAM row of a LOAD or STORE
  int insn_overhead = 1;     // every instruction, FINISH and no-ops included
};

struct SimOptions {
  CycleModel cycles;
  // STORE reads the OUT buffer (the hardware); false reads the accumulator truncated to the output
  // width, as the functional simulator does.
  bool store_from_out = true;
  // Upper bound on micro-op and element steps of one run; VtaStepLimitError beyond it.
  uint64_t max_steps = uint64_t{1} << 36;
};

// Counters of one run. The first seven have the functional simulator's names and meaning.
struct SimCounters {
  uint64_t inp_load_nbytes = 0;  // DRAM bytes read, padding excluded
  uint64_t wgt_load_nbytes = 0;
  uint64_t acc_load_nbytes = 0;
  uint64_t uop_load_nbytes = 0;
  uint64_t out_store_nbytes = 0;
  uint64_t gemm_counter = 0;  // non-reset GEMM micro-op executions (batch x block x block MACs each)
  uint64_t alu_counter = 0;   // ALU micro-op executions (batch x block lane operations each)
  // Cycle model.
  uint64_t total_cycles = 0;  // when the last module is done (normally FINISH's completion)
  uint64_t load_busy_cycles = 0;
  uint64_t compute_busy_cycles = 0;
  uint64_t store_busy_cycles = 0;
  uint64_t gemm_cycles = 0;  // cycles of compute spent in GEMM instructions
  uint64_t alu_cycles = 0;
  uint64_t instructions = 0;

  // Useful GEMM cycles over all cycles: gemm_counter * gemm_cycles_per_uop / total_cycles.
  double gemm_utilization(const CycleModel &m = CycleModel{}) const;
  // Operations per second at the configured clock (2 per MAC), in GOPS.
  double gops(const VtaConfig &cfg) const;
  // `name=value` pairs, fsim names first.
  std::vector<std::pair<std::string, uint64_t>> items() const;
  void accumulate(const SimCounters &o);
};

class Simulator {
 public:
  Simulator(const VtaConfig &cfg, Dram &dram, SimOptions options = {});
  const VtaConfig &config() const { return isa_.config(); }
  const Isa &isa() const { return isa_; }
  const SimOptions &options() const { return options_; }

  // Runs one instruction stream to its FINISH and returns the run's counters. The on-chip buffers
  // keep their contents between runs. Throws VtaDecodeError, VtaAddressError, VtaDeadlockError,
  // VtaProtocolError or VtaStepLimitError, each message naming the instruction by its index and
  // disassembly.
  SimCounters run(const std::vector<InsnWord> &stream);

  // Counters summed over every run since construction or clear_counters().
  const SimCounters &profile() const { return profile_; }
  void clear_counters() { profile_ = SimCounters{}; }

  // Direct views of the on-chip buffers (one int32 per value), for tests.
  const std::vector<int32_t> &acc_buffer() const { return acc_; }
  const std::vector<int32_t> &out_buffer() const { return out_; }

 private:
  uint64_t exec_load(const Insn &insn, SimCounters &c, uint64_t &steps);
  uint64_t exec_store(const Insn &insn, SimCounters &c, uint64_t &steps);
  // The micro-ops of a GEMM or ALU loop nest; checks the range, counts the steps (*count).
  std::vector<Uop> loop_uops(const Insn &insn, const LoopNest &n, uint64_t &steps, uint64_t *count) const;
  uint64_t exec_gemm(const Insn &insn, SimCounters &c, uint64_t &steps);
  uint64_t exec_alu(const Insn &insn, SimCounters &c, uint64_t &steps);

  Isa isa_;
  Dram &dram_;
  SimOptions options_;
  std::vector<uint32_t> uop_;
  std::vector<int32_t> inp_, wgt_, acc_, out_;
  SimCounters profile_;
};

}  // namespace kiln::vta
