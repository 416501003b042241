#include "deploy/vta/simulator.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <sstream>

namespace kiln::vta {

namespace {

// v reduced to a signed `bits`-bit integer (two's complement wrap-around).
int64_t wrap(int64_t v, int bits) {
  if (bits >= 64) return v;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if ((u >> (bits - 1)) & 1) u |= ~mask;
  return static_cast<int64_t>(u);
}

int32_t read_value(const uint8_t *p, int bits) {
  switch (bits) {
    case 8:
      return static_cast<int8_t>(p[0]);
    case 16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    default: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
}

void write_value(uint8_t *p, int bits, int64_t value) {
  const int32_t v = static_cast<int32_t>(wrap(value, bits));
  switch (bits) {
    case 8:
      p[0] = static_cast<uint8_t>(v);
      break;
    case 16: {
      const int16_t h = static_cast<int16_t>(v);
      std::memcpy(p, &h, 2);
      break;
    }
    default:
      std::memcpy(p, &v, 4);
      break;
  }
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

enum Queue { kL2G = 0, kG2L = 1, kG2S = 2, kS2G = 3 };
const char *queue_name(int q) {
  static const char *names[] = {"load->compute", "compute->load", "compute->store", "store->compute"};
  return names[q];
}

// The token queues an instruction pops from and pushes to, given its module.
struct TokenUse {
  std::vector<int> pops, pushes;
};

TokenUse token_use(const Insn &insn) {
  TokenUse t;
  const DepFlags &d = insn.deps;
  switch (module_of(insn)) {
    case Module::Load:
      if (d.pop_next) t.pops.push_back(kG2L);
      if (d.push_next) t.pushes.push_back(kL2G);
      break;
    case Module::Compute:
      if (d.pop_prev) t.pops.push_back(kL2G);
      if (d.pop_next) t.pops.push_back(kS2G);
      if (d.push_prev) t.pushes.push_back(kG2L);
      if (d.push_next) t.pushes.push_back(kG2S);
      break;
    case Module::Store:
      if (d.pop_prev) t.pops.push_back(kG2S);
      if (d.push_prev) t.pushes.push_back(kS2G);
      break;
  }
  return t;
}

}  // namespace

// ---- Dram ----

uint64_t Dram::alloc(uint64_t bytes) {
  const uint64_t pages = std::max<uint64_t>(1, ceil_div(bytes, kPageBytes));
  if (pages * kPageBytes > (uint64_t{1} << 34) || next_ + pages * kPageBytes > (uint64_t{1} << 36)) {
    throw VtaAddressError(detail::concat("DRAM: cannot allocate ", bytes, " bytes"));
  }
  const uint64_t phys = next_;
  regions_.emplace(phys, std::vector<uint8_t>(bytes, 0));
  next_ += (pages + 1) * kPageBytes;  // one unmapped guard page between regions
  return phys;
}

void Dram::free(uint64_t phys) {
  if (regions_.erase(phys) == 0) {
    throw VtaAddressError(detail::concat("DRAM: free of 0x", std::hex, phys, ", which is not an allocated region"));
  }
}

uint8_t *Dram::at(uint64_t phys, uint64_t bytes, const char *what) {
  auto it = regions_.upper_bound(phys);
  if (it != regions_.begin()) {
    --it;
    const uint64_t base = it->first;
    const uint64_t size = it->second.size();
    if (phys >= base && phys - base <= size && bytes <= size - (phys - base)) return it->second.data() + (phys - base);
  }
  throw VtaAddressError(detail::concat(what, ": DRAM range [0x", std::hex, phys, ", 0x", phys + bytes,
                                       ") is outside every allocated region"));
}

void Dram::write(uint64_t phys, const void *src, uint64_t bytes) {
  if (bytes) std::memcpy(at(phys, bytes, "host write"), src, bytes);
}

void Dram::read(uint64_t phys, void *dst, uint64_t bytes) {
  if (bytes) std::memcpy(dst, at(phys, bytes, "host read"), bytes);
}

uint64_t Dram::allocated_bytes() const {
  uint64_t n = 0;
  for (const auto &r : regions_) n += r.second.size();
  return n;
}

// ---- SimCounters ----

double SimCounters::gemm_utilization(const CycleModel &m) const {
  if (total_cycles == 0) return 0.0;
  return static_cast<double>(gemm_counter * static_cast<uint64_t>(m.gemm_cycles_per_uop)) /
         static_cast<double>(total_cycles);
}

double SimCounters::gops(const VtaConfig &cfg) const {
  if (total_cycles == 0) return 0.0;
  const double seconds = static_cast<double>(total_cycles) / (cfg.clock_mhz * 1e6);
  return 2.0 * static_cast<double>(gemm_counter) * static_cast<double>(cfg.macs_per_uop()) / seconds / 1e9;
}

std::vector<std::pair<std::string, uint64_t>> SimCounters::items() const {
  return {{"inp_load_nbytes", inp_load_nbytes},
          {"wgt_load_nbytes", wgt_load_nbytes},
          {"acc_load_nbytes", acc_load_nbytes},
          {"uop_load_nbytes", uop_load_nbytes},
          {"out_store_nbytes", out_store_nbytes},
          {"gemm_counter", gemm_counter},
          {"alu_counter", alu_counter},
          {"total_cycles", total_cycles},
          {"load_busy_cycles", load_busy_cycles},
          {"compute_busy_cycles", compute_busy_cycles},
          {"store_busy_cycles", store_busy_cycles},
          {"gemm_cycles", gemm_cycles},
          {"alu_cycles", alu_cycles},
          {"instructions", instructions}};
}

void SimCounters::accumulate(const SimCounters &o) {
  inp_load_nbytes += o.inp_load_nbytes;
  wgt_load_nbytes += o.wgt_load_nbytes;
  acc_load_nbytes += o.acc_load_nbytes;
  uop_load_nbytes += o.uop_load_nbytes;
  out_store_nbytes += o.out_store_nbytes;
  gemm_counter += o.gemm_counter;
  alu_counter += o.alu_counter;
  total_cycles += o.total_cycles;
  load_busy_cycles += o.load_busy_cycles;
  compute_busy_cycles += o.compute_busy_cycles;
  store_busy_cycles += o.store_busy_cycles;
  gemm_cycles += o.gemm_cycles;
  alu_cycles += o.alu_cycles;
  instructions += o.instructions;
}

// ---- Simulator ----

Simulator::Simulator(const VtaConfig &cfg, Dram &dram, SimOptions options) : isa_(cfg), dram_(dram), options_(options) {
  const VtaConfig &c = isa_.config();
  uop_.assign(c.uop_depth(), 0);
  inp_.assign(static_cast<size_t>(c.inp_depth()) * c.batch() * c.block(), 0);
  wgt_.assign(static_cast<size_t>(c.wgt_depth()) * c.block() * c.block(), 0);
  acc_.assign(static_cast<size_t>(c.acc_depth()) * c.batch() * c.block(), 0);
  out_.assign(acc_.size(), 0);
}

namespace {

void add_steps(uint64_t &steps, uint64_t n, uint64_t limit, const Insn &insn) {
  steps += n;
  if (steps > limit) {
    throw VtaStepLimitError(
        detail::concat(disassemble(insn), ": the run exceeds the limit of ", limit, " micro-op and element steps"));
  }
}

}  // namespace

uint64_t Simulator::exec_load(const Insn &insn, SimCounters &c, uint64_t &steps) {
  const VtaConfig &cfg = config();
  const CycleModel &cm = options_.cycles;
  const MemInsn &m = insn.mem;
  if (m.x_size == 0) return cm.insn_overhead;
  int elem_bytes = 0, depth = 0, values = 0, bits = 0;
  uint64_t *counter = nullptr;
  switch (m.mem_type) {
    case MemType::Uop:
      elem_bytes = VtaConfig::kUopBytes, depth = cfg.uop_depth(), values = 1, bits = 32;
      counter = &c.uop_load_nbytes;
      break;
    case MemType::Inp:
      elem_bytes = cfg.inp_elem_bytes(), depth = cfg.inp_depth(), values = cfg.batch() * cfg.block();
      bits = cfg.inp_bits(), counter = &c.inp_load_nbytes;
      break;
    case MemType::Wgt:
      elem_bytes = cfg.wgt_elem_bytes(), depth = cfg.wgt_depth(), values = cfg.block() * cfg.block();
      bits = cfg.wgt_bits(), counter = &c.wgt_load_nbytes;
      break;
    case MemType::Acc:
      elem_bytes = cfg.acc_elem_bytes(), depth = cfg.acc_depth(), values = cfg.batch() * cfg.block();
      bits = cfg.acc_bits(), counter = &c.acc_load_nbytes;
      break;
    case MemType::Acc8:
      elem_bytes = cfg.batch() * cfg.block(), depth = cfg.acc_depth(), values = cfg.batch() * cfg.block();
      bits = 8, counter = &c.acc_load_nbytes;
      break;
    case MemType::Out:
      throw VtaProtocolError(detail::concat(disassemble(insn), ": the OUT buffer cannot be loaded"));
  }
  const uint64_t rows = uint64_t{m.y_pad_0} + m.y_size + m.y_pad_1;
  const uint64_t cols = uint64_t{m.x_pad_0} + m.x_size + m.x_pad_1;
  if (m.sram_base + rows * cols > static_cast<uint64_t>(depth)) {
    throw VtaAddressError(detail::concat(disassemble(insn), ": writes ", mem_type_name(m.mem_type), " elements [",
                                         m.sram_base, ", ", m.sram_base + rows * cols, ") beyond the buffer depth ",
                                         depth));
  }
  add_steps(steps, rows * cols, options_.max_steps, insn);
  const std::string what = disassemble(insn);
  const uint64_t base = uint64_t{m.dram_base} * elem_bytes;
  uint64_t dst = m.sram_base;
  auto zero = [&](uint64_t n) {
    for (uint64_t e = 0; e < n; ++e, ++dst) {
      if (m.mem_type == MemType::Uop) {
        uop_[dst] = 0;
      } else {
        std::vector<int32_t> &buf = m.mem_type == MemType::Inp ? inp_ : m.mem_type == MemType::Wgt ? wgt_ : acc_;
        std::fill_n(buf.begin() + static_cast<std::ptrdiff_t>(dst * values), values, 0);
      }
    }
  };
  zero(m.y_pad_0 * cols);
  for (uint32_t y = 0; y < m.y_size; ++y) {
    zero(m.x_pad_0);
    const uint8_t *src =
        dram_.at(base + uint64_t{y} * m.x_stride * elem_bytes, uint64_t{m.x_size} * elem_bytes, what.c_str());
    for (uint32_t x = 0; x < m.x_size; ++x, ++dst) {
      const uint8_t *e = src + uint64_t{x} * elem_bytes;
      if (m.mem_type == MemType::Uop) {
        std::memcpy(&uop_[dst], e, 4);
        continue;
      }
      std::vector<int32_t> &buf = m.mem_type == MemType::Inp ? inp_ : m.mem_type == MemType::Wgt ? wgt_ : acc_;
      int32_t *out = buf.data() + dst * values;
      for (int v = 0; v < values; ++v) out[v] = read_value(e + v * bits / 8, bits);
    }
    zero(m.x_pad_1);
  }
  zero(m.y_pad_1 * cols);
  const uint64_t nbytes = uint64_t{m.x_size} * m.y_size * elem_bytes;
  *counter += nbytes;
  return cm.insn_overhead + uint64_t{m.y_size} * cm.dma_row_latency + ceil_div(nbytes, cfg.bus_width_bytes);
}

uint64_t Simulator::exec_store(const Insn &insn, SimCounters &c, uint64_t &steps) {
  const VtaConfig &cfg = config();
  const CycleModel &cm = options_.cycles;
  const MemInsn &m = insn.mem;
  if (m.y_pad_0 || m.y_pad_1 || m.x_pad_0 || m.x_pad_1) {
    throw VtaProtocolError(detail::concat(disassemble(insn), ": a STORE cannot pad"));
  }
  if (m.x_size == 0) return cm.insn_overhead;
  const uint64_t n = uint64_t{m.x_size} * m.y_size;
  if (m.sram_base + n > static_cast<uint64_t>(cfg.out_depth())) {
    throw VtaAddressError(detail::concat(disassemble(insn), ": reads OUT elements [", m.sram_base, ", ",
                                         m.sram_base + n, ") beyond the buffer depth ", cfg.out_depth()));
  }
  add_steps(steps, n, options_.max_steps, insn);
  const std::string what = disassemble(insn);
  const int elem_bytes = cfg.out_elem_bytes();
  const int values = cfg.batch() * cfg.block();
  const int bits = cfg.out_bits();
  const std::vector<int32_t> &src = options_.store_from_out ? out_ : acc_;
  uint64_t s = m.sram_base;
  for (uint32_t y = 0; y < m.y_size; ++y) {
    uint8_t *row = dram_.at((uint64_t{m.dram_base} + uint64_t{y} * m.x_stride) * elem_bytes,
                            uint64_t{m.x_size} * elem_bytes, what.c_str());
    for (uint32_t x = 0; x < m.x_size; ++x, ++s) {
      for (int v = 0; v < values; ++v) {
        write_value(row + uint64_t{x} * elem_bytes + v * bits / 8, bits, src[s * values + v]);
      }
    }
  }
  const uint64_t nbytes = n * elem_bytes;
  c.out_store_nbytes += nbytes;
  return cm.insn_overhead + uint64_t{m.y_size} * cm.dma_row_latency + ceil_div(nbytes, cfg.bus_width_bytes);
}

namespace {

void check_index(const Insn &insn, const char *buffer, uint64_t index, int depth, const Uop &u) {
  if (index >= static_cast<uint64_t>(depth)) {
    throw VtaAddressError(detail::concat(disassemble(insn), ": ", disassemble(u), " reaches ", buffer, " element ",
                                         index, " beyond the buffer depth ", depth));
  }
}

}  // namespace

std::vector<Uop> Simulator::loop_uops(const Insn &insn, const LoopNest &n, uint64_t &steps, uint64_t *count) const {
  const int depth = config().uop_depth();
  if (n.uop_bgn > n.uop_end || n.uop_end > static_cast<uint32_t>(depth)) {
    throw VtaAddressError(detail::concat(disassemble(insn), ": micro-op range [", n.uop_bgn, ", ", n.uop_end,
                                         ") is not within the micro-op buffer (depth ", depth, ")"));
  }
  *count = uint64_t{n.iter_out} * n.iter_in * (n.uop_end - n.uop_bgn);
  add_steps(steps, *count, options_.max_steps, insn);
  std::vector<Uop> uops;
  for (uint32_t u = n.uop_bgn; u < n.uop_end; ++u) uops.push_back(isa_.decode_uop(uop_[u]));
  return uops;
}

uint64_t Simulator::exec_gemm(const Insn &insn, SimCounters &c, uint64_t &steps) {
  const VtaConfig &cfg = config();
  const CycleModel &cm = options_.cycles;
  const GemmInsn &g = insn.gemm;
  const LoopNest &n = g.loop;
  uint64_t count = 0;
  const std::vector<Uop> uops = loop_uops(insn, n, steps, &count);
  const int batch = cfg.batch(), block = cfg.block();
  for (uint32_t o = 0; o < n.iter_out; ++o) {
    for (uint32_t i = 0; i < n.iter_in; ++i) {
      for (const Uop &u : uops) {
        const uint64_t a = u.dst + uint64_t{o} * n.dst_factor_out + uint64_t{i} * n.dst_factor_in;
        check_index(insn, "ACC", a, cfg.acc_depth(), u);
        int32_t *acc = acc_.data() + a * batch * block;
        int32_t *out = out_.data() + a * batch * block;
        if (g.reset) {
          std::fill_n(acc, batch * block, 0);
          std::fill_n(out, batch * block, 0);
          continue;
        }
        const uint64_t x = u.src + uint64_t{o} * n.src_factor_out + uint64_t{i} * n.src_factor_in;
        const uint64_t w = u.wgt + uint64_t{o} * g.wgt_factor_out + uint64_t{i} * g.wgt_factor_in;
        check_index(insn, "INP", x, cfg.inp_depth(), u);
        check_index(insn, "WGT", w, cfg.wgt_depth(), u);
        const int32_t *inp = inp_.data() + x * batch * block;
        const int32_t *wgt = wgt_.data() + w * block * block;
        for (int b = 0; b < batch; ++b) {
          for (int oc = 0; oc < block; ++oc) {
            int64_t sum = 0;
            const int32_t *wr = wgt + oc * block;
            const int32_t *ir = inp + b * block;
            for (int ic = 0; ic < block; ++ic) sum += static_cast<int64_t>(ir[ic]) * wr[ic];
            const int64_t r = wrap(acc[b * block + oc] + sum, cfg.acc_bits());
            acc[b * block + oc] = static_cast<int32_t>(r);
            out[b * block + oc] = static_cast<int32_t>(wrap(r, cfg.out_bits()));
          }
        }
      }
    }
  }
  if (!g.reset) c.gemm_counter += count;
  const uint64_t cycles = cm.insn_overhead + cm.gemm_pipeline_fill + count * cm.gemm_cycles_per_uop;
  c.gemm_cycles += cycles;
  return cycles;
}

uint64_t Simulator::exec_alu(const Insn &insn, SimCounters &c, uint64_t &steps) {
  const VtaConfig &cfg = config();
  const CycleModel &cm = options_.cycles;
  const AluInsn &a = insn.alu;
  const LoopNest &n = a.loop;
  uint64_t count = 0;
  const std::vector<Uop> uops = loop_uops(insn, n, steps, &count);
  const int lanes = cfg.batch() * cfg.block();
  const int bits = cfg.acc_bits();
  for (uint32_t o = 0; o < n.iter_out; ++o) {
    for (uint32_t i = 0; i < n.iter_in; ++i) {
      for (const Uop &u : uops) {
        const uint64_t d = u.dst + uint64_t{o} * n.dst_factor_out + uint64_t{i} * n.dst_factor_in;
        const uint64_t s = u.src + uint64_t{o} * n.src_factor_out + uint64_t{i} * n.src_factor_in;
        check_index(insn, "ACC", d, cfg.acc_depth(), u);
        if (!a.use_imm) check_index(insn, "ACC", s, cfg.acc_depth(), u);
        int32_t *dst = acc_.data() + d * lanes;
        int32_t *out = out_.data() + d * lanes;
        for (int l = 0; l < lanes; ++l) {
          const int64_t x = dst[l];
          const int64_t y = a.use_imm ? a.imm : acc_[s * lanes + l];
          int64_t r = 0;
          switch (a.op) {
            case AluOp::Min:
              r = std::min(x, y);
              break;
            case AluOp::Max:
              r = std::max(x, y);
              break;
            case AluOp::Add:
              r = x + y;
              break;
            case AluOp::Mul:
              r = x * y;
              break;
            case AluOp::Shr:
              if (y >= 0) {
                r = x >> std::min<int64_t>(y, 63);
              } else {
                r = -y >= bits ? 0 : static_cast<int64_t>(static_cast<uint64_t>(x) << -y);
              }
              break;
          }
          r = wrap(r, bits);
          dst[l] = static_cast<int32_t>(r);
          out[l] = static_cast<int32_t>(wrap(r, cfg.out_bits()));
        }
      }
    }
  }
  c.alu_counter += count;
  const uint64_t cycles = cm.insn_overhead + cm.alu_pipeline_fill + count * cm.alu_cycles_per_uop;
  c.alu_cycles += cycles;
  return cycles;
}

SimCounters Simulator::run(const std::vector<InsnWord> &stream) {
  // Decode and route (the fetch module), up to and including FINISH.
  std::vector<Insn> insns;
  insns.reserve(stream.size());
  size_t finish = stream.size();
  for (size_t i = 0; i < stream.size(); ++i) {
    try {
      insns.push_back(isa_.decode(stream[i]));
    } catch (const VtaDecodeError &e) {
      throw VtaDecodeError(detail::concat("instruction ", i, ": ", e.what()));
    }
    if (insns.back().opcode == Opcode::Finish) {
      finish = i;
      break;
    }
  }
  if (finish == stream.size()) {
    throw VtaProtocolError(detail::concat("the stream of ", stream.size(), " instructions has no FINISH"));
  }
  if (finish + 1 != stream.size()) {
    throw VtaProtocolError(detail::concat("instruction ", finish + 1, " follows FINISH (instruction ", finish,
                                          "); FINISH must end the stream"));
  }
  std::vector<size_t> queue[3];
  for (size_t i = 0; i < insns.size(); ++i) queue[static_cast<int>(module_of(insns[i]))].push_back(i);
  size_t head[3] = {0, 0, 0};
  uint64_t time[3] = {0, 0, 0};
  std::deque<uint64_t> tokens[4];  // the cycle each token was pushed
  SimCounters c;
  uint64_t steps = 0;
  uint64_t *busy[3] = {&c.load_busy_cycles, &c.compute_busy_cycles, &c.store_busy_cycles};
  for (;;) {
    // Among the modules whose next instruction has its tokens, run the one that can start first.
    int pick = -1;
    uint64_t pick_start = 0;
    for (int m = 0; m < 3; ++m) {
      if (head[m] == queue[m].size()) continue;
      const TokenUse use = token_use(insns[queue[m][head[m]]]);
      bool ready = true;
      uint64_t start = time[m];
      for (int q : use.pops) {
        if (tokens[q].empty()) {
          ready = false;
          break;
        }
        start = std::max(start, tokens[q].front());
      }
      if (ready && (pick < 0 || start < pick_start)) pick = m, pick_start = start;
    }
    if (pick < 0) {
      std::ostringstream os;
      os << "deadlock: no module can make progress;";
      for (int m = 0; m < 3; ++m) {
        os << " " << module_name(static_cast<Module>(m)) << ": ";
        if (head[m] == queue[m].size()) {
          os << "done;";
          continue;
        }
        const size_t idx = queue[m][head[m]];
        os << "instruction " << idx << " (" << disassemble(insns[idx]) << ") waits for a token on";
        for (int q : token_use(insns[idx]).pops) {
          if (tokens[q].empty()) os << " " << queue_name(q);
        }
        os << ";";
      }
      throw VtaDeadlockError(os.str());
    }
    const size_t idx = queue[pick][head[pick]++];
    const Insn &insn = insns[idx];
    const TokenUse use = token_use(insn);
    for (int q : use.pops) tokens[q].pop_front();
    uint64_t cycles = 0;
    try {
      switch (insn.opcode) {
        case Opcode::Load:
          cycles = exec_load(insn, c, steps);
          break;
        case Opcode::Store:
          cycles = exec_store(insn, c, steps);
          break;
        case Opcode::Gemm:
          cycles = exec_gemm(insn, c, steps);
          break;
        case Opcode::Alu:
          cycles = exec_alu(insn, c, steps);
          break;
        case Opcode::Finish:
          cycles = options_.cycles.insn_overhead;
          break;
      }
    } catch (const VtaAddressError &e) {
      throw VtaAddressError(detail::concat("instruction ", idx, ": ", e.what()));
    } catch (const VtaProtocolError &e) {
      throw VtaProtocolError(detail::concat("instruction ", idx, ": ", e.what()));
    } catch (const VtaStepLimitError &e) {
      throw VtaStepLimitError(detail::concat("instruction ", idx, ": ", e.what()));
    }
    ++c.instructions;
    const uint64_t end = pick_start + cycles;
    *busy[pick] += cycles;
    time[pick] = end;
    for (int q : use.pushes) tokens[q].push_back(end);
    if (insn.opcode == Opcode::Finish) {
      c.total_cycles = std::max({end, time[0], time[1], time[2]});
      std::ostringstream left;
      for (int m = 0; m < 3; ++m) {
        if (head[m] != queue[m].size()) {
          left << " " << queue[m].size() - head[m] << " instruction(s) still queued on "
               << module_name(static_cast<Module>(m)) << " (next: " << queue[m][head[m]] << ": "
               << disassemble(insns[queue[m][head[m]]]) << ");";
        }
      }
      for (int q = 0; q < 4; ++q) {
        if (!tokens[q].empty()) left << " " << tokens[q].size() << " token(s) left on " << queue_name(q) << ";";
      }
      if (!left.str().empty()) {
        throw VtaProtocolError(
            detail::concat("FINISH (instruction ", idx, ") reached with work left over:", left.str()));
      }
      break;
    }
  }
  profile_.accumulate(c);
  return c;
}

}  // namespace kiln::vta
