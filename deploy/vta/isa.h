#pragma once
// The VTA instruction set: 128-bit task instructions (LOAD, STORE, GEMM, ALU, FINISH) and 32-bit
// micro-ops, encoded and decoded from explicit bit positions computed from a VtaConfig.
//
// Fields are placed in order from bit 0, each within one 64-bit half (a field that would straddle
// bit 64 starts at bit 64 instead), which is the layout of the reference design's hw_spec.h. The
// widths tied to a buffer depth (micro-op range, index factors, micro-op fields) follow the
// configuration; docs/vta.md tabulates the positions for the default configuration.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deploy/vta/config.h"

namespace kiln::vta {

// A word that is not a valid instruction or micro-op for the configuration (an unknown opcode or
// memory type, a flag the target module has no queue for, a field out of range when encoding).
class VtaDecodeError : public VtaError {
 public:
  using VtaError::VtaError;
};

enum class Opcode : uint8_t { Load = 0, Store = 1, Gemm = 2, Finish = 3, Alu = 4 };
enum class MemType : uint8_t { Uop = 0, Wgt = 1, Inp = 2, Acc = 3, Out = 4, Acc8 = 5 };
// MUL follows the functional simulator; a negative SHR amount shifts left.
enum class AluOp : uint8_t { Min = 0, Max = 1, Add = 2, Shr = 3, Mul = 4 };

const char *opcode_name(Opcode op);
const char *mem_type_name(MemType m);
const char *alu_op_name(AluOp op);

// The four dependency flags every instruction carries. For the load module "next" is compute; for
// compute "prev" is load and "next" is store; for store "prev" is compute.
struct DepFlags {
  bool pop_prev = false;
  bool pop_next = false;
  bool push_prev = false;
  bool push_next = false;
  bool operator==(const DepFlags &o) const {
    return pop_prev == o.pop_prev && pop_next == o.pop_next && push_prev == o.push_prev && push_next == o.push_next;
  }
};

// LOAD and STORE: y_size rows of x_size elements from dram_base (in elements of the memory type),
// row stride x_stride; a LOAD surrounds each row with x_pad zeros and adds y_pad zero rows, and
// writes densely from sram_base.
struct MemInsn {
  MemType mem_type = MemType::Inp;
  uint32_t sram_base = 0;
  uint32_t dram_base = 0;
  uint32_t y_size = 0;
  uint32_t x_size = 0;
  uint32_t x_stride = 0;
  uint32_t y_pad_0 = 0;
  uint32_t y_pad_1 = 0;
  uint32_t x_pad_0 = 0;
  uint32_t x_pad_1 = 0;
  bool operator==(const MemInsn &o) const;
};

// The micro-op loop nest shared by GEMM and ALU: for o < iter_out, i < iter_in, u in
// [uop_bgn, uop_end), each index is uop.field + o * field_factor_out + i * field_factor_in.
struct LoopNest {
  uint32_t uop_bgn = 0;
  uint32_t uop_end = 0;
  uint32_t iter_out = 1;
  uint32_t iter_in = 1;
  uint32_t dst_factor_out = 0;
  uint32_t dst_factor_in = 0;
  uint32_t src_factor_out = 0;
  uint32_t src_factor_in = 0;
  bool operator==(const LoopNest &o) const;
};

struct GemmInsn {
  bool reset = false;  // zero the accumulator rows instead of accumulating
  LoopNest loop;
  uint32_t wgt_factor_out = 0;
  uint32_t wgt_factor_in = 0;
  bool operator==(const GemmInsn &o) const;
};

struct AluInsn {
  LoopNest loop;
  AluOp op = AluOp::Add;
  bool use_imm = false;
  int32_t imm = 0;  // signed, imm_bits wide
  bool operator==(const AluInsn &o) const;
};

// One decoded instruction. Only the member named by `opcode` is meaningful.
struct Insn {
  Opcode opcode = Opcode::Finish;
  DepFlags deps;
  MemInsn mem;
  GemmInsn gemm;
  AluInsn alu;
  bool operator==(const Insn &o) const;
  bool operator!=(const Insn &o) const { return !(*this == o); }
};

// A micro-op: an accumulator row (dst), an input row for GEMM or an accumulator row for ALU (src),
// and a weight element (wgt, GEMM only).
struct Uop {
  uint32_t dst = 0;
  uint32_t src = 0;
  uint32_t wgt = 0;
  bool operator==(const Uop &o) const { return dst == o.dst && src == o.src && wgt == o.wgt; }
};

// A 128-bit instruction word: lo holds bits 0-63, hi bits 64-127.
struct InsnWord {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const InsnWord &o) const { return lo == o.lo && hi == o.hi; }
};

// Position and width of one field.
struct BitField {
  int pos = 0;
  int width = 0;
  uint64_t max() const { return width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1; }
};

// Every field's position for one configuration.
struct IsaLayout {
  // Common header.
  BitField opcode, pop_prev, pop_next, push_prev, push_next;
  // LOAD / STORE.
  BitField mem_type, sram_base, dram_base, y_size, x_size, x_stride, y_pad_0, y_pad_1, x_pad_0, x_pad_1;
  // GEMM and ALU (the loop nest).
  BitField reset, uop_bgn, uop_end, iter_out, iter_in;
  BitField gemm_dst_factor_out, gemm_dst_factor_in, gemm_src_factor_out, gemm_src_factor_in;
  BitField wgt_factor_out, wgt_factor_in;
  BitField alu_dst_factor_out, alu_dst_factor_in, alu_src_factor_out, alu_src_factor_in;
  BitField alu_opcode, use_imm, imm;
  // Micro-op (32 bits).
  BitField uop_dst, uop_src, uop_wgt;

  // Throws VtaConfigError when the fields do not fit in 128 (instruction) or 32 (micro-op) bits.
  static IsaLayout from(const VtaConfig &cfg);
  // (name, field) for every instruction field, in bit order per format, for tables and tests.
  std::vector<std::pair<std::string, BitField>> fields(Opcode format) const;
};

// Encoding and decoding for one configuration.
class Isa {
 public:
  explicit Isa(const VtaConfig &cfg);
  const VtaConfig &config() const { return cfg_; }
  const IsaLayout &layout() const { return layout_; }

  // Throws VtaDecodeError naming the field when a value does not fit its field.
  InsnWord encode(const Insn &insn) const;
  // Throws VtaDecodeError for an unknown opcode, memory type or ALU opcode, a memory type the
  // opcode cannot take (a STORE of anything but OUT), or a dependency flag the module executing the
  // instruction has no queue for.
  Insn decode(const InsnWord &word) const;
  uint32_t encode_uop(const Uop &uop) const;
  Uop decode_uop(uint32_t word) const;

 private:
  VtaConfig cfg_;
  IsaLayout layout_;
};

// The module an instruction runs on.
enum class Module : uint8_t { Load = 0, Compute = 1, Store = 2 };
const char *module_name(Module m);
// Routing as the fetch module does it: STOREs to store, INP/WGT loads to load, the rest
// (GEMM, ALU, FINISH, UOP/ACC loads) to compute.
Module module_of(const Insn &insn);

// One line of text: `LOAD INP sram=0 dram=0x10 y=1 x=4 stride=4 pad=(0,0,0,0) [pop_next push_next]`.
std::string disassemble(const Insn &insn);
std::string disassemble(const Uop &uop);
// A listing of a stream, one numbered instruction a line (words that do not decode are shown with
// the reason).
std::string disassemble(const Isa &isa, const std::vector<InsnWord> &words);

}  // namespace kiln::vta
