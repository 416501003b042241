#include "deploy/vta/runtime.h"

#include <sstream>

namespace kiln::vta {

namespace {

int stage_index(Stage s) { return static_cast<int>(s) - 1; }  // = Module

const char *stage_name(Stage s) { return module_name(static_cast<Module>(stage_index(s))); }

void check_pair(Stage from, Stage to, const char *call) {
  const int d = stage_index(to) - stage_index(from);
  if (d != 1 && d != -1) {
    throw VtaRuntimeError(detail::concat(call, "(", stage_name(from), ", ", stage_name(to),
                                         "): tokens only pass between adjacent stages (load-compute, compute-store)"));
  }
}

}  // namespace

void UopKernelBuilder::loop_begin(uint32_t extent, uint32_t dst_factor, uint32_t src_factor, uint32_t wgt_factor) {
  if (pushed_) throw VtaRuntimeError("micro-op kernel: loop_begin after a micro-op was pushed");
  if (loops_.size() == 2) throw VtaRuntimeError("micro-op kernel: more than two loops");
  if (extent == 0) throw VtaRuntimeError("micro-op kernel: a loop of extent 0");
  loops_.push_back(Loop{extent, dst_factor, src_factor, wgt_factor});
  ++open_;
}

void UopKernelBuilder::loop_end() {
  if (open_ == 0) throw VtaRuntimeError("micro-op kernel: loop_end without loop_begin");
  --open_;
}

void UopKernelBuilder::push(uint32_t dst, uint32_t src, uint32_t wgt) {
  if (open_ != static_cast<int>(loops_.size())) {
    throw VtaRuntimeError("micro-op kernel: micro-ops must all sit inside the innermost loop");
  }
  pushed_ = true;
  uops_.push_back(Uop{dst, src, wgt});
}

Runtime::Runtime(const VtaConfig &cfg, SimOptions options) : sim_(cfg, dram_, options) {}

DramBuffer Runtime::alloc(uint64_t bytes) { return DramBuffer{dram_.alloc(bytes), bytes}; }

void Runtime::free(DramBuffer buf) { dram_.free(buf.phys); }

void Runtime::copy_to_device(DramBuffer dst, const void *src, uint64_t bytes, uint64_t offset) {
  if (offset > dst.bytes || bytes > dst.bytes - offset) {
    throw VtaAddressError(
        detail::concat("copy of ", bytes, " bytes at offset ", offset, " into a buffer of ", dst.bytes, " bytes"));
  }
  dram_.write(dst.phys + offset, src, bytes);
}

void Runtime::copy_from_device(void *dst, DramBuffer src, uint64_t bytes, uint64_t offset) {
  if (offset > src.bytes || bytes > src.bytes - offset) {
    throw VtaAddressError(
        detail::concat("copy of ", bytes, " bytes at offset ", offset, " from a buffer of ", src.bytes, " bytes"));
  }
  dram_.read(src.phys + offset, dst, bytes);
}

MemInsn Runtime::mem_insn(DramBuffer buf, uint64_t elem_offset, int elem_bytes, uint32_t x_size, uint32_t y_size,
                          uint32_t x_stride, uint32_t sram_index, const char *what) const {
  if (buf.phys % static_cast<uint64_t>(elem_bytes) != 0) {
    throw VtaRuntimeError(detail::concat(what, ": buffer 0x", std::hex, buf.phys, std::dec,
                                         " is not aligned to its element size of ", elem_bytes, " bytes"));
  }
  const uint64_t base = buf.phys / static_cast<uint64_t>(elem_bytes) + elem_offset;
  if (base > 0xffffffffu) {
    throw VtaRuntimeError(detail::concat(what, ": DRAM element address ", base, " does not fit 32 bits"));
  }
  MemInsn m;
  m.dram_base = static_cast<uint32_t>(base);
  m.sram_base = sram_index;
  m.x_size = x_size;
  m.y_size = y_size;
  m.x_stride = x_stride;
  return m;
}

void Runtime::load_2d(DramBuffer src, uint64_t elem_offset, uint32_t x_size, uint32_t y_size, uint32_t x_stride,
                      MemType type, uint32_t sram_index, Pad pad) {
  const VtaConfig &c = config();
  int elem = 0;
  switch (type) {
    case MemType::Inp:
      elem = c.inp_elem_bytes();
      break;
    case MemType::Wgt:
      elem = c.wgt_elem_bytes();
      break;
    case MemType::Acc:
      elem = c.acc_elem_bytes();
      break;
    case MemType::Acc8:
      elem = c.batch() * c.block();
      break;
    case MemType::Uop:
    case MemType::Out:
      throw VtaRuntimeError(
          detail::concat("load_2d of ", mem_type_name(type), ": only INP, WGT, ACC and ACC_8BIT are loaded this way"));
  }
  Insn insn;
  insn.opcode = Opcode::Load;
  insn.mem = mem_insn(src, elem_offset, elem, x_size, y_size, x_stride, sram_index, "load_2d");
  insn.mem.mem_type = type;
  insn.mem.y_pad_0 = pad.y0;
  insn.mem.y_pad_1 = pad.y1;
  insn.mem.x_pad_0 = pad.x0;
  insn.mem.x_pad_1 = pad.x1;
  emit(insn);
}

void Runtime::store_2d(DramBuffer dst, uint64_t elem_offset, uint32_t x_size, uint32_t y_size, uint32_t x_stride,
                       uint32_t sram_index) {
  Insn insn;
  insn.opcode = Opcode::Store;
  insn.mem = mem_insn(dst, elem_offset, config().out_elem_bytes(), x_size, y_size, x_stride, sram_index, "store_2d");
  insn.mem.mem_type = MemType::Out;
  emit(insn);
}

const Runtime::Kernel &Runtime::kernel(const std::string &signature, const KernelFn &build) {
  auto it = kernels_.find(signature);
  if (it != kernels_.end()) return it->second;
  UopKernelBuilder b;
  build(b);
  if (b.open_ != 0) throw VtaRuntimeError(detail::concat("micro-op kernel '", signature, "': a loop is not closed"));
  if (b.uops_.empty()) throw VtaRuntimeError(detail::concat("micro-op kernel '", signature, "' has no micro-ops"));
  if (b.uops_.size() > static_cast<size_t>(config().uop_depth())) {
    throw VtaRuntimeError(detail::concat("micro-op kernel '", signature, "' has ", b.uops_.size(),
                                         " micro-ops; the micro-op buffer holds ", config().uop_depth()));
  }
  Kernel k;
  k.loops = b.loops_;
  k.size = static_cast<uint32_t>(b.uops_.size());
  std::vector<uint32_t> words;
  for (const Uop &u : b.uops_) {
    try {
      words.push_back(sim_.isa().encode_uop(u));
    } catch (const VtaDecodeError &e) {
      throw VtaRuntimeError(detail::concat("micro-op kernel '", signature, "': ", e.what()));
    }
  }
  k.dram = alloc(words.size() * VtaConfig::kUopBytes);
  copy_to_device(k.dram, words.data(), k.dram.bytes);
  return kernels_.emplace(signature, std::move(k)).first->second;
}

uint32_t Runtime::make_resident(const std::string &signature, const Kernel &k) {
  auto it = resident_.find(signature);
  if (it != resident_.end()) return it->second;
  const uint32_t depth = static_cast<uint32_t>(config().uop_depth());
  if (uop_cursor_ + k.size > depth) uop_cursor_ = 0;
  const uint32_t begin = uop_cursor_, end = uop_cursor_ + k.size;
  for (auto r = resident_.begin(); r != resident_.end();) {
    const uint32_t rb = r->second, re = r->second + kernels_.at(r->first).size;
    if (rb < end && begin < re) {
      r = resident_.erase(r);
    } else {
      ++r;
    }
  }
  Insn insn;
  insn.opcode = Opcode::Load;
  insn.mem = mem_insn(k.dram, 0, VtaConfig::kUopBytes, k.size, 1, k.size, begin, "micro-op load");
  insn.mem.mem_type = MemType::Uop;
  emit(insn);
  ++uop_loads_;
  resident_[signature] = begin;
  uop_cursor_ = end;
  return begin;
}

LoopNest Runtime::loop_nest(const Kernel &k, uint32_t offset, uint32_t *wgt_out, uint32_t *wgt_in) const {
  LoopNest n;
  n.uop_bgn = offset;
  n.uop_end = offset + k.size;
  UopKernelBuilder::Loop none{1, 0, 0, 0};
  const UopKernelBuilder::Loop &outer = k.loops.size() == 2 ? k.loops[0] : none;
  const UopKernelBuilder::Loop &inner = k.loops.size() == 2 ? k.loops[1] : k.loops.size() == 1 ? k.loops[0] : none;
  n.iter_out = outer.extent;
  n.iter_in = inner.extent;
  n.dst_factor_out = outer.dst;
  n.dst_factor_in = inner.dst;
  n.src_factor_out = outer.src;
  n.src_factor_in = inner.src;
  *wgt_out = outer.wgt;
  *wgt_in = inner.wgt;
  return n;
}

void Runtime::push_gemm(const std::string &signature, const KernelFn &build, bool reset) {
  const Kernel &k = kernel(signature, build);
  const uint32_t offset = make_resident(signature, k);
  Insn insn;
  insn.opcode = Opcode::Gemm;
  insn.gemm.reset = reset;
  insn.gemm.loop = loop_nest(k, offset, &insn.gemm.wgt_factor_out, &insn.gemm.wgt_factor_in);
  emit(insn);
}

void Runtime::push_alu(const std::string &signature, const KernelFn &build, AluOp op, std::optional<int32_t> imm) {
  const Kernel &k = kernel(signature, build);
  const uint32_t offset = make_resident(signature, k);
  Insn insn;
  insn.opcode = Opcode::Alu;
  uint32_t wo = 0, wi = 0;
  insn.alu.loop = loop_nest(k, offset, &wo, &wi);
  insn.alu.op = op;
  insn.alu.use_imm = imm.has_value();
  insn.alu.imm = imm.value_or(0);
  emit(insn);
}

void Runtime::emit(Insn insn) {
  const int m = static_cast<int>(module_of(insn));
  insn.deps.pop_prev = pending_pop_[m][0];
  insn.deps.pop_next = pending_pop_[m][1];
  try {
    (void)sim_.isa().encode(insn);
  } catch (const VtaDecodeError &e) {
    throw VtaRuntimeError(detail::concat(disassemble(insn), ": ", e.what()));
  }
  pending_pop_[m][0] = pending_pop_[m][1] = false;
  insns_.push_back(insn);
}

void Runtime::emit_noop(Module m) {
  Insn insn;
  switch (m) {
    case Module::Load:
      insn.opcode = Opcode::Load;
      insn.mem.mem_type = MemType::Inp;
      break;
    case Module::Compute:
      insn.opcode = Opcode::Load;
      insn.mem.mem_type = MemType::Uop;
      break;
    case Module::Store:
      insn.opcode = Opcode::Store;
      insn.mem.mem_type = MemType::Out;
      break;
  }
  emit(insn);
}

void Runtime::dep_push(Stage from, Stage to) {
  check_pair(from, to, "dep_push");
  const Module m = static_cast<Module>(stage_index(from));
  const bool next = stage_index(to) > stage_index(from);
  for (auto it = insns_.rbegin(); it != insns_.rend(); ++it) {
    if (module_of(*it) != m) continue;
    bool &flag = next ? it->deps.push_next : it->deps.push_prev;
    if (!flag) {
      flag = true;
      return;
    }
    break;
  }
  emit_noop(m);
  (next ? insns_.back().deps.push_next : insns_.back().deps.push_prev) = true;
}

void Runtime::dep_pop(Stage from, Stage to) {
  check_pair(from, to, "dep_pop");
  const int m = stage_index(to);
  const int which = stage_index(from) < stage_index(to) ? 0 : 1;
  if (pending_pop_[m][which]) emit_noop(static_cast<Module>(m));
  pending_pop_[m][which] = true;
}

std::vector<InsnWord> Runtime::stream() const {
  std::vector<InsnWord> words;
  words.reserve(insns_.size());
  for (const Insn &i : insns_) words.push_back(sim_.isa().encode(i));
  return words;
}

SimCounters Runtime::synchronize() {
  dep_push(Stage::Store, Stage::Compute);
  dep_push(Stage::Load, Stage::Compute);
  dep_pop(Stage::Store, Stage::Compute);
  dep_pop(Stage::Load, Stage::Compute);
  for (Module m : {Module::Load, Module::Store}) {
    const int i = static_cast<int>(m);
    if (pending_pop_[i][0] || pending_pop_[i][1]) emit_noop(m);
  }
  Insn finish;
  finish.opcode = Opcode::Finish;
  emit(finish);
  last_stream_ = stream();
  insns_.clear();
  resident_.clear();
  uop_cursor_ = 0;
  for (auto &p : pending_pop_) p[0] = p[1] = false;
  return sim_.run(last_stream_);
}

std::string Runtime::dump_last() const { return disassemble(sim_.isa(), last_stream_); }

}  // namespace kiln::vta
