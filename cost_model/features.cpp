#include "cost_model/features.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <unordered_map>

#include "compiler/arith/analyzer.h"
#include "compiler/ir/op.h"
#include "compiler/ir/ir_visitor.h"
#include "contracts/json.h"

namespace kiln::cost_model {

namespace {

using namespace ir;
using contracts::Json;

float lg(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The annotation slots of a loop's one-hot.
enum Annotation { kSerial, kParallel, kVectorized, kUnrolled, kBlockIdx, kThreadIdx, kVThread, kAnnotations };

Annotation annotation_of(ForKind kind, const std::string &tag) {
  switch (kind) {
    case ForKind::Serial:
      return kSerial;
    case ForKind::Parallel:
      return kParallel;
    case ForKind::Vectorized:
      return kVectorized;
    case ForKind::Unrolled:
      return kUnrolled;
    case ForKind::ThreadBinding:
      if (tag.rfind("blockIdx", 0) == 0) return kBlockIdx;
      if (tag.rfind("threadIdx", 0) == 0) return kThreadIdx;
      return kVThread;
  }
  return kSerial;
}

struct Loop {
  const VariableNode *var = nullptr;
  int64_t extent = 1;
  Annotation annotation = kSerial;
};

// How an index moves with one loop variable: its coefficient (approximate through divisions),
// whether it depends on it at all, and whether that dependence is non-affine.
struct Dependence {
  double coeff = 0;
  bool depends = false;
  bool nonaffine = false;
};

// What one store reads and writes, and what it computes, at the point of the store.
struct Access {
  const VariableNode *buffer = nullptr;
  DataType dtype;
  int lanes = 1;
  bool write = false;
  Expr index;
};

struct Arith {
  double fadd = 0, fmul = 0, ffma = 0, fdiv = 0, fminmax = 0, int_ops = 0, special = 0, compare = 0, select = 0,
         cast = 0;
};

// Counts the operations of one evaluation of an expression, by lanes.
void count_ops(const Expr &e, Arith *a) {
  post_order_visit(e, [&](const IRNode *n) {
    if (n->node_type >= NodeType::LetStmt) return;
    const auto *x = static_cast<const BaseExprNode *>(n);
    const double lanes = x->type.lanes();
    const bool is_float = x->type.is_float();
    switch (n->node_type) {
      case NodeType::Add:
      case NodeType::Sub: {
        if (!is_float) {
          a->int_ops += lanes;
          break;
        }
        const auto *b = static_cast<const AddNode *>(n);  // Add and Sub share the layout
        const bool fused = b->a.node_type() == NodeType::Mul || b->b.node_type() == NodeType::Mul;
        if (fused) {
          a->ffma += lanes;
          a->fmul -= lanes;  // the multiplication was counted on its own; it is part of the fma
        } else {
          a->fadd += lanes;
        }
        break;
      }
      case NodeType::Mul:
        (is_float ? a->fmul : a->int_ops) += lanes;
        break;
      case NodeType::Div:
        (is_float ? a->fdiv : a->int_ops) += lanes;
        break;
      case NodeType::Mod:
      case NodeType::FloorDiv:
      case NodeType::FloorMod:
        a->int_ops += lanes;
        break;
      case NodeType::Min:
      case NodeType::Max:
        (is_float ? a->fminmax : a->int_ops) += lanes;
        break;
      case NodeType::EQ:
      case NodeType::NE:
      case NodeType::LT:
      case NodeType::LE:
      case NodeType::GT:
      case NodeType::GE:
      case NodeType::And:
      case NodeType::Or:
      case NodeType::Not:
        a->compare += lanes;
        break;
      case NodeType::Select:
        a->select += lanes;
        break;
      case NodeType::Cast:
        a->cast += lanes;
        break;
      case NodeType::Call:
        if (static_cast<const CallNode *>(n)->kind == CallNode::Kind::PureIntrinsic) a->special += lanes;
        break;
      default:
        break;
    }
  });
  a->fmul = std::max(0.0, a->fmul);
}

class Walker : public IRVisitor {
 public:
  explicit Walker(size_t store_slots) : store_slots_(store_slots) {}

  struct StoreFeatures {
    double work = 0;
    size_t order = 0;
    std::vector<float> values;
  };
  std::vector<StoreFeatures> stores;
  // Program summaries.
  double loops = 0, total_iterations = 0, total_float_ops = 0, total_bytes = 0;
  double prefetches = 0;                                          // software prefetches executed (dynamic count)
  double alloc_count[3] = {0, 0, 0}, alloc_bytes[3] = {0, 0, 0};  // global, shared, local

  void visit(const ForNode *op) override {
    ++loops;
    visit_expr(op->min);
    visit_expr(op->extent);
    push_loop(op->loop_var, op->min, op->extent, annotation_of(op->kind, op->thread_tag));
    visit_stmt(op->body);
    pop_loop(op->loop_var);
  }

  void visit(const AttrStmtNode *op) override {
    if ((op->key == attr::kThreadExtent || op->key == attr::kVirtualThread) && op->node.defined() &&
        op->node.node_type() == NodeType::Variable) {
      ++loops;
      const Var v(op->node);
      const Annotation a = op->key == attr::kVirtualThread       ? kVThread
                           : v.name().rfind("blockIdx", 0) == 0  ? kBlockIdx
                           : v.name().rfind("threadIdx", 0) == 0 ? kThreadIdx
                                                                 : kVThread;
      push_loop(v, Expr(0), op->value, a);
      visit_stmt(op->body);
      pop_loop(v);
      return;
    }
    if (op->key == attr::kAutoUnrollMaxStep) {
      const int64_t saved = auto_unroll_;
      auto_unroll_ = ir::as_const_int(op->value).value_or(0);
      IRVisitor::visit(op);
      auto_unroll_ = saved;
      return;
    }
    IRVisitor::visit(op);
  }

  void visit(const LetStmtNode *op) override {
    visit_expr(op->value);
    lets_[op->var.get()] = op->value;
    if (op->var.type().is_int()) analyzer_.bind(op->var, op->value);
    visit_stmt(op->body);
    lets_.erase(op->var.get());
  }

  void visit(const IfThenElseNode *op) override {
    visit_expr(op->condition);
    ++conditions_;
    visit_stmt(op->then_case);
    if (op->else_case.defined()) visit_stmt(op->else_case);
    --conditions_;
  }

  void visit(const AllocateNode *op) override {
    double elems = 1;
    for (const Expr &e : op->extents) elems *= static_cast<double>(upper(e));
    const int slot = op->scope == "shared" ? 1 : op->scope.rfind("local", 0) == 0 ? 2 : 0;
    alloc_count[slot] += 1;
    alloc_bytes[slot] += elems * op->dtype.bytes() * op->dtype.lanes();
    scopes_[op->buffer_var.get()] = slot;
    IRVisitor::visit(op);
  }

  void visit(const EvaluateNode *op) override {
    if (ir::is_prefetch(op->value)) {
      double iterations = 1;
      for (const Loop &l : loops_) iterations *= static_cast<double>(l.extent);
      prefetches += iterations;
    }
    IRVisitor::visit(op);
  }

  void visit(const StoreNode *op) override {
    std::vector<Access> accesses;
    accesses.push_back({op->buffer_var.get(), op->value.type(), op->value.type().lanes(), true, op->index});
    post_order_visit(op->value, [&](const IRNode *n) {
      if (n->node_type != NodeType::Load) return;
      const auto *l = static_cast<const LoadNode *>(n);
      accesses.push_back({l->buffer_var.get(), l->type, l->type.lanes(), false, l->index});
    });
    Arith arith;
    count_ops(op->value, &arith);
    Arith index_arith;
    count_ops(op->index, &index_arith);
    arith.int_ops += index_arith.int_ops;
    record_store(accesses, arith);
  }

 private:
  void push_loop(const Var &v, const Expr &min, const Expr &extent, Annotation a) {
    Loop l;
    l.var = v.get();
    l.extent = std::max<int64_t>(1, upper(extent));
    l.annotation = a;
    loops_.push_back(l);
    if (v.type().is_int()) analyzer_.bind(v, Range(min, extent));
  }
  void pop_loop(const Var &v) {
    loops_.pop_back();
    if (v.type().is_int()) analyzer_.unbind(v);
  }

  // The largest value of an integer expression in this context (1 when unbounded).
  int64_t upper(const Expr &e) {
    if (auto c = ir::as_const_int(e)) return *c;
    const arith::ConstIntBound b = analyzer_.const_int_bound(e);
    if (b.max_value == arith::ConstIntBound::kPosInf || b.max_value > (int64_t{1} << 40)) return 1;
    return b.max_value;
  }

  Dependence dependence(const Expr &e, const VariableNode *v, int depth = 0) const {
    Dependence d;
    if (!e.defined() || depth > 64) return d;
    switch (e.node_type()) {
      case NodeType::Variable: {
        const auto *x = e.as<VariableNode>();
        if (x == v) return {1, true, false};
        auto it = lets_.find(x);
        if (it != lets_.end()) return dependence(it->second, v, depth + 1);
        return d;
      }
      case NodeType::Add:
      case NodeType::Sub: {
        const auto *b = static_cast<const AddNode *>(e.get());
        Dependence l = dependence(b->a, v, depth + 1), r = dependence(b->b, v, depth + 1);
        const double sign = e.node_type() == NodeType::Sub ? -1 : 1;
        return {l.coeff + sign * r.coeff, l.depends || r.depends, l.nonaffine || r.nonaffine};
      }
      case NodeType::Mul: {
        const auto *b = e.as<MulNode>();
        Dependence l = dependence(b->a, v, depth + 1), r = dependence(b->b, v, depth + 1);
        if (auto c = ir::as_const_int(b->b)) return {l.coeff * static_cast<double>(*c), l.depends, l.nonaffine};
        if (auto c = ir::as_const_int(b->a)) return {r.coeff * static_cast<double>(*c), r.depends, r.nonaffine};
        return {l.coeff + r.coeff, l.depends || r.depends, l.depends || r.depends};
      }
      case NodeType::Div:
      case NodeType::FloorDiv: {
        const auto *b = static_cast<const DivNode *>(e.get());
        Dependence l = dependence(b->a, v, depth + 1);
        const auto c = ir::as_const_int(b->b);
        const double divisor = c && *c != 0 ? static_cast<double>(*c) : 1.0;
        return {l.coeff / divisor, l.depends, l.depends};
      }
      case NodeType::Mod:
      case NodeType::FloorMod: {
        const auto *b = static_cast<const ModNode *>(e.get());
        Dependence l = dependence(b->a, v, depth + 1);
        return {l.coeff, l.depends, l.depends};
      }
      case NodeType::Ramp: {
        const auto *r = e.as<RampNode>();
        return dependence(r->base, v, depth + 1);
      }
      case NodeType::Broadcast:
        return dependence(e.as<BroadcastNode>()->value, v, depth + 1);
      case NodeType::Cast:
        return dependence(e.as<CastNode>()->value, v, depth + 1);
      default: {
        // Anything else (min, max, select, a load): depends when the variable appears in it.
        bool uses = false;
        post_order_visit(e, [&](const IRNode *n) {
          if (n->node_type != NodeType::Variable) return;
          const auto *x = static_cast<const VariableNode *>(n);
          if (x == v) uses = true;
          auto it = lets_.find(x);
          if (!uses && it != lets_.end()) uses = dependence(it->second, v, depth + 1).depends;
        });
        return {0, uses, uses};
      }
    }
  }

  static bool has_load(const Expr &e) {
    bool found = false;
    post_order_visit(e, [&](const IRNode *n) { found = found || n->node_type == NodeType::Load; });
    return found;
  }

  void record_store(const std::vector<Access> &accesses, const Arith &arith) {
    const size_t depth = loops_.size();
    double iterations = 1, parallel = 1, unrolled = 1;
    int lanes = accesses.front().lanes;
    for (const Loop &l : loops_) {
      iterations *= static_cast<double>(l.extent);
      if (l.annotation == kParallel || l.annotation == kBlockIdx || l.annotation == kThreadIdx) {
        parallel *= static_cast<double>(l.extent);
      }
      if (l.annotation == kUnrolled) unrolled *= static_cast<double>(l.extent);
      if (l.annotation == kVectorized) lanes = std::max<int>(lanes, static_cast<int>(l.extent));
    }

    std::vector<float> f;
    f.reserve(IrFeatureExtractor::kStoreFeatures);
    // The loop nest, innermost first.
    for (size_t s = 0; s < IrFeatureExtractor::kLoopSlots; ++s) {
      if (s < depth) {
        const Loop &l = loops_[depth - 1 - s];
        f.push_back(1);
        f.push_back(lg(static_cast<double>(l.extent)));
        for (int a = 0; a < kAnnotations; ++a) f.push_back(l.annotation == a ? 1.f : 0.f);
        f.push_back(static_cast<float>(depth - 1 - s));
      } else {
        f.insert(f.end(), IrFeatureExtractor::kLoopFeatures, 0.f);
      }
    }
    // The nest's summary.
    f.push_back(lg(iterations));
    f.push_back(lg(parallel));
    f.push_back(lg(iterations / parallel));
    f.push_back(lg(lanes));
    f.push_back(lg(unrolled));
    f.push_back(lg(static_cast<double>(auto_unroll_)));
    f.push_back(static_cast<float>(conditions_));
    f.push_back(static_cast<float>(depth));
    // Arithmetic, executed counts.
    for (double per : {arith.fadd, arith.fmul, arith.ffma, arith.fdiv, arith.fminmax, arith.int_ops, arith.special,
                       arith.compare, arith.select, arith.cast}) {
      f.push_back(lg(per * iterations));
    }

    // Buffers: accesses merged per buffer, the stored one first, then by bytes accessed.
    struct Buf {
      const Access *first = nullptr;
      bool read = false, write = false;
      double count = 0;  // accesses per iteration
      std::vector<float> values;
      double bytes = 0;
    };
    std::vector<Buf> bufs;
    std::map<const VariableNode *, size_t> slot_of;
    for (const Access &a : accesses) {
      auto [it, fresh] = slot_of.emplace(a.buffer, bufs.size());
      if (fresh) {
        Buf b;
        b.first = &a;
        bufs.push_back(b);
      }
      Buf &b = bufs[it->second];
      (a.write ? b.write : b.read) = true;
      b.count += 1;
    }
    for (Buf &b : bufs) {
      const Access &a = *b.first;
      const double elem = static_cast<double>(a.dtype.bytes());
      b.bytes = b.count * iterations * elem * a.lanes;
      std::vector<Dependence> deps(depth);
      for (size_t i = 0; i < depth; ++i) deps[i] = dependence(a.index, loops_[i].var);
      // Footprint of the innermost k loops: the span of the index over them, at most their
      // iteration count, in bytes (vector lanes included).
      std::vector<double> footprint(IrFeatureExtractor::kLoopSlots, 0);
      double span = 1, count = 1;
      for (size_t k = 0; k < IrFeatureExtractor::kLoopSlots; ++k) {
        if (k < depth) {
          const Loop &l = loops_[depth - 1 - k];
          const Dependence &d = deps[depth - 1 - k];
          if (d.depends) {
            span += std::fabs(d.coeff) * static_cast<double>(l.extent - 1);
            count *= static_cast<double>(l.extent);
          }
        }
        footprint[k] = std::min(span, count) * elem * a.lanes;
      }
      double stride_inner = 0, stride_nonzero = 0;
      if (depth > 0) stride_inner = std::fabs(deps[depth - 1].coeff);
      for (size_t i = depth; i-- > 0;) {
        if (deps[i].depends) {
          stride_nonzero = std::fabs(deps[i].coeff);
          break;
        }
      }
      double reuse_count = 0, reuse_iters = 0, reuse_bytes = 0;
      double inner_iters = 1;
      for (size_t i = depth; i-- > 0;) {
        if (!deps[i].depends && loops_[i].extent > 1) {
          reuse_count = static_cast<double>(loops_[i].extent);
          reuse_iters = inner_iters;
          reuse_bytes = footprint[std::min(depth - 1 - i, IrFeatureExtractor::kLoopSlots - 1)];
          if (depth - 1 - i == 0) reuse_bytes = elem * a.lanes;
          break;
        }
        inner_iters *= static_cast<double>(loops_[i].extent);
      }
      bool nonaffine = false;
      for (const Dependence &d : deps) nonaffine = nonaffine || d.nonaffine;
      bool unit_vector = a.lanes > 1;
      if (const auto *r = a.index.as<RampNode>()) unit_vector = ir::as_const_int(r->stride).value_or(0) == 1;
      for (size_t i = 0; i < depth; ++i) {
        if (loops_[i].annotation == kVectorized) unit_vector = std::fabs(deps[i].coeff) == 1.0;
      }
      auto sc = scopes_.find(a.buffer);
      const int scope = sc == scopes_.end() ? 0 : sc->second;

      b.values = {1,
                  b.read ? 1.f : 0.f,
                  b.write ? 1.f : 0.f,
                  lg(b.bytes),
                  lg(footprint.back()),
                  lg(stride_inner),
                  lg(stride_nonzero),
                  lg(reuse_count),
                  lg(reuse_iters),
                  lg(reuse_bytes),
                  has_load(a.index) ? 1.f : 0.f,
                  nonaffine ? 1.f : 0.f,
                  unit_vector ? 1.f : 0.f,
                  scope == 2 ? 1.f : 0.f,
                  scope == 1 ? 1.f : 0.f};
      for (double fp : footprint) b.values.push_back(lg(fp));
    }
    std::stable_sort(bufs.begin() + 1, bufs.end(), [](const Buf &x, const Buf &y) { return x.bytes > y.bytes; });
    double bytes = 0;
    for (size_t s = 0; s < IrFeatureExtractor::kBufferSlots; ++s) {
      if (s < bufs.size()) {
        f.insert(f.end(), bufs[s].values.begin(), bufs[s].values.end());
      } else {
        f.insert(f.end(), IrFeatureExtractor::kBufferFeatures, 0.f);
      }
    }
    for (const Buf &b : bufs) bytes += b.bytes;

    total_iterations += iterations;
    total_float_ops +=
        (arith.fadd + arith.fmul + 2 * arith.ffma + arith.fdiv + arith.fminmax + arith.special) * iterations;
    total_bytes += bytes;
    stores.push_back({iterations * lanes, stores.size(), std::move(f)});
  }

  size_t store_slots_;
  std::vector<Loop> loops_;
  std::unordered_map<const VariableNode *, Expr> lets_;
  std::unordered_map<const VariableNode *, int> scopes_;
  arith::Analyzer analyzer_;
  int64_t auto_unroll_ = 0;
  int conditions_ = 0;
};

lower::LowerOptions feature_lowering() {
  lower::LowerOptions o;
  o.debug = false;
  o.partition_loops = false;
  o.unroll = false;
  o.vectorize = false;
  o.reuse_storage = false;
  return o;
}

}  // namespace

std::vector<std::string> IrFeatureExtractor::names() {
  static const char *kAnnotationNames[] = {"serial",   "parallel",  "vectorized", "unrolled",
                                           "blockIdx", "threadIdx", "vthread"};
  static const char *kNest[] = {"iterations", "parallel_extent", "work_per_task", "vector_lanes",
                                "unrolled",   "auto_unroll",     "conditions",    "depth"};
  static const char *kArith[] = {"float_add", "float_mul", "float_fma", "float_div", "float_minmax",
                                 "int_ops",   "special",   "compare",   "select",    "cast"};
  static const char *kBuffer[] = {"present", "read",           "written",     "bytes",       "unique_bytes",
                                  "stride",  "stride_nonzero", "reuse_count", "reuse_iters", "reuse_bytes",
                                  "gather",  "nonaffine",      "unit_vector", "local",       "shared"};
  static const char *kProgram[] = {"stores",       "loops",
                                   "alloc_global", "alloc_global_bytes",
                                   "alloc_shared", "alloc_shared_bytes",
                                   "alloc_local",  "alloc_local_bytes",
                                   "flop",         "arg_bytes",
                                   "iterations",   "float_ops",
                                   "bytes",        "flop_per_byte",
                                   "params",       "prefetches"};
  std::vector<std::string> n;
  for (size_t s = 0; s < kStoreSlots; ++s) {
    const std::string st = "store" + std::to_string(s) + ".";
    for (size_t l = 0; l < kLoopSlots; ++l) {
      const std::string lp = st + "loop" + std::to_string(l) + ".";
      n.push_back(lp + "present");
      n.push_back(lp + "extent");
      for (const char *a : kAnnotationNames) n.push_back(lp + a);
      n.push_back(lp + "depth");
    }
    for (const char *x : kNest) n.push_back(st + x);
    for (const char *x : kArith) n.push_back(st + x);
    for (size_t b = 0; b < kBufferSlots; ++b) {
      const std::string bp = st + "buf" + std::to_string(b) + ".";
      for (const char *x : kBuffer) n.push_back(bp + x);
      for (size_t l = 0; l < kLoopSlots; ++l) n.push_back(bp + "footprint" + std::to_string(l));
    }
  }
  for (const char *x : kProgram) n.push_back(std::string("program.") + x);
  return n;
}

std::string IrFeatureExtractor::describe(const std::vector<float> &features) {
  const std::vector<std::string> n = names();
  std::string out;
  for (size_t i = 0; i < features.size() && i < n.size(); ++i) {
    if (features[i] != 0) out += n[i] + "=" + std::to_string(features[i]) + "\n";
  }
  return out;
}

std::vector<float> IrFeatureExtractor::extract(const ops::Task &task, const autotune::Config &config) const {
  return extract_lowered(task.lower(config, "", feature_lowering()), task.flop());
}

std::vector<float> IrFeatureExtractor::extract_lowered(const ir::LoweredFunc &func, double flop) const {
  Walker w(kStoreSlots);
  w.visit_stmt(func.body);
  std::stable_sort(w.stores.begin(), w.stores.end(),
                   [](const Walker::StoreFeatures &a, const Walker::StoreFeatures &b) { return a.work > b.work; });
  std::vector<float> out;
  out.reserve(kLength);
  for (size_t s = 0; s < kStoreSlots; ++s) {
    if (s < w.stores.size()) {
      out.insert(out.end(), w.stores[s].values.begin(), w.stores[s].values.end());
    } else {
      out.insert(out.end(), kStoreFeatures, 0.f);
    }
  }
  double arg_bytes = 0;
  for (const ir::Buffer &b : func.params) {
    double elems = 1;
    for (const Expr &e : b.shape) elems *= static_cast<double>(ir::as_const_int(e).value_or(1));
    arg_bytes += elems * b.dtype.bytes() * b.dtype.lanes();
  }
  const float program[kProgramFeatures] = {
      lg(static_cast<double>(w.stores.size())),
      lg(w.loops),
      lg(w.alloc_count[0]),
      lg(w.alloc_bytes[0]),
      lg(w.alloc_count[1]),
      lg(w.alloc_bytes[1]),
      lg(w.alloc_count[2]),
      lg(w.alloc_bytes[2]),
      lg(flop),
      lg(arg_bytes),
      lg(w.total_iterations),
      lg(w.total_float_ops),
      lg(w.total_bytes),
      lg(w.total_bytes > 0 ? flop / w.total_bytes * 1024 : 0),
      static_cast<float>(func.params.size()),
      lg(w.prefetches),
  };
  out.insert(out.end(), program, program + kProgramFeatures);
  KILN_CHECK(out.size() == kLength, "IR features: ", out.size(), " values, expected ", kLength);
  return out;
}

FeatureSpec KnobFeatureExtractor::spec(const ops::Task &task) const {
  size_t n = 0;
  for (const autotune::Knob &k : task.space().knobs()) {
    switch (k.kind) {
      case autotune::KnobKind::Split:
      case autotune::KnobKind::Reorder:
      case autotune::KnobKind::Annotate:
        n += k.entities.empty() || !k.entities.front().is_array() ? 0 : k.entities.front().as_array().size();
        break;
      case autotune::KnobKind::Choice:
        n += 1;
        break;
    }
  }
  return {"knob", kVersion, n};
}

std::vector<float> KnobFeatureExtractor::extract(const ops::Task &task, const autotune::Config &config) const {
  task.space().check(config);
  std::vector<float> out;
  for (const autotune::Knob &k : task.space().knobs()) {
    const Json &v = config.value(k.name);
    switch (k.kind) {
      case autotune::KnobKind::Split:
        for (const Json &x : v.as_array()) out.push_back(lg(static_cast<double>(x.as_int())));
        break;
      case autotune::KnobKind::Reorder:
        for (const Json &x : v.as_array()) out.push_back(static_cast<float>(x.as_int()));
        break;
      case autotune::KnobKind::Annotate: {
        const std::vector<autotune::Annotation> a = config.annotate(k.name);
        for (autotune::Annotation x : a) out.push_back(static_cast<float>(static_cast<int>(x)));
        break;
      }
      case autotune::KnobKind::Choice:
        if (v.is_number()) {
          out.push_back(static_cast<float>(v.as_double()));
        } else {
          out.push_back(static_cast<float>(k.find(v)));
        }
        break;
    }
  }
  return out;
}

FeatureBatch extract_features(const FeatureExtractor &extractor, const ops::Task &task,
                              const std::vector<autotune::Config> &configs, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  FeatureBatch batch;
  batch.spec = extractor.spec(task);
  const size_t len = batch.spec.length;
  batch.features.assign(configs.size() * len, std::nanf(""));
  batch.errors.assign(configs.size(), std::string());
  const auto *ir = dynamic_cast<const IrFeatureExtractor *>(&extractor);

  size_t workers = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  workers = std::max<size_t>(1, std::min(workers, configs.size()));
  std::atomic<size_t> next{0};
  std::vector<double> lower_s(workers, 0), extract_s(workers, 0);
  std::vector<std::map<std::string, double>> pass_s(workers);
  auto work = [&](size_t w) {
    for (size_t i = next++; i < configs.size(); i = next++) {
      try {
        std::vector<float> row;
        if (ir) {
          auto t = std::chrono::steady_clock::now();
          lower::LowerOptions options = feature_lowering();
          options.pass_seconds = &pass_s[w];
          const ir::LoweredFunc f = task.lower(configs[i], "", options);
          lower_s[w] += seconds_since(t);
          t = std::chrono::steady_clock::now();
          row = ir->extract_lowered(f, task.flop());
          extract_s[w] += seconds_since(t);
        } else {
          auto t = std::chrono::steady_clock::now();
          row = extractor.extract(task, configs[i]);
          extract_s[w] += seconds_since(t);
        }
        KILN_CHECK(row.size() == len, "feature row of ", row.size(), " values, expected ", len);
        std::copy(row.begin(), row.end(), batch.features.begin() + static_cast<std::ptrdiff_t>(i * len));
      } catch (const UserError &e) {
        batch.errors[i] = e.what();
        if (batch.errors[i].empty()) batch.errors[i] = "the candidate could not be built";
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread &t : pool) t.join();
  for (size_t w = 0; w < workers; ++w) {
    batch.lower_seconds += lower_s[w];
    batch.extract_seconds += extract_s[w];
    for (const auto &[pass, seconds] : pass_s[w]) batch.lower_pass_seconds[pass] += seconds;
  }
  batch.wall_seconds = seconds_since(t0);
  return batch;
}

}  // namespace kiln::cost_model
