#include "deploy/vta/isa.h"

#include <algorithm>
#include <sstream>

namespace kiln::vta {

namespace {

constexpr int kOpcodeBits = 3;
constexpr int kMemTypeBits = 3;
constexpr int kSramAddrBits = 16;
constexpr int kDramAddrBits = 32;
constexpr int kMemSizeBits = 16;
constexpr int kPadBits = 4;
constexpr int kLoopIterBits = 14;
constexpr int kAluOpBits = 3;
constexpr int kAluImmBits = 16;

int index_bits(int depth) {
  int b = 0;
  while ((1 << b) < depth) ++b;
  return std::max(b, 1);
}

// Places fields from bit 0 in order, none straddling a 64-bit half.
class Packer {
 public:
  Packer(int total, const char *what) : total_(total), what_(what) {}
  BitField place(int width) {
    if (pos_ / 64 != (pos_ + width - 1) / 64) pos_ = (pos_ / 64 + 1) * 64;
    if (pos_ + width > total_) {
      throw VtaConfigError(detail::concat("VTA config: the ", what_, " fields need more than ", total_,
                                          " bits; reduce the buffer depths"));
    }
    BitField f{pos_, width};
    pos_ += width;
    return f;
  }
  void skip_to(int pos) { pos_ = pos; }

 private:
  int total_;
  const char *what_;
  int pos_ = 0;
};

uint64_t get(const InsnWord &w, BitField f) {
  if (f.pos >= 64) return (w.hi >> (f.pos - 64)) & f.max();
  return (w.lo >> f.pos) & f.max();
}

void put(InsnWord &w, BitField f, uint64_t value, const char *name) {
  if (value > f.max()) {
    throw VtaDecodeError(
        detail::concat("cannot encode ", name, " = ", value, ": the field has ", f.width, " bits (max ", f.max(), ")"));
  }
  if (f.pos >= 64) {
    w.hi |= value << (f.pos - 64);
  } else {
    w.lo |= value << f.pos;
  }
}

}  // namespace

const char *opcode_name(Opcode op) {
  switch (op) {
    case Opcode::Load:
      return "LOAD";
    case Opcode::Store:
      return "STORE";
    case Opcode::Gemm:
      return "GEMM";
    case Opcode::Finish:
      return "FINISH";
    case Opcode::Alu:
      return "ALU";
  }
  return "?";
}

const char *mem_type_name(MemType m) {
  switch (m) {
    case MemType::Uop:
      return "UOP";
    case MemType::Wgt:
      return "WGT";
    case MemType::Inp:
      return "INP";
    case MemType::Acc:
      return "ACC";
    case MemType::Out:
      return "OUT";
    case MemType::Acc8:
      return "ACC_8BIT";
  }
  return "?";
}

const char *alu_op_name(AluOp op) {
  switch (op) {
    case AluOp::Min:
      return "MIN";
    case AluOp::Max:
      return "MAX";
    case AluOp::Add:
      return "ADD";
    case AluOp::Shr:
      return "SHR";
    case AluOp::Mul:
      return "MUL";
  }
  return "?";
}

const char *module_name(Module m) {
  switch (m) {
    case Module::Load:
      return "load";
    case Module::Compute:
      return "compute";
    case Module::Store:
      return "store";
  }
  return "?";
}

Module module_of(const Insn &insn) {
  switch (insn.opcode) {
    case Opcode::Store:
      return Module::Store;
    case Opcode::Load:
      return insn.mem.mem_type == MemType::Inp || insn.mem.mem_type == MemType::Wgt ? Module::Load : Module::Compute;
    case Opcode::Gemm:
    case Opcode::Alu:
    case Opcode::Finish:
      return Module::Compute;
  }
  return Module::Compute;
}

bool MemInsn::operator==(const MemInsn &o) const {
  return mem_type == o.mem_type && sram_base == o.sram_base && dram_base == o.dram_base && y_size == o.y_size &&
         x_size == o.x_size && x_stride == o.x_stride && y_pad_0 == o.y_pad_0 && y_pad_1 == o.y_pad_1 &&
         x_pad_0 == o.x_pad_0 && x_pad_1 == o.x_pad_1;
}

bool LoopNest::operator==(const LoopNest &o) const {
  return uop_bgn == o.uop_bgn && uop_end == o.uop_end && iter_out == o.iter_out && iter_in == o.iter_in &&
         dst_factor_out == o.dst_factor_out && dst_factor_in == o.dst_factor_in && src_factor_out == o.src_factor_out &&
         src_factor_in == o.src_factor_in;
}

bool GemmInsn::operator==(const GemmInsn &o) const {
  return reset == o.reset && loop == o.loop && wgt_factor_out == o.wgt_factor_out && wgt_factor_in == o.wgt_factor_in;
}

bool AluInsn::operator==(const AluInsn &o) const {
  return loop == o.loop && op == o.op && use_imm == o.use_imm && imm == o.imm;
}

bool Insn::operator==(const Insn &o) const {
  if (opcode != o.opcode || !(deps == o.deps)) return false;
  switch (opcode) {
    case Opcode::Load:
    case Opcode::Store:
      return mem == o.mem;
    case Opcode::Gemm:
      return gemm == o.gemm;
    case Opcode::Alu:
      return alu == o.alu;
    case Opcode::Finish:
      return true;
  }
  return false;
}

IsaLayout IsaLayout::from(const VtaConfig &cfg) {
  const int uop_bits = index_bits(cfg.uop_depth());
  const int inp_bits = index_bits(cfg.inp_depth());
  const int wgt_bits = index_bits(cfg.wgt_depth());
  const int acc_bits = index_bits(cfg.acc_depth());
  for (int depth : {cfg.uop_depth(), cfg.inp_depth(), cfg.wgt_depth(), cfg.acc_depth()}) {
    if (depth > (1 << kSramAddrBits)) {
      throw VtaConfigError(detail::concat("VTA config: a buffer depth of ", depth,
                                          " elements does not fit the 16-bit SRAM address of LOAD/STORE"));
    }
  }
  IsaLayout l;
  Packer head(128, "instruction");
  l.opcode = head.place(kOpcodeBits);
  l.pop_prev = head.place(1);
  l.pop_next = head.place(1);
  l.push_prev = head.place(1);
  l.push_next = head.place(1);
  const int after_head = l.push_next.pos + 1;

  Packer mem = head;
  l.mem_type = mem.place(kMemTypeBits);
  l.sram_base = mem.place(kSramAddrBits);
  l.dram_base = mem.place(kDramAddrBits);
  l.y_size = mem.place(kMemSizeBits);
  l.x_size = mem.place(kMemSizeBits);
  l.x_stride = mem.place(kMemSizeBits);
  l.y_pad_0 = mem.place(kPadBits);
  l.y_pad_1 = mem.place(kPadBits);
  l.x_pad_0 = mem.place(kPadBits);
  l.x_pad_1 = mem.place(kPadBits);

  Packer gemm(128, "instruction");
  gemm.skip_to(after_head);
  l.reset = gemm.place(1);
  l.uop_bgn = gemm.place(uop_bits);
  l.uop_end = gemm.place(uop_bits + 1);
  l.iter_out = gemm.place(kLoopIterBits);
  l.iter_in = gemm.place(kLoopIterBits);
  Packer alu = gemm;
  l.gemm_dst_factor_out = gemm.place(acc_bits);
  l.gemm_dst_factor_in = gemm.place(acc_bits);
  l.gemm_src_factor_out = gemm.place(inp_bits);
  l.gemm_src_factor_in = gemm.place(inp_bits);
  l.wgt_factor_out = gemm.place(wgt_bits);
  l.wgt_factor_in = gemm.place(wgt_bits);

  l.alu_dst_factor_out = alu.place(acc_bits);
  l.alu_dst_factor_in = alu.place(acc_bits);
  l.alu_src_factor_out = alu.place(acc_bits);
  l.alu_src_factor_in = alu.place(acc_bits);
  l.alu_opcode = alu.place(kAluOpBits);
  l.use_imm = alu.place(1);
  l.imm = alu.place(kAluImmBits);

  Packer uop(32, "micro-op");
  l.uop_dst = uop.place(acc_bits);
  l.uop_src = uop.place(std::max(inp_bits, acc_bits));
  l.uop_wgt = uop.place(wgt_bits);
  return l;
}

std::vector<std::pair<std::string, BitField>> IsaLayout::fields(Opcode format) const {
  std::vector<std::pair<std::string, BitField>> f = {{"opcode", opcode},
                                                     {"pop_prev", pop_prev},
                                                     {"pop_next", pop_next},
                                                     {"push_prev", push_prev},
                                                     {"push_next", push_next}};
  switch (format) {
    case Opcode::Load:
    case Opcode::Store:
      f.insert(f.end(), {{"memory_type", mem_type},
                         {"sram_base", sram_base},
                         {"dram_base", dram_base},
                         {"y_size", y_size},
                         {"x_size", x_size},
                         {"x_stride", x_stride},
                         {"y_pad_0", y_pad_0},
                         {"y_pad_1", y_pad_1},
                         {"x_pad_0", x_pad_0},
                         {"x_pad_1", x_pad_1}});
      break;
    case Opcode::Gemm:
      f.insert(f.end(), {{"reset_reg", reset},
                         {"uop_bgn", uop_bgn},
                         {"uop_end", uop_end},
                         {"iter_out", iter_out},
                         {"iter_in", iter_in},
                         {"dst_factor_out", gemm_dst_factor_out},
                         {"dst_factor_in", gemm_dst_factor_in},
                         {"src_factor_out", gemm_src_factor_out},
                         {"src_factor_in", gemm_src_factor_in},
                         {"wgt_factor_out", wgt_factor_out},
                         {"wgt_factor_in", wgt_factor_in}});
      break;
    case Opcode::Alu:
      f.insert(f.end(), {{"reset_reg", reset},
                         {"uop_bgn", uop_bgn},
                         {"uop_end", uop_end},
                         {"iter_out", iter_out},
                         {"iter_in", iter_in},
                         {"dst_factor_out", alu_dst_factor_out},
                         {"dst_factor_in", alu_dst_factor_in},
                         {"src_factor_out", alu_src_factor_out},
                         {"src_factor_in", alu_src_factor_in},
                         {"alu_opcode", alu_opcode},
                         {"use_imm", use_imm},
                         {"imm", imm}});
      break;
    case Opcode::Finish:
      break;
  }
  return f;
}

Isa::Isa(const VtaConfig &cfg) : cfg_(cfg) {
  cfg_.validate();
  layout_ = IsaLayout::from(cfg_);
}

InsnWord Isa::encode(const Insn &insn) const {
  const IsaLayout &l = layout_;
  InsnWord w;
  put(w, l.opcode, static_cast<uint64_t>(insn.opcode), "opcode");
  put(w, l.pop_prev, insn.deps.pop_prev, "pop_prev");
  put(w, l.pop_next, insn.deps.pop_next, "pop_next");
  put(w, l.push_prev, insn.deps.push_prev, "push_prev");
  put(w, l.push_next, insn.deps.push_next, "push_next");
  auto put_loop = [&](const LoopNest &n, BitField dfo, BitField dfi, BitField sfo, BitField sfi) {
    put(w, l.uop_bgn, n.uop_bgn, "uop_bgn");
    put(w, l.uop_end, n.uop_end, "uop_end");
    put(w, l.iter_out, n.iter_out, "iter_out");
    put(w, l.iter_in, n.iter_in, "iter_in");
    put(w, dfo, n.dst_factor_out, "dst_factor_out");
    put(w, dfi, n.dst_factor_in, "dst_factor_in");
    put(w, sfo, n.src_factor_out, "src_factor_out");
    put(w, sfi, n.src_factor_in, "src_factor_in");
  };
  switch (insn.opcode) {
    case Opcode::Load:
    case Opcode::Store: {
      const MemInsn &m = insn.mem;
      put(w, l.mem_type, static_cast<uint64_t>(m.mem_type), "memory_type");
      put(w, l.sram_base, m.sram_base, "sram_base");
      put(w, l.dram_base, m.dram_base, "dram_base");
      put(w, l.y_size, m.y_size, "y_size");
      put(w, l.x_size, m.x_size, "x_size");
      put(w, l.x_stride, m.x_stride, "x_stride");
      put(w, l.y_pad_0, m.y_pad_0, "y_pad_0");
      put(w, l.y_pad_1, m.y_pad_1, "y_pad_1");
      put(w, l.x_pad_0, m.x_pad_0, "x_pad_0");
      put(w, l.x_pad_1, m.x_pad_1, "x_pad_1");
      break;
    }
    case Opcode::Gemm:
      put(w, l.reset, insn.gemm.reset, "reset_reg");
      put_loop(insn.gemm.loop, l.gemm_dst_factor_out, l.gemm_dst_factor_in, l.gemm_src_factor_out,
               l.gemm_src_factor_in);
      put(w, l.wgt_factor_out, insn.gemm.wgt_factor_out, "wgt_factor_out");
      put(w, l.wgt_factor_in, insn.gemm.wgt_factor_in, "wgt_factor_in");
      break;
    case Opcode::Alu: {
      put_loop(insn.alu.loop, l.alu_dst_factor_out, l.alu_dst_factor_in, l.alu_src_factor_out, l.alu_src_factor_in);
      put(w, l.alu_opcode, static_cast<uint64_t>(insn.alu.op), "alu_opcode");
      put(w, l.use_imm, insn.alu.use_imm, "use_imm");
      const int64_t lo = -(int64_t{1} << (l.imm.width - 1));
      const int64_t hi = (int64_t{1} << (l.imm.width - 1)) - 1;
      if (insn.alu.imm < lo || insn.alu.imm > hi) {
        throw VtaDecodeError(
            detail::concat("cannot encode imm = ", insn.alu.imm, ": the field holds [", lo, ", ", hi, "]"));
      }
      put(w, l.imm, static_cast<uint64_t>(insn.alu.imm) & l.imm.max(), "imm");
      break;
    }
    case Opcode::Finish:
      break;
  }
  return w;
}

Insn Isa::decode(const InsnWord &w) const {
  const IsaLayout &l = layout_;
  Insn insn;
  const uint64_t op = get(w, l.opcode);
  if (op > static_cast<uint64_t>(Opcode::Alu)) {
    throw VtaDecodeError(
        detail::concat("instruction 0x", std::hex, w.hi, "_", w.lo, std::dec, ": unknown opcode ", op));
  }
  insn.opcode = static_cast<Opcode>(op);
  insn.deps.pop_prev = get(w, l.pop_prev) != 0;
  insn.deps.pop_next = get(w, l.pop_next) != 0;
  insn.deps.push_prev = get(w, l.push_prev) != 0;
  insn.deps.push_next = get(w, l.push_next) != 0;
  auto get_loop = [&](LoopNest &n, BitField dfo, BitField dfi, BitField sfo, BitField sfi) {
    n.uop_bgn = static_cast<uint32_t>(get(w, l.uop_bgn));
    n.uop_end = static_cast<uint32_t>(get(w, l.uop_end));
    n.iter_out = static_cast<uint32_t>(get(w, l.iter_out));
    n.iter_in = static_cast<uint32_t>(get(w, l.iter_in));
    n.dst_factor_out = static_cast<uint32_t>(get(w, dfo));
    n.dst_factor_in = static_cast<uint32_t>(get(w, dfi));
    n.src_factor_out = static_cast<uint32_t>(get(w, sfo));
    n.src_factor_in = static_cast<uint32_t>(get(w, sfi));
  };
  switch (insn.opcode) {
    case Opcode::Load:
    case Opcode::Store: {
      MemInsn &m = insn.mem;
      const uint64_t mt = get(w, l.mem_type);
      if (mt > static_cast<uint64_t>(MemType::Acc8)) {
        throw VtaDecodeError(detail::concat(opcode_name(insn.opcode), ": unknown memory type ", mt));
      }
      m.mem_type = static_cast<MemType>(mt);
      if (insn.opcode == Opcode::Store && m.mem_type != MemType::Out) {
        throw VtaDecodeError(
            detail::concat("STORE of memory type ", mem_type_name(m.mem_type), ": only OUT can be stored"));
      }
      if (insn.opcode == Opcode::Load && m.mem_type == MemType::Out) {
        throw VtaDecodeError("LOAD of memory type OUT: the output buffer cannot be loaded");
      }
      m.sram_base = static_cast<uint32_t>(get(w, l.sram_base));
      m.dram_base = static_cast<uint32_t>(get(w, l.dram_base));
      m.y_size = static_cast<uint32_t>(get(w, l.y_size));
      m.x_size = static_cast<uint32_t>(get(w, l.x_size));
      m.x_stride = static_cast<uint32_t>(get(w, l.x_stride));
      m.y_pad_0 = static_cast<uint32_t>(get(w, l.y_pad_0));
      m.y_pad_1 = static_cast<uint32_t>(get(w, l.y_pad_1));
      m.x_pad_0 = static_cast<uint32_t>(get(w, l.x_pad_0));
      m.x_pad_1 = static_cast<uint32_t>(get(w, l.x_pad_1));
      break;
    }
    case Opcode::Gemm:
      insn.gemm.reset = get(w, l.reset) != 0;
      get_loop(insn.gemm.loop, l.gemm_dst_factor_out, l.gemm_dst_factor_in, l.gemm_src_factor_out,
               l.gemm_src_factor_in);
      insn.gemm.wgt_factor_out = static_cast<uint32_t>(get(w, l.wgt_factor_out));
      insn.gemm.wgt_factor_in = static_cast<uint32_t>(get(w, l.wgt_factor_in));
      break;
    case Opcode::Alu: {
      get_loop(insn.alu.loop, l.alu_dst_factor_out, l.alu_dst_factor_in, l.alu_src_factor_out, l.alu_src_factor_in);
      const uint64_t aop = get(w, l.alu_opcode);
      if (aop > static_cast<uint64_t>(AluOp::Mul))
        throw VtaDecodeError(detail::concat("ALU: unknown ALU opcode ", aop));
      insn.alu.op = static_cast<AluOp>(aop);
      insn.alu.use_imm = get(w, l.use_imm) != 0;
      const uint64_t raw = get(w, l.imm);
      const uint64_t sign = uint64_t{1} << (l.imm.width - 1);
      insn.alu.imm = static_cast<int32_t>(static_cast<int64_t>(raw ^ sign) - static_cast<int64_t>(sign));
      break;
    }
    case Opcode::Finish:
      break;
  }
  const Module mod = module_of(insn);
  const bool bad = (mod == Module::Load && (insn.deps.pop_prev || insn.deps.push_prev)) ||
                   (mod == Module::Store && (insn.deps.pop_next || insn.deps.push_next));
  if (bad) {
    throw VtaDecodeError(detail::concat(disassemble(insn), ": the ", module_name(mod), " module has no ",
                                        mod == Module::Load ? "previous" : "next", " stage to exchange tokens with"));
  }
  return insn;
}

uint32_t Isa::encode_uop(const Uop &u) const {
  auto check = [](uint32_t v, BitField f, const char *name) {
    if (v > f.max()) {
      throw VtaDecodeError(
          detail::concat("cannot encode micro-op ", name, " = ", v, ": the field has ", f.width, " bits"));
    }
    return v << f.pos;
  };
  return check(u.dst, layout_.uop_dst, "dst") | check(u.src, layout_.uop_src, "src") |
         check(u.wgt, layout_.uop_wgt, "wgt");
}

Uop Isa::decode_uop(uint32_t word) const {
  auto field = [word](BitField f) { return static_cast<uint32_t>((word >> f.pos) & f.max()); };
  return Uop{field(layout_.uop_dst), field(layout_.uop_src), field(layout_.uop_wgt)};
}

std::string disassemble(const Insn &insn) {
  std::ostringstream os;
  os << opcode_name(insn.opcode);
  auto loop = [&](const LoopNest &n) {
    os << " uop=[" << n.uop_bgn << "," << n.uop_end << ") iter=" << n.iter_out << "x" << n.iter_in << " dst=("
       << n.dst_factor_out << "," << n.dst_factor_in << ") src=(" << n.src_factor_out << "," << n.src_factor_in << ")";
  };
  switch (insn.opcode) {
    case Opcode::Load:
    case Opcode::Store: {
      const MemInsn &m = insn.mem;
      os << " " << mem_type_name(m.mem_type) << " sram=" << m.sram_base << " dram=0x" << std::hex << m.dram_base
         << std::dec << " y=" << m.y_size << " x=" << m.x_size << " stride=" << m.x_stride;
      if (m.y_pad_0 || m.y_pad_1 || m.x_pad_0 || m.x_pad_1) {
        os << " pad=(" << m.y_pad_0 << "," << m.y_pad_1 << "," << m.x_pad_0 << "," << m.x_pad_1 << ")";
      }
      if (m.x_size == 0) os << " (no-op)";
      break;
    }
    case Opcode::Gemm:
      if (insn.gemm.reset) os << " reset";
      loop(insn.gemm.loop);
      os << " wgt=(" << insn.gemm.wgt_factor_out << "," << insn.gemm.wgt_factor_in << ")";
      break;
    case Opcode::Alu:
      os << " " << alu_op_name(insn.alu.op);
      if (insn.alu.use_imm) os << " imm=" << insn.alu.imm;
      loop(insn.alu.loop);
      break;
    case Opcode::Finish:
      break;
  }
  const DepFlags &d = insn.deps;
  if (d.pop_prev || d.pop_next || d.push_prev || d.push_next) {
    os << " [";
    const char *sep = "";
    if (d.pop_prev) os << sep << "pop_prev", sep = " ";
    if (d.pop_next) os << sep << "pop_next", sep = " ";
    if (d.push_prev) os << sep << "push_prev", sep = " ";
    if (d.push_next) os << sep << "push_next";
    os << "]";
  }
  return os.str();
}

std::string disassemble(const Uop &u) { return detail::concat("uop dst=", u.dst, " src=", u.src, " wgt=", u.wgt); }

std::string disassemble(const Isa &isa, const std::vector<InsnWord> &words) {
  std::ostringstream os;
  for (size_t i = 0; i < words.size(); ++i) {
    os << i << ": ";
    try {
      const Insn insn = isa.decode(words[i]);
      os << disassemble(insn) << "   (" << module_name(module_of(insn)) << ")";
    } catch (const VtaDecodeError &e) {
      os << "<invalid: " << e.what() << ">";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::vta
