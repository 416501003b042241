#include "compiler/codegen/vta/vta_codegen.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "compiler/ir/ir_printer.h"
#include "compiler/ir/op.h"
#include "contracts/target.h"

namespace kiln::codegen::vta {

using namespace ir;
using kiln::vta::AluOp;
using kiln::vta::MemType;
using kiln::vta::Uop;
using kiln::vta::VtaConfig;

namespace {

constexpr int kLoadStage = 1, kComputeStage = 2, kStoreStage = 3;

[[noreturn]] void fail(const std::string &what) { throw VtaCodegenError("VTA code generation: " + what); }

std::string show(const Expr &e) {
  std::ostringstream os;
  os << e;
  return os.str();
}

}  // namespace

lower::LowerOptions vta_lower_options() {
  lower::LowerOptions o = lower::LowerOptions::from_env();
  o.partition_loops = false;
  o.unroll = false;
  o.vectorize = false;
  o.reuse_storage = false;
  return o;
}

VtaConfig vta_target_config(const std::string &target) {
  const contracts::Target t = contracts::Target::parse(target);
  auto model = t.value("model");
  return model && !model->empty() ? VtaConfig::parse(*model) : VtaConfig{};
}

te::TensorIntrin gemm_intrin(const VtaConfig &cfg) {
  const int b = cfg.batch(), n = cfg.block();
  te::Tensor x = te::placeholder({b, n}, Int(8), "x");
  te::Tensor w = te::placeholder({n, n}, Int(8), "w");
  te::IterVar k = te::reduce_axis(n, "k");
  te::Tensor out = te::compute(
      {b, n}, [&](Var i, Var j) { return te::sum(cast(Int(32), x(i, k)) * cast(Int(32), w(j, k)), {k}); }, "gemm");
  auto call = [](const te::TensorIntrinBuffers &bf, bool reset) {
    std::vector<Expr> args = {bf.outputs[0].data, bf.output_offsets[0]};
    if (!reset) {
      args.insert(args.end(), {bf.inputs[0].data, bf.input_offsets[0], bf.inputs[1].data, bf.input_offsets[1]});
    }
    return EvaluateNode::make(
        CallNode::make(Int(32), reset ? "vta.gemm_reset" : "vta.gemm", std::move(args), CallNode::Kind::Intrinsic));
  };
  return te::decl_tensor_intrin(
      "vta.gemm", out,
      [call](const te::TensorIntrinBuffers &bf) { return BlockNode::make(call(bf, true), call(bf, false)); },
      [call](const te::TensorIntrinBuffers &bf) { return call(bf, true); },
      [call](const te::TensorIntrinBuffers &bf) { return call(bf, false); });
}

namespace {

struct BufferInfo {
  std::string scope;  // "global" for a parameter
  DataType dtype;
  int64_t scalars = 0;
  int param = -1;
};

// Folds a flat micro-op list into at most two loops with affine indices (the instruction's
// iteration and factor fields). Returns the loops (extent, dst, src, wgt per loop) and the body.
std::pair<std::vector<uint32_t>, std::vector<Uop>> fold_uops(const std::vector<Uop> &flat) {
  const size_t n = flat.size();
  auto diff = [](const Uop &a, const Uop &b, int64_t *d) {
    d[0] = int64_t{b.dst} - a.dst;
    d[1] = int64_t{b.src} - a.src;
    d[2] = int64_t{b.wgt} - a.wgt;
    return d[0] >= 0 && d[1] >= 0 && d[2] >= 0;
  };
  auto matches = [&](size_t m, size_t ei, size_t eo, const int64_t *fi, const int64_t *fo) {
    for (size_t o = 0; o < eo; ++o)
      for (size_t i = 0; i < ei; ++i)
        for (size_t k = 0; k < m; ++k) {
          const Uop &u = flat[(o * ei + i) * m + k], &b = flat[k];
          if (int64_t{u.dst} != b.dst + int64_t(o) * fo[0] + int64_t(i) * fi[0] ||
              int64_t{u.src} != b.src + int64_t(o) * fo[1] + int64_t(i) * fi[1] ||
              int64_t{u.wgt} != b.wgt + int64_t(o) * fo[2] + int64_t(i) * fi[2]) {
            return false;
          }
        }
    return true;
  };
  for (size_t m = 1; m < n; ++m) {
    if (n % m) continue;
    const size_t nb = n / m;
    int64_t fi[3];
    if (!diff(flat[0], flat[m], fi)) continue;
    // The longest run of blocks with step fi, then the largest divisor of nb within it.
    size_t run = 1;
    while (run < nb) {
      bool ok = true;
      for (size_t k = 0; k < m && ok; ++k) {
        const Uop &u = flat[run * m + k], &b = flat[k];
        ok = int64_t{u.dst} == b.dst + int64_t(run) * fi[0] && int64_t{u.src} == b.src + int64_t(run) * fi[1] &&
             int64_t{u.wgt} == b.wgt + int64_t(run) * fi[2];
      }
      if (!ok) break;
      ++run;
    }
    for (size_t ei = std::min(run, nb); ei >= 2; --ei) {
      if (nb % ei) continue;
      const size_t eo = nb / ei;
      int64_t fo[3] = {0, 0, 0};
      if (eo > 1 && !diff(flat[0], flat[ei * m], fo)) continue;
      if (!matches(m, ei, eo, fi, fo)) continue;
      std::vector<uint32_t> loops;
      if (eo > 1) loops.insert(loops.end(), {uint32_t(eo), uint32_t(fo[0]), uint32_t(fo[1]), uint32_t(fo[2])});
      loops.insert(loops.end(), {uint32_t(ei), uint32_t(fi[0]), uint32_t(fi[1]), uint32_t(fi[2])});
      return {loops, std::vector<Uop>(flat.begin(), flat.begin() + static_cast<std::ptrdiff_t>(m))};
    }
  }
  return {{}, flat};
}

}  // namespace

class ProgramBuilder {
 public:
  ProgramBuilder(VtaProgram &p, const LoweredFunc &f) : p_(p), cfg_(p.cfg_) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Buffer &b = f.params[i];
      BufferInfo info;
      info.scope = "global";
      info.dtype = b.dtype;
      info.param = static_cast<int>(i);
      buffers_[b.data.get()] = info;
    }
  }

  void build(const Stmt &body) {
    std::vector<VtaProgram::Action> acts;
    walk(body, &acts);
    place_tokens(acts);
  }

 private:
  // --- evaluation of the loop nest ---

  int64_t eval(const Expr &e) {
    switch (e->node_type) {
      case NodeType::IntImm:
        return e.as<IntImmNode>()->value;
      case NodeType::Variable: {
        auto it = env_.find(e.as<VariableNode>());
        if (it == env_.end()) fail("variable " + e.as<VariableNode>()->name + " has no value at compile time");
        return it->second;
      }
      case NodeType::Cast: {
        const auto *c = e.as<CastNode>();
        if (!c->type.is_int() && !c->type.is_uint() && !c->type.is_bool()) fail("cannot evaluate " + show(e));
        return eval(c->value);
      }
#define KILN_VTA_BIN(N, op)                 \
  case NodeType::N: {                       \
    const auto *b = e.as<N##Node>();        \
    int64_t x = eval(b->a), y = eval(b->b); \
    return op;                              \
  }
        KILN_VTA_BIN(Add, x + y)
        KILN_VTA_BIN(Sub, x - y)
        KILN_VTA_BIN(Mul, x * y)
        KILN_VTA_BIN(Div, y ? x / y : 0)
        KILN_VTA_BIN(Mod, y ? x % y : 0)
        KILN_VTA_BIN(FloorDiv, y ? (x / y - ((x % y != 0) && ((x < 0) != (y < 0)))) : 0)
        KILN_VTA_BIN(FloorMod, y ? (x - y * (x / y - ((x % y != 0) && ((x < 0) != (y < 0))))) : 0)
        KILN_VTA_BIN(Min, std::min(x, y))
        KILN_VTA_BIN(Max, std::max(x, y))
        KILN_VTA_BIN(EQ, x == y)
        KILN_VTA_BIN(NE, x != y)
        KILN_VTA_BIN(LT, x < y)
        KILN_VTA_BIN(LE, x <= y)
        KILN_VTA_BIN(GT, x > y)
        KILN_VTA_BIN(GE, x >= y)
        KILN_VTA_BIN(And, x && y)
        KILN_VTA_BIN(Or, x || y)
#undef KILN_VTA_BIN
      case NodeType::Not:
        return !eval(e.as<NotNode>()->a);
      case NodeType::Select: {
        const auto *s = e.as<SelectNode>();
        return eval(s->condition) ? eval(s->true_value) : eval(s->false_value);
      }
      case NodeType::Let: {
        const auto *l = e.as<LetNode>();
        env_[l->var.get()] = eval(l->value);
        return eval(l->body);
      }
      case NodeType::Call: {
        const auto *c = e.as<CallNode>();
        if (c->name == intrinsic::kIfThenElse || c->name == "likely") {
          if (c->name == "likely") return eval(c->args[0]);
          return eval(c->args[0]) ? eval(c->args[1]) : eval(c->args[2]);
        }
        break;
      }
      default:
        break;
    }
    fail("cannot evaluate " + show(e) + " at compile time");
  }

  const BufferInfo &info(const Var &v) {
    auto it = buffers_.find(v.get());
    if (it == buffers_.end()) fail("buffer " + v.name() + " is not allocated");
    return it->second;
  }
  // Scalars of one on-chip element of a scope.
  int64_t elem_scalars(const std::string &scope) const {
    if (scope == kWgtScope) return int64_t{cfg_.block()} * cfg_.block();
    return int64_t{cfg_.batch()} * cfg_.block();
  }
  int scope_index(const std::string &scope) const {
    if (scope == kInpScope) return 0;
    if (scope == kWgtScope) return 1;
    if (scope == kAccScope) return 2;
    return -1;
  }
  int64_t depth(int si) const { return si == 0 ? cfg_.inp_depth() : si == 1 ? cfg_.wgt_depth() : cfg_.acc_depth(); }

  // The element index of a buffer's first element in its on-chip buffer (placed on first use, per
  // virtual thread). alias >= 0 places it there instead.
  int64_t base(const Var &v, int64_t alias = -1) {
    const BufferInfo &bi = info(v);
    const int si = scope_index(bi.scope);
    if (si < 0) fail("buffer " + v.name() + " is in scope " + bi.scope + ", not an on-chip buffer");
    const auto key = std::make_pair(v.get(), thread_);
    auto it = placed_.find(key);
    if (it != placed_.end()) return it->second;
    if (alias >= 0) return placed_[key] = alias;
    const int64_t elems = (bi.scalars + elem_scalars(bi.scope) - 1) / elem_scalars(bi.scope);
    const int64_t at = cursor_[si];
    if (at + elems > depth(si)) {
      static const char *names[] = {"input", "weight", "accumulator"};
      throw VtaBufferOverflowError(std::string("the ") + names[si] + " buffer (" + bi.scope + ", " +
                                   std::to_string(depth(si)) + " elements in " + cfg_.model_name() +
                                   ") cannot hold the tiles of this schedule: " + v.name() + " needs " +
                                   std::to_string(elems) + " elements after " + std::to_string(at) +
                                   " already in use; choose smaller tiles or fewer virtual threads");
    }
    cursor_[si] = at + elems;
    p_.used_[si] = std::max(p_.used_[si], cursor_[si]);
    return placed_[key] = at;
  }

  // --- the walk ---

  void walk(const Stmt &s, std::vector<VtaProgram::Action> *out) {
    switch (s->node_type) {
      case NodeType::Block:
        for (const Stmt &c : s.as<BlockNode>()->stmts) walk(c, out);
        return;
      case NodeType::LetStmt: {
        const auto *l = s.as<LetStmtNode>();
        env_[l->var.get()] = eval(l->value);
        walk(l->body, out);
        return;
      }
      case NodeType::AssertStmt:
        walk(s.as<AssertStmtNode>()->body, out);
        return;
      case NodeType::AttrStmt: {
        const auto *a = s.as<AttrStmtNode>();
        if (a->key == std::string(attr::kPragmaPrefix) + "dma_copy") return dma(a->body, out);
        if (a->key == std::string(attr::kPragmaPrefix) + "alu") return alu(a->body, out);
        walk(a->body, out);
        return;
      }
      case NodeType::Allocate: {
        const auto *a = s.as<AllocateNode>();
        BufferInfo bi;
        bi.scope = a->scope;
        bi.dtype = a->dtype;
        bi.scalars = 1;
        for (const Expr &e : a->extents) bi.scalars *= eval(e);
        if (scope_index(a->scope) < 0) fail("buffer " + a->buffer_var.name() + " is in scope " + a->scope);
        buffers_[a->buffer_var.get()] = bi;
        walk(a->body, out);
        return;
      }
      case NodeType::IfThenElse: {
        const auto *c = s.as<IfThenElseNode>();
        if (eval(c->condition)) {
          walk(c->then_case, out);
        } else if (c->else_case.defined()) {
          walk(c->else_case, out);
        }
        return;
      }
      case NodeType::For: {
        const auto *f = s.as<ForNode>();
        if (f->kind == ForKind::ThreadBinding && f->thread_tag == "vthread") return vthread(f, out);
        if (f->kind == ForKind::ThreadBinding) fail("loop " + f->loop_var.name() + " is bound to " + f->thread_tag);
        if (only_gemm(s)) return gemm(s, out);
        const int64_t mn = eval(f->min), ext = eval(f->extent);
        for (int64_t i = mn; i < mn + ext; ++i) {
          env_[f->loop_var.get()] = i;
          walk(f->body, out);
        }
        return;
      }
      case NodeType::Evaluate:
        if (is_prefetch(s.as<EvaluateNode>()->value)) return;  // a hint: nothing to do
        if (only_gemm(s)) return gemm(s, out);
        fail("an expression statement that is not a VTA intrinsic: " + show(s.as<EvaluateNode>()->value));
      case NodeType::Store:
        fail("a store to " + s.as<StoreNode>()->buffer_var.name() +
             " outside a DMA or ALU region (the schedule must pragma its stage dma_copy or alu)");
      default:
        fail("a statement the VTA code generator does not handle");
    }
  }

  // Virtual threads: each thread's body gives a list of instructions; the lists are interleaved by
  // instruction group (a run of one stage), so that one thread loads while another computes.
  void vthread(const ForNode *f, std::vector<VtaProgram::Action> *out) {
    const int64_t ext = eval(f->extent);
    const int outer = thread_;
    std::vector<std::vector<std::vector<VtaProgram::Action>>> groups(ext);
    for (int64_t t = 0; t < ext; ++t) {
      thread_ = outer * static_cast<int>(ext) + static_cast<int>(t);
      env_[f->loop_var.get()] = t;
      std::vector<VtaProgram::Action> acts;
      walk(f->body, &acts);
      for (auto &a : acts) {
        if (groups[t].empty() || groups[t].back().back().stage != a.stage) groups[t].emplace_back();
        groups[t].back().push_back(a);
      }
    }
    thread_ = outer;
    size_t most = 0;
    for (const auto &g : groups) most = std::max(most, g.size());
    for (size_t k = 0; k < most; ++k)
      for (const auto &g : groups)
        if (k < g.size()) out->insert(out->end(), g[k].begin(), g[k].end());
  }

  bool only_gemm(const Stmt &s) const {
    switch (s->node_type) {
      case NodeType::For: {
        const auto *f = s.as<ForNode>();
        return f->kind != ForKind::ThreadBinding && only_gemm(f->body);
      }
      case NodeType::Block:
        for (const Stmt &c : s.as<BlockNode>()->stmts)
          if (!only_gemm(c)) return false;
        return true;
      case NodeType::LetStmt:
        return only_gemm(s.as<LetStmtNode>()->body);
      case NodeType::AttrStmt: {
        const auto *a = s.as<AttrStmtNode>();
        return a->key.rfind(attr::kPragmaPrefix, 0) != 0 && only_gemm(a->body);
      }
      case NodeType::IfThenElse: {
        const auto *c = s.as<IfThenElseNode>();
        return only_gemm(c->then_case) && (!c->else_case.defined() || only_gemm(c->else_case));
      }
      case NodeType::Evaluate: {
        const auto *c = s.as<EvaluateNode>()->value.as<CallNode>();
        return c && (c->name == "vta.gemm" || c->name == "vta.gemm_reset");
      }
      default:
        return false;
    }
  }

  // Runs a loop nest at compile time, calling `leaf` for each statement that is not a loop,
  // block, let or condition.
  template <typename F>
  void iterate(const Stmt &s, F &&leaf) {
    switch (s->node_type) {
      case NodeType::For: {
        const auto *f = s.as<ForNode>();
        const int64_t mn = eval(f->min), ext = eval(f->extent);
        for (int64_t i = mn; i < mn + ext; ++i) {
          env_[f->loop_var.get()] = i;
          iterate(f->body, leaf);
        }
        return;
      }
      case NodeType::Block:
        for (const Stmt &c : s.as<BlockNode>()->stmts) iterate(c, leaf);
        return;
      case NodeType::LetStmt: {
        const auto *l = s.as<LetStmtNode>();
        env_[l->var.get()] = eval(l->value);
        iterate(l->body, leaf);
        return;
      }
      case NodeType::AttrStmt:
        iterate(s.as<AttrStmtNode>()->body, leaf);
        return;
      case NodeType::IfThenElse: {
        const auto *c = s.as<IfThenElseNode>();
        if (eval(c->condition)) {
          iterate(c->then_case, leaf);
        } else if (c->else_case.defined()) {
          iterate(c->else_case, leaf);
        }
        return;
      }
      default:
        leaf(s);
    }
  }

  int add_kernel(const std::vector<Uop> &flat, const std::string &kind) {
    auto [loops, uops] = fold_uops(flat);
    VtaProgram::Kernel k;
    k.loops = loops;
    k.uops = uops;
    std::ostringstream sig;
    sig << kind;
    for (uint32_t l : loops) sig << ',' << l;
    sig << ';';
    for (const Uop &u : uops) sig << u.dst << ',' << u.src << ',' << u.wgt << ';';
    k.signature = sig.str();
    auto it = kernel_ids_.find(k.signature);
    if (it != kernel_ids_.end()) return it->second;
    p_.kernels_.push_back(std::move(k));
    const int id = static_cast<int>(p_.kernels_.size()) - 1;
    kernel_ids_[p_.kernels_.back().signature] = id;
    return id;
  }

  int64_t elem_of(const Var &buf, int64_t scalar, const char *what) {
    const int64_t e = elem_scalars(info(buf).scope);
    if (scalar % e) fail(std::string(what) + " of the GEMM intrinsic in " + buf.name() + " is not element-aligned");
    return base(buf) + scalar / e;
  }

  // A loop nest of GEMM intrinsic calls: one reset instruction over every accumulator row the nest
  // resets, then one GEMM instruction over its updates (a reset guarded inside the reduction loop
  // moves ahead of the updates; a reset of a row the nest has already updated starts a new pair).
  void gemm(const Stmt &s, std::vector<VtaProgram::Action> *out) {
    std::vector<Uop> resets, updates;
    std::set<uint32_t> updated;
    auto flush = [&] {
      if (!resets.empty()) emit_gemm(resets, true, out);
      if (!updates.empty()) emit_gemm(updates, false, out);
      resets.clear();
      updates.clear();
      updated.clear();
    };
    iterate(s, [&](const Stmt &leaf) {
      const auto *c = leaf.as<EvaluateNode>()->value.as<CallNode>();
      const bool r = c->name == "vta.gemm_reset";
      Uop u;
      u.dst = static_cast<uint32_t>(elem_of(Var(c->args[0]), eval(c->args[1]), "the output"));
      if (r) {
        if (updated.count(u.dst)) flush();
        resets.push_back(u);
        return;
      }
      u.src = static_cast<uint32_t>(elem_of(Var(c->args[2]), eval(c->args[3]), "the input"));
      u.wgt = static_cast<uint32_t>(elem_of(Var(c->args[4]), eval(c->args[5]), "the weight"));
      updates.push_back(u);
      updated.insert(u.dst);
    });
    flush();
  }

  void emit_gemm(const std::vector<Uop> &flat, bool reset, std::vector<VtaProgram::Action> *out) {
    VtaProgram::Action a{VtaProgram::Action::Kind::Gemm};
    a.stage = kComputeStage;
    a.thread = thread_;
    a.reset = reset;
    a.kernel = add_kernel(flat, reset ? "gemm.reset" : "gemm");
    out->push_back(a);
    ++p_.stats_.gemms;
  }

  // --- ALU ---

  void alu(const Stmt &body, std::vector<VtaProgram::Action> *out) {
    const int64_t lanes = int64_t{cfg_.batch()} * cfg_.block();
    struct Lane {
      AluOp op;
      std::optional<int32_t> imm;
      Var dst, a, b;
      int64_t di, ai, bi;
      bool copy;
    };
    std::vector<Lane> ls;
    iterate(body, [&](const Stmt &leaf) {
      const auto *st = leaf.as<StoreNode>();
      if (!st) fail("an ALU region holds a statement that is not a store");
      Lane l{AluOp::Add, std::nullopt, st->buffer_var, Var(), Var(), eval(st->index), 0, 0, false};
      Expr v = st->value;
      while (const auto *c = v.as<CastNode>()) v = c->value;
      auto load = [&](const Expr &e, Var *buf, int64_t *idx) {
        Expr x = e;
        while (const auto *c = x.as<CastNode>()) x = c->value;
        const auto *ld = x.as<LoadNode>();
        if (!ld) return false;
        *buf = ld->buffer_var;
        *idx = eval(ld->index);
        return true;
      };
      auto imm = [&](const Expr &e, int64_t *value) {
        Expr x = e;
        while (const auto *c = x.as<CastNode>()) x = c->value;
        if (const auto *i = x.as<IntImmNode>()) {
          *value = i->value;
          return true;
        }
        return false;
      };
      auto binary = [&](const Expr &a, const Expr &b, AluOp op, bool commutes) {
        int64_t k;
        if (load(a, &l.a, &l.ai)) {
          l.op = op;
          if (imm(b, &k)) {
            l.imm = static_cast<int32_t>(k);
            return true;
          }
          return load(b, &l.b, &l.bi);
        }
        if (commutes && load(b, &l.a, &l.ai) && imm(a, &k)) {
          l.op = op;
          l.imm = static_cast<int32_t>(k);
          return true;
        }
        return false;
      };
      bool ok = false;
      int64_t k;
      if (const auto *d = v.as<FloorDivNode>()) {
        ok = load(d->a, &l.a, &l.ai) && imm(d->b, &k) && k > 0 && (k & (k - 1)) == 0;
        if (ok) {
          int shift = 0;
          while ((int64_t{1} << shift) < k) ++shift;
          l.op = AluOp::Shr;
          l.imm = shift;
        }
      } else if (const auto *m = v.as<MulNode>()) {
        ok = binary(m->a, m->b, AluOp::Mul, true);
        if (ok && !l.imm) ok = false;
      } else if (const auto *m = v.as<AddNode>()) {
        ok = binary(m->a, m->b, AluOp::Add, true);
      } else if (const auto *m = v.as<SubNode>()) {
        ok = load(m->a, &l.a, &l.ai) && imm(m->b, &k);
        if (ok) {
          l.op = AluOp::Add;
          l.imm = static_cast<int32_t>(-k);
        }
      } else if (const auto *m = v.as<MaxNode>()) {
        ok = binary(m->a, m->b, AluOp::Max, true);
      } else if (const auto *m = v.as<MinNode>()) {
        ok = binary(m->a, m->b, AluOp::Min, true);
      } else if (load(v, &l.a, &l.ai)) {
        ok = true;
        l.copy = true;
      }
      if (!ok) fail("the ALU has no instruction for " + show(st->value));
      if (l.imm && (*l.imm < -(1 << 15) || *l.imm >= (1 << 15))) {
        fail("the immediate of " + show(st->value) + " does not fit the ALU's 16-bit field");
      }
      ls.push_back(l);
    });
    if (ls.empty()) return;
    if (ls.size() % lanes) fail("an ALU region does not cover whole accumulator elements");
    std::vector<Uop> flat;
    const Lane &f0 = ls[0];
    for (size_t g = 0; g < ls.size(); g += lanes) {
      const Lane &l = ls[g];
      for (int64_t j = 0; j < lanes; ++j) {
        const Lane &x = ls[g + j];
        if (x.op != f0.op || x.imm != f0.imm || x.copy != f0.copy || !x.dst.same_as(l.dst) || !x.a.same_as(l.a) ||
            x.di != l.di + j || x.ai != l.ai + j || (x.b.defined() && x.bi != l.bi + j)) {
          fail("an ALU region mixes operations or does not run over whole accumulator elements");
        }
      }
      if (l.di % lanes || l.ai % lanes || (l.b.defined() && l.bi % lanes)) {
        fail("an ALU region is not aligned to accumulator elements");
      }
      const int64_t a_elem = base(l.a) + l.ai / lanes;
      // The result overwrites its first operand (as the reference's storage rewrite does).
      const int64_t dst_elem = base(l.dst, a_elem - l.di / lanes) + l.di / lanes;
      if (dst_elem != a_elem) {
        fail("the ALU stage writing " + l.dst.name() + " does not work in place on " + l.a.name());
      }
      if (l.copy) continue;
      Uop u;
      u.dst = static_cast<uint32_t>(dst_elem);
      u.src = static_cast<uint32_t>(l.b.defined() ? base(l.b) + l.bi / lanes : dst_elem);
      flat.push_back(u);
    }
    if (flat.empty()) return;
    VtaProgram::Action a{VtaProgram::Action::Kind::Alu};
    a.stage = kComputeStage;
    a.thread = thread_;
    a.alu = f0.op;
    a.imm = f0.imm;
    a.kernel = add_kernel(flat, "alu");
    out->push_back(a);
    ++p_.stats_.alus;
  }

  // --- DMA ---

  void dma(const Stmt &body, std::vector<VtaProgram::Action> *out) {
    struct Copy {
      int64_t dst;
      int64_t src;  // -1: padding
    };
    std::vector<Copy> copies;
    Var dst_buf, src_buf;
    iterate(body, [&](const Stmt &leaf) {
      const auto *st = leaf.as<StoreNode>();
      if (!st) fail("a DMA region holds a statement that is not a store");
      if (dst_buf.defined() && !dst_buf.same_as(st->buffer_var)) fail("a DMA region writes two buffers");
      dst_buf = st->buffer_var;
      Expr v = st->value;
      for (;;) {
        if (const auto *c = v.as<CastNode>()) {
          v = c->value;
          continue;
        }
        const auto *call = v.as<CallNode>();
        if (call && call->name == intrinsic::kIfThenElse) {
          v = eval(call->args[0]) ? call->args[1] : call->args[2];
          continue;
        }
        if (const auto *s = v.as<SelectNode>()) {
          v = eval(s->condition) ? s->true_value : s->false_value;
          continue;
        }
        break;
      }
      Copy c{eval(st->index), -1};
      if (const auto *ld = v.as<LoadNode>()) {
        if (src_buf.defined() && !src_buf.same_as(ld->buffer_var)) fail("a DMA region reads two buffers");
        src_buf = ld->buffer_var;
        c.src = eval(ld->index);
      } else {
        const auto *i = v.as<IntImmNode>();
        if (!i || i->value != 0) fail("a DMA region stores " + show(st->value) + ", not a copy or zero padding");
      }
      copies.push_back(c);
    });
    if (copies.empty()) return;
    if (!src_buf.defined()) fail("a DMA region copies nothing but padding");
    const BufferInfo &di = info(dst_buf), &si = info(src_buf);
    VtaProgram::Action a{VtaProgram::Action::Kind::Load};
    a.thread = thread_;
    int64_t e = 0;
    const bool store = di.scope == "global";
    if (store) {
      if (si.scope != kAccScope) fail("a DMA into " + dst_buf.name() + " does not read the accumulator");
      if (di.dtype.bits() != cfg_.out_bits()) fail("a store into " + dst_buf.name() + " is not of the output width");
      a.kind = VtaProgram::Action::Kind::Store;
      a.stage = kStoreStage;
      a.param = di.param;
      e = elem_scalars(kAccScope);
    } else {
      if (si.scope != "global") fail("a DMA from " + src_buf.name() + " does not read DRAM");
      a.param = si.param;
      e = elem_scalars(di.scope);
      if (di.scope == kInpScope) {
        a.mem = MemType::Inp, a.stage = kLoadStage;
      } else if (di.scope == kWgtScope) {
        a.mem = MemType::Wgt, a.stage = kLoadStage;
      } else {
        a.mem = si.dtype.bits() == cfg_.acc_bits() ? MemType::Acc : MemType::Acc8;
        a.stage = kComputeStage;
      }
    }
    // Whole elements.
    if (copies.size() % e) fail("a DMA region does not copy whole elements");
    struct Elem {
      int64_t dst, src;
    };
    std::vector<Elem> elems;
    for (size_t g = 0; g < copies.size(); g += e) {
      const Copy &c0 = copies[g];
      for (int64_t j = 0; j < e; ++j) {
        const Copy &c = copies[g + j];
        if (c.dst != c0.dst + j || (c0.src < 0) != (c.src < 0) || (c0.src >= 0 && c.src != c0.src + j)) {
          fail("a DMA region does not copy whole contiguous elements (its innermost loops must cover one element)");
        }
      }
      if (c0.dst % e || (c0.src >= 0 && c0.src % e)) fail("a DMA region is not aligned to elements");
      elems.push_back({c0.dst / e, c0.src < 0 ? -1 : c0.src / e});
    }
    if (store) return store_rows(a, src_buf, elems, out);
    for (size_t i = 1; i < elems.size(); ++i) {
      if (elems[i].dst != elems[0].dst + int64_t(i)) fail("a DMA load does not fill its buffer densely");
    }
    const int64_t sram0 = base(dst_buf) + elems[0].dst;
    // Rows: the innermost loops beyond one element.
    struct Row {
      int64_t x0, len, x1, src;  // src < 0: all padding
    };
    std::vector<Row> rows;
    const bool padded = std::any_of(elems.begin(), elems.end(), [](const Elem &x) { return x.src < 0; });
    if (!padded) {
      // Rows are the runs of consecutive DRAM elements.
      for (const Elem &x : elems) {
        if (!rows.empty() && rows.back().src + rows.back().len == x.src) {
          ++rows.back().len;
        } else {
          rows.push_back({0, 1, 0, x.src});
        }
      }
    }
    // With padding, rows are the innermost loops beyond one element.
    const int64_t row = padded ? row_length(body, e, static_cast<int64_t>(elems.size())) : 1;
    for (size_t r = 0; padded && r < elems.size(); r += row) {
      Row w{0, 0, 0, -1};
      size_t i = r;
      while (i < r + row && elems[i].src < 0) ++i, ++w.x0;
      if (i == r + row) {
        rows.push_back({0, 0, 0, -1});
        continue;
      }
      w.src = elems[i].src;
      while (i < r + row && elems[i].src == w.src + w.len) ++i, ++w.len;
      while (i < r + row && elems[i].src < 0) ++i, ++w.x1;
      if (i != r + row) fail("a DMA row is not a contiguous run with padding around it");
      rows.push_back(w);
    }
    // Instructions: runs of rows with one shape and a constant stride, all-padding rows before
    // and after.
    size_t r = 0;
    int64_t sram = sram0;
    while (r < rows.size()) {
      VtaProgram::Action ins = a;
      int64_t y0 = 0, y1 = 0, n = 0, stride = 0;
      const Row *first = nullptr;
      size_t q = r;
      for (; q < rows.size(); ++q) {
        const Row &w = rows[q];
        if (w.src < 0) {
          (first ? y1 : y0) += 1;
          continue;
        }
        if (!first) {
          first = &w;
          n = 1;
          continue;
        }
        if (y1 || w.x0 != first->x0 || w.len != first->len || w.x1 != first->x1) break;
        const int64_t s = w.src - rows[q - 1].src;
        if (n == 1 && s > 0) stride = s;
        if (s != stride || s <= 0) break;
        ++n;
      }
      if (!first) fail("a DMA load of padding only");
      ins.elem_offset = static_cast<uint64_t>(first->src);
      ins.x_size = static_cast<uint32_t>(first->len);
      ins.y_size = static_cast<uint32_t>(n);
      ins.x_stride = static_cast<uint32_t>(n > 1 ? stride : first->len);
      ins.sram = static_cast<uint32_t>(sram);
      ins.pad = kiln::vta::Pad{uint32_t(y0), uint32_t(y1), uint32_t(first->x0), uint32_t(first->x1)};
      out->push_back(ins);
      ++p_.stats_.loads;
      for (size_t i = r; i < q; ++i) sram += padded ? row : rows[i].len;
      r = q;
    }
  }

  // Elements of one DMA row: the product of the innermost loop extents beyond one element (the
  // whole copy when there is no such loop).
  int64_t row_length(const Stmt &body, int64_t elem, int64_t total) {
    std::vector<int64_t> extents;
    Stmt s = body;
    for (;;) {
      if (const auto *f = s.as<ForNode>()) {
        extents.push_back(eval(f->extent));
        s = f->body;
      } else if (const auto *l = s.as<LetStmtNode>()) {
        s = l->body;
      } else if (const auto *a = s.as<AttrStmtNode>()) {
        s = a->body;
      } else if (const auto *c = s.as<IfThenElseNode>()) {
        if (c->else_case.defined()) break;
        s = c->then_case;
      } else {
        break;
      }
    }
    int64_t p = 1;
    for (size_t i = extents.size(); i-- > 0;) {
      p *= extents[i];
      if (p > elem && p % elem == 0) {
        const int64_t r = p / elem;
        return total % r == 0 ? r : total;
      }
    }
    return total;
  }

  template <typename E>
  void store_rows(VtaProgram::Action a, const Var &src_buf, const std::vector<E> &elems,
                  std::vector<VtaProgram::Action> *out) {
    // Rows: runs where both the on-chip and the DRAM index advance by one.
    struct Row {
      int64_t sram, dram, len;
    };
    std::vector<Row> rows;
    const int64_t b = base(src_buf);
    for (const E &x : elems) {
      if (x.src < 0) fail("a store reads padding");
      if (!rows.empty() && rows.back().sram + rows.back().len == b + x.src &&
          rows.back().dram + rows.back().len == x.dst) {
        ++rows.back().len;
      } else {
        rows.push_back({b + x.src, x.dst, 1});
      }
    }
    size_t r = 0;
    while (r < rows.size()) {
      size_t q = r + 1;
      int64_t stride = rows[r].len;
      if (q < rows.size()) stride = rows[q].dram - rows[r].dram;
      while (q < rows.size() && rows[q].len == rows[r].len && rows[q].sram == rows[q - 1].sram + rows[q - 1].len &&
             rows[q].dram - rows[q - 1].dram == stride && stride > 0) {
        ++q;
      }
      if (q == r + 1) stride = rows[r].len;
      VtaProgram::Action ins = a;
      ins.elem_offset = static_cast<uint64_t>(rows[r].dram);
      ins.x_size = static_cast<uint32_t>(rows[r].len);
      ins.y_size = static_cast<uint32_t>(q - r);
      ins.x_stride = static_cast<uint32_t>(stride);
      ins.sram = static_cast<uint32_t>(rows[r].sram);
      out->push_back(ins);
      ++p_.stats_.stores;
      r = q;
    }
  }

  // --- tokens ---

  // A group is a run of actions of one stage and thread. Group g of stage X waits, for each
  // adjacent stage Y, for the last group of Y of its thread that came after X's previous group
  // of that thread: read-after-write (load -> compute -> store) and write-after-read
  // (compute -> load, store -> compute) hazards on the thread's buffers.
  void place_tokens(const std::vector<VtaProgram::Action> &acts) {
    struct Group {
      size_t begin, end;
      int stage, thread;
      std::vector<int> pops, pushes;  // the other stage
    };
    std::vector<Group> gs;
    for (size_t i = 0; i < acts.size(); ++i) {
      if (gs.empty() || gs.back().stage != acts[i].stage || gs.back().thread != acts[i].thread) {
        gs.push_back({i, i, acts[i].stage, acts[i].thread, {}, {}});
      }
      gs.back().end = i + 1;
    }
    std::map<std::pair<int, int>, long> last;           // (stage, thread) -> group
    std::map<std::pair<int, int>, long> last_consumed;  // queue (from, to) -> producer group
    for (size_t g = 0; g < gs.size(); ++g) {
      const int x = gs[g].stage, t = gs[g].thread;
      const long prev = last.count({x, t}) ? last[{x, t}] : -1;
      for (int y : {x - 1, x + 1}) {
        if (y < kLoadStage || y > kStoreStage || !last.count({y, t})) continue;
        const long h = last[{y, t}];
        if (h <= prev) continue;
        auto q = std::make_pair(y, x);
        if (last_consumed.count(q) && last_consumed[q] >= h) {
          fail("the dependency tokens of the interleaved threads are not in order");
        }
        last_consumed[q] = h;
        gs[h].pushes.push_back(x);
        gs[g].pops.push_back(y);
      }
      last[{x, t}] = static_cast<long>(g);
    }
    for (const Group &g : gs) {
      for (int y : g.pops) {
        VtaProgram::Action a{VtaProgram::Action::Kind::Pop};
        a.stage = y, a.to = g.stage, a.thread = g.thread;
        p_.actions_.push_back(a);
      }
      p_.actions_.insert(p_.actions_.end(), acts.begin() + static_cast<std::ptrdiff_t>(g.begin),
                         acts.begin() + static_cast<std::ptrdiff_t>(g.end));
      for (int x : g.pushes) {
        VtaProgram::Action a{VtaProgram::Action::Kind::Push};
        a.stage = g.stage, a.to = x, a.thread = g.thread;
        p_.actions_.push_back(a);
        ++p_.stats_.tokens;
      }
    }
    p_.stats_.kernels = static_cast<int64_t>(p_.kernels_.size());
  }

  VtaProgram &p_;
  const VtaConfig &cfg_;
  std::unordered_map<const VariableNode *, int64_t> env_;
  std::unordered_map<const VariableNode *, BufferInfo> buffers_;
  std::map<std::pair<const VariableNode *, int>, int64_t> placed_;
  int64_t cursor_[3] = {0, 0, 0};
  int thread_ = 0;
  std::map<std::string, int> kernel_ids_;
};

VtaProgram::VtaProgram(const LoweredFunc &f, const VtaConfig &cfg) : name_(f.name), params_(f.params), cfg_(cfg) {
  cfg_.validate();
  if (cfg_.inp_bits() != 8 || cfg_.wgt_bits() != 8) {
    throw VtaCodegenError("VTA code generation: the code generator supports 8-bit inputs and weights, not " +
                          cfg_.model_name());
  }
  ProgramBuilder(*this, f).build(f.body);
}

kiln::vta::SimCounters VtaProgram::run(kiln::vta::Runtime &rt, const std::vector<kiln::vta::DramBuffer> &args) const {
  using kiln::vta::Stage;
  if (args.size() != params_.size()) {
    throw VtaCodegenError("VTA program " + name_ + ": " + std::to_string(params_.size()) + " arguments expected, " +
                          std::to_string(args.size()) + " given");
  }
  for (const Action &a : actions_) {
    switch (a.kind) {
      case Action::Kind::Load:
        rt.load_2d(args[a.param], a.elem_offset, a.x_size, a.y_size, a.x_stride, a.mem, a.sram, a.pad);
        break;
      case Action::Kind::Store:
        rt.store_2d(args[a.param], a.elem_offset, a.x_size, a.y_size, a.x_stride, a.sram);
        break;
      case Action::Kind::Gemm:
      case Action::Kind::Alu: {
        const Kernel &k = kernels_[a.kernel];
        auto build = [&k](kiln::vta::UopKernelBuilder &b) {
          for (size_t l = 0; l < k.loops.size(); l += 4)
            b.loop_begin(k.loops[l], k.loops[l + 1], k.loops[l + 2], k.loops[l + 3]);
          for (const Uop &u : k.uops) b.push(u.dst, u.src, u.wgt);
          for (size_t l = 0; l < k.loops.size(); l += 4) b.loop_end();
        };
        if (a.kind == Action::Kind::Gemm) {
          rt.push_gemm(k.signature, build, a.reset);
        } else {
          rt.push_alu(k.signature + "/" + std::to_string(int(a.alu)) + "/" + (a.imm ? std::to_string(*a.imm) : "r"),
                      build, a.alu, a.imm);
        }
        break;
      }
      case Action::Kind::Push:
        rt.dep_push(static_cast<Stage>(a.stage), static_cast<Stage>(a.to));
        break;
      case Action::Kind::Pop:
        rt.dep_pop(static_cast<Stage>(a.stage), static_cast<Stage>(a.to));
        break;
    }
  }
  return rt.synchronize();
}

kiln::vta::SimCounters VtaProgram::run_host(kiln::vta::Runtime &rt, const std::vector<HostArg> &args) const {
  std::vector<kiln::vta::DramBuffer> bufs;
  for (const HostArg &h : args) {
    bufs.push_back(rt.alloc(std::max<uint64_t>(h.bytes, 1)));
    rt.copy_to_device(bufs.back(), h.data, h.bytes);
  }
  kiln::vta::SimCounters c;
  try {
    c = run(rt, bufs);
  } catch (...) {
    for (const auto &b : bufs) rt.free(b);
    throw;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    rt.copy_from_device(args[i].data, bufs[i], args[i].bytes);
    rt.free(bufs[i]);
  }
  return c;
}

}  // namespace kiln::codegen::vta
