#pragma once
// The VTA runtime: builds command streams for the simulator the way a compiled program drives a
// device. It owns the simulated DRAM and the simulator, and offers
//   - buffers in DRAM (alloc / free / copies to and from the host);
//   - 2-D DMA descriptors with zero padding (load_2d / store_2d);
//   - micro-op kernels recorded once through a UopKernelBuilder, cached by a signature string and
//     kept resident in the micro-op buffer (a ring; a kernel that is not resident is loaded by a
//     LOAD UOP emitted just before its GEMM or ALU instruction);
//   - dependency tokens between the load, compute and store stages (dep_push / dep_pop);
//   - synchronize(): closes the stream with FINISH, runs it and returns the counters.
//
// A compiler lowers a schedule into calls of this API; every call appends to one stream, and the
// instructions are routed to the three modules by type (see module_of in isa.h).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "deploy/vta/config.h"
#include "deploy/vta/isa.h"
#include "deploy/vta/simulator.h"

namespace kiln::vta {

// A misuse of the runtime API: an unknown stage pair, a kernel with more than two loops or larger
// than the micro-op buffer, a DMA field that does not fit its instruction field, a buffer that is
// not element-aligned.
class VtaRuntimeError : public VtaError {
 public:
  using VtaError::VtaError;
};

// Pipeline stages as token endpoints (the numbering of the reference runtime).
enum class Stage : uint8_t { Load = 1, Compute = 2, Store = 3 };

// A region of the simulated DRAM.
struct DramBuffer {
  uint64_t phys = 0;
  uint64_t bytes = 0;
};

// Zero padding of a 2-D load, in elements: rows before/after, elements before/after each row.
struct Pad {
  uint32_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

// Records one micro-op kernel: up to two loops (outer first) around a list of micro-ops. Each loop
// adds extent iterations whose index offsets are the given factors times the iteration.
class UopKernelBuilder {
 public:
  void loop_begin(uint32_t extent, uint32_t dst_factor, uint32_t src_factor, uint32_t wgt_factor = 0);
  void loop_end();
  // dst: accumulator row; src: input row (GEMM) or accumulator row (ALU); wgt: weight element.
  void push(uint32_t dst, uint32_t src, uint32_t wgt = 0);

 private:
  friend class Runtime;
  struct Loop {
    uint32_t extent, dst, src, wgt;
  };
  std::vector<Uop> uops_;
  std::vector<Loop> loops_;
  int open_ = 0;
  bool pushed_ = false;
};

class Runtime {
 public:
  using KernelFn = std::function<void(UopKernelBuilder &)>;

  explicit Runtime(const VtaConfig &cfg = VtaConfig{}, SimOptions options = {});
  const VtaConfig &config() const { return sim_.config(); }
  Dram &dram() { return dram_; }
  Simulator &simulator() { return sim_; }

  // DRAM buffers (page-aligned, so element offsets of every memory type are exact).
  DramBuffer alloc(uint64_t bytes);
  void free(DramBuffer buf);
  void copy_to_device(DramBuffer dst, const void *src, uint64_t bytes, uint64_t offset = 0);
  void copy_from_device(void *dst, DramBuffer src, uint64_t bytes, uint64_t offset = 0);

  // A LOAD of y_size rows of x_size elements of `type` (INP, WGT, ACC, ACC_8BIT), starting
  // elem_offset elements into `src`, row stride x_stride, written densely from SRAM element
  // sram_index with `pad` zeros around.
  void load_2d(DramBuffer src, uint64_t elem_offset, uint32_t x_size, uint32_t y_size, uint32_t x_stride, MemType type,
               uint32_t sram_index, Pad pad = {});
  // A STORE of OUT elements from sram_index into `dst` (in output elements), 2-D strided.
  void store_2d(DramBuffer dst, uint64_t elem_offset, uint32_t x_size, uint32_t y_size, uint32_t x_stride,
                uint32_t sram_index);

  // A GEMM over the kernel named `signature` (recorded by `build` on first use only; the same
  // signature must always describe the same kernel). reset zeroes the accumulator rows instead.
  void push_gemm(const std::string &signature, const KernelFn &build, bool reset = false);
  // An ALU operation over a kernel: acc[dst] = op(acc[dst], imm or acc[src]).
  void push_alu(const std::string &signature, const KernelFn &build, AluOp op, std::optional<int32_t> imm = {});

  // A token from stage `from` to the adjacent stage `to`, pushed when everything emitted so far on
  // `from` is done (a flag on its last instruction, or a no-op carrying it).
  void dep_push(Stage from, Stage to);
  // `to` waits for a token from `from` before its next instruction (folded into that instruction;
  // a second pop of the same pair first commits the pending one on a no-op).
  void dep_pop(Stage from, Stage to);

  // Adds the final store->compute and load->compute tokens, appends FINISH, runs the stream on the
  // simulator and starts a new stream (micro-op residency is reset). Returns the run's counters.
  // Simulator errors propagate; the stream is discarded either way.
  SimCounters synchronize();

  // The stream built so far (not yet run) and the stream of the last synchronize().
  std::vector<InsnWord> stream() const;
  const std::vector<InsnWord> &last_stream() const { return last_stream_; }
  // A disassembly of the last synchronized stream, one instruction a line.
  std::string dump_last() const;

  // Kernels recorded so far (each recorded once) and LOAD UOPs emitted since construction.
  size_t kernels_recorded() const { return kernels_.size(); }
  uint64_t uop_loads_emitted() const { return uop_loads_; }

 private:
  struct Kernel {
    std::vector<UopKernelBuilder::Loop> loops;
    uint32_t size = 0;
    DramBuffer dram;
  };
  const Kernel &kernel(const std::string &signature, const KernelFn &build);
  uint32_t make_resident(const std::string &signature, const Kernel &k);
  LoopNest loop_nest(const Kernel &k, uint32_t offset, uint32_t *wgt_out, uint32_t *wgt_in) const;
  void emit(Insn insn);
  void emit_noop(Module m);
  MemInsn mem_insn(DramBuffer buf, uint64_t elem_offset, int elem_bytes, uint32_t x_size, uint32_t y_size,
                   uint32_t x_stride, uint32_t sram_index, const char *what) const;

  Dram dram_;
  Simulator sim_;
  std::vector<Insn> insns_;
  std::vector<InsnWord> last_stream_;
  // Pending pops per module: [module][0] = pop_prev, [1] = pop_next.
  bool pending_pop_[3][2] = {{false, false}, {false, false}, {false, false}};
  std::map<std::string, Kernel> kernels_;
  std::map<std::string, uint32_t> resident_;  // signature -> micro-op buffer offset
  uint32_t uop_cursor_ = 0;
  uint64_t uop_loads_ = 0;
};

}  // namespace kiln::vta
