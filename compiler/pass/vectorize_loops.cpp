#include <climits>
#include <unordered_map>

#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"
#include "compiler/pass/passes.h"

namespace kiln::pass {

namespace {

using namespace ir;

// Thrown while widening a loop body that cannot be vectorized; the loop then becomes serial.
struct Scalarize {};

// The widest vector the pass makes; longer vectorized loops become loops over vectors.
constexpr int64_t kMaxLanes = 64;

bool uses_var(const Expr &e, const VariableNode *v) {
  bool found = false;
  post_order_visit(e, [&](const IRNode *n) { found = found || n == v; });
  return found;
}

// Whether running the body for all lanes at once, statement by statement, computes what the
// serial loop computes: only nodes the widening handles, no vectors yet, and every buffer written
// in the body is accessed at one index, which depends on the loop variable.
bool can_vectorize(const Stmt &body, const VariableNode *loop_var) {
  bool ok = true;
  std::unordered_map<const VariableNode *, std::vector<Expr>> stores, loads;
  post_order_visit(body, [&](const IRNode *n) {
    switch (n->node_type) {
      case NodeType::For:
      case NodeType::Allocate:
      case NodeType::AttrStmt:
      case NodeType::AssertStmt:
      case NodeType::ProducerStore:
      case NodeType::ProducerRealize:
      case NodeType::ProducerLoad:
      case NodeType::Reduce:
      case NodeType::Ramp:
      case NodeType::Broadcast:
        ok = false;
        break;
      case NodeType::Store: {
        const auto *s = static_cast<const StoreNode *>(n);
        stores[s->buffer_var.get()].push_back(s->index);
        break;
      }
      case NodeType::Load: {
        const auto *l = static_cast<const LoadNode *>(n);
        loads[l->buffer_var.get()].push_back(l->index);
        break;
      }
      case NodeType::Call:
        if (static_cast<const CallNode *>(n)->name == intrinsic::kSyncThreads) ok = false;
        break;
      // Widened lane by lane (immediates and variables stay scalars until they meet a vector).
      case NodeType::IntImm:
      case NodeType::FloatImm:
      case NodeType::StringImm:
      case NodeType::Variable:
      case NodeType::Cast:
#define KILN_BINARY_CASE(k) case NodeType::k:
        KILN_BINARY_NODES(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
      case NodeType::Not:
      case NodeType::Select:
      case NodeType::Let:
      case NodeType::LetStmt:
      case NodeType::IfThenElse:
      case NodeType::Block:
      case NodeType::Evaluate:
        break;
    }
    // Expression kinds come first in NodeType; no vector may be there before widening.
    if (n->node_type <= NodeType::Reduce && static_cast<const BaseExprNode *>(n)->type.is_vector()) ok = false;
  });
  if (!ok) return false;
  for (const auto &[buf, indices] : stores) {
    const Expr &first = indices.front();
    if (!uses_var(first, loop_var)) return false;
    for (const auto &i : indices) {
      if (!structural_equal(i, first)) return false;
    }
    auto it = loads.find(buf);
    if (it == loads.end()) continue;
    for (const auto &i : it->second) {
      if (!structural_equal(i, first)) return false;
    }
  }
  return true;
}

// Integer arithmetic that folds constants, for the bases and strides of ramps.
Expr fold_add(const Expr &a, const Expr &b) {
  if (is_zero(b)) return a;
  if (is_zero(a)) return b;
  auto x = as_const_int(a), y = as_const_int(b);
  return x && y ? make_const(a.type(), *x + *y) : a + b;
}
Expr fold_sub(const Expr &a, const Expr &b) {
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y) return make_const(a.type(), *x - *y);
  return is_zero(b) ? a : a - b;
}
Expr fold_mul(const Expr &a, const Expr &b) {
  auto x = as_const_int(a), y = as_const_int(b);
  if (x && y) return make_const(a.type(), *x * *y);
  if (is_zero(a) || is_zero(b)) return make_zero(a.type());
  if (is_one(a)) return b;
  return is_one(b) ? a : a * b;
}

// A scalar expression or the scalar a broadcast repeats; undefined otherwise.
Expr scalar_of(const Expr &e) {
  if (e.type().is_scalar()) return e;
  if (const auto *b = e.as<BroadcastNode>()) return b->value;
  return Expr();
}

// Integer division whose divisor may be zero on a lane the scalar loop would not have run.
bool has_unsafe_division(const Expr &e) {
  bool found = false;
  post_order_visit(e, [&](const IRNode *n) {
    const Expr *divisor = nullptr;
    if (n->node_type == NodeType::Div) divisor = &static_cast<const DivNode *>(n)->b;
    if (n->node_type == NodeType::Mod) divisor = &static_cast<const ModNode *>(n)->b;
    if (n->node_type == NodeType::FloorDiv) divisor = &static_cast<const FloorDivNode *>(n)->b;
    if (n->node_type == NodeType::FloorMod) divisor = &static_cast<const FloorModNode *>(n)->b;
    if (divisor && divisor->type().is_integer_like()) {
      auto c = as_const_int(*divisor);
      found = found || !c || *c == 0;
    }
  });
  return found;
}

Expr strip_likely(const Expr &cond) {
  return ir_transform(cond, [](const Expr &e) {
    const auto *c = e.as<CallNode>();
    return c && c->name == intrinsic::kLikely ? c->args[0] : Expr();
  });
}

// Rewrites a loop body for all lanes at once: the loop variable becomes a ramp and every value
// that depends on it a vector. Inside an if whose condition differs between lanes, stores and
// loads run only on the lanes where it holds (pred_).
class Widen : public IRMutator {
 public:
  Widen(const VariableNode *var, Expr ramp, int lanes) : lanes_(lanes) { subst_[var] = std::move(ramp); }

 protected:
  using IRMutator::visit;

  Expr bcast(const Expr &e) const {
    if (e.type().lanes() == lanes_) return e;
    if (e.type().is_vector()) throw Scalarize();
    return BroadcastNode::make(e, lanes_);
  }

  template <typename T>
  Expr binary(const T *op, const Expr &self) {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return T::make(bcast(a), bcast(b));
  }

  Expr visit(const VariableNode *op, const Expr &self) override {
    auto it = subst_.find(op);
    return it == subst_.end() ? self : it->second;
  }
  Expr visit(const CastNode *op, const Expr &self) override {
    Expr v = mutate(op->value);
    if (v.same_as(op->value)) return self;
    return CastNode::make(op->type.with_lanes(v.type().lanes()), v);
  }
  // Ramps stay ramps under + - * with scalars, so that indices remain dense.
  Expr visit(const AddNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    const auto *ra = a.as<RampNode>(), *rb = b.as<RampNode>();
    if (op->type.is_integer_like()) {
      if (ra && rb) return RampNode::make(fold_add(ra->base, rb->base), fold_add(ra->stride, rb->stride), lanes_);
      if (ra && scalar_of(b).defined()) return RampNode::make(fold_add(ra->base, scalar_of(b)), ra->stride, lanes_);
      if (rb && scalar_of(a).defined()) return RampNode::make(fold_add(scalar_of(a), rb->base), rb->stride, lanes_);
    }
    return AddNode::make(bcast(a), bcast(b));
  }
  Expr visit(const SubNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    const auto *ra = a.as<RampNode>(), *rb = b.as<RampNode>();
    if (op->type.is_integer_like()) {
      if (ra && rb) return RampNode::make(fold_sub(ra->base, rb->base), fold_sub(ra->stride, rb->stride), lanes_);
      if (ra && scalar_of(b).defined()) return RampNode::make(fold_sub(ra->base, scalar_of(b)), ra->stride, lanes_);
      if (rb && scalar_of(a).defined()) {
        return RampNode::make(fold_sub(scalar_of(a), rb->base), fold_sub(make_zero(rb->stride.type()), rb->stride),
                              lanes_);
      }
    }
    return SubNode::make(bcast(a), bcast(b));
  }
  Expr visit(const MulNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    const auto *ra = a.as<RampNode>(), *rb = b.as<RampNode>();
    if (op->type.is_integer_like()) {
      if (ra && scalar_of(b).defined()) {
        return RampNode::make(fold_mul(ra->base, scalar_of(b)), fold_mul(ra->stride, scalar_of(b)), lanes_);
      }
      if (rb && scalar_of(a).defined()) {
        return RampNode::make(fold_mul(scalar_of(a), rb->base), fold_mul(scalar_of(a), rb->stride), lanes_);
      }
    }
    return MulNode::make(bcast(a), bcast(b));
  }
#define KILN_WIDEN_BINARY(n) \
  Expr visit(const n##Node *op, const Expr &self) override { return binary(op, self); }
  KILN_WIDEN_BINARY(Div)
  KILN_WIDEN_BINARY(Mod)
  KILN_WIDEN_BINARY(FloorDiv)
  KILN_WIDEN_BINARY(FloorMod)
  KILN_WIDEN_BINARY(Min)
  KILN_WIDEN_BINARY(Max)
  KILN_WIDEN_BINARY(EQ)
  KILN_WIDEN_BINARY(NE)
  KILN_WIDEN_BINARY(LT)
  KILN_WIDEN_BINARY(LE)
  KILN_WIDEN_BINARY(GT)
  KILN_WIDEN_BINARY(GE)
  KILN_WIDEN_BINARY(And)
  KILN_WIDEN_BINARY(Or)
#undef KILN_WIDEN_BINARY
  Expr visit(const NotNode *op, const Expr &self) override {
    Expr a = mutate(op->a);
    return a.same_as(op->a) ? self : NotNode::make(a);
  }
  Expr visit(const SelectNode *op, const Expr &self) override {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
    return SelectNode::make(c, bcast(t), bcast(f));
  }
  Expr visit(const RampNode *, const Expr &) override { throw Scalarize(); }
  Expr visit(const BroadcastNode *, const Expr &) override { throw Scalarize(); }
  Expr visit(const ProducerLoadNode *, const Expr &) override { throw Scalarize(); }
  Expr visit(const ReduceNode *, const Expr &) override { throw Scalarize(); }
  Expr visit(const LetNode *op, const Expr &self) override {
    Expr value = mutate(op->value);
    if (value.type().is_vector()) {
      Var v = bind(op->var, value);
      Expr body = mutate(op->body);
      return v.defined() ? LetNode::make(v, value, body) : body;
    }
    Expr body = mutate(op->body);
    if (value.same_as(op->value) && body.same_as(op->body)) return self;
    return LetNode::make(op->var, value, body);
  }
  Expr visit(const CallNode *op, const Expr &self) override {
    if (op->name == intrinsic::kIfThenElse && op->args.size() == 3) return widen_if_then_else(op, self);
    std::vector<Expr> args;
    if (!mutate_exprs(op->args, &args)) {
      if (op->kind != CallNode::Kind::PureIntrinsic) throw Scalarize();
      return self;
    }
    if (op->name == intrinsic::kLikely) {
      DataType t = args[0].type();
      return CallNode::make(t, op->name, std::move(args), op->kind);
    }
    if (!is_math_intrinsic(op->name)) throw Scalarize();
    for (auto &a : args) a = bcast(a);
    return CallNode::make(op->type.with_lanes(lanes_), op->name, std::move(args), op->kind);
  }
  Expr visit(const LoadNode *op, const Expr &self) override {
    Expr index = mutate(op->index), pred = mutate(op->predicate);
    if (pred_.defined()) {
      // Even a lane-invariant load runs only where the scalar loop would have run it.
      pred = pred.defined() ? AndNode::make(bcast(pred), pred_) : pred_;
    } else if (index.same_as(op->index) && pred.same_as(op->predicate)) {
      return self;
    }
    return LoadNode::make(op->type.with_lanes(lanes_), op->buffer_var, bcast(index),
                          pred.defined() ? bcast(pred) : pred);
  }

  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Expr value = mutate(op->value), index = mutate(op->index), pred = mutate(op->predicate);
    if (!pred_.defined() && value.same_as(op->value) && index.same_as(op->index) && pred.same_as(op->predicate)) {
      return self;
    }
    // Distinct lanes must write distinct elements, as distinct iterations did.
    const auto *ramp = index.as<RampNode>();
    auto stride = ramp ? as_const_int(ramp->stride) : std::nullopt;
    if (!stride || *stride == 0) throw Scalarize();
    if (pred_.defined()) {
      if (has_unsafe_division(value) || has_unsafe_division(index)) throw Scalarize();
      pred = pred.defined() ? AndNode::make(bcast(pred), pred_) : pred_;
    }
    return StoreNode::make(op->buffer_var, bcast(value), index, pred.defined() ? bcast(pred) : pred);
  }
  Stmt visit(const LetStmtNode *op, const Stmt &self) override {
    Expr value = mutate(op->value);
    if (value.type().is_vector()) {
      Var v = bind(op->var, value);
      Stmt body = mutate(op->body);
      return v.defined() ? LetStmtNode::make(v, value, body) : body;
    }
    Stmt body = mutate(op->body);
    if (value.same_as(op->value) && body.same_as(op->body)) return self;
    return LetStmtNode::make(op->var, value, body);
  }
  Stmt visit(const IfThenElseNode *op, const Stmt &self) override {
    if (pred_.defined()) throw Scalarize();
    Expr c = mutate(op->condition);
    if (c.type().is_scalar()) return IRMutator::visit(op, self);
    // The condition differs between lanes: each store runs on the lanes where it holds.
    Expr p = strip_likely(c);
    Stmt then_case = predicated(op->then_case, p);
    Stmt else_case = op->else_case.defined() ? predicated(op->else_case, NotNode::make(p)) : Stmt();
    return BlockNode::make(then_case, else_case);
  }
  Stmt visit(const ForNode *, const Stmt &) override { throw Scalarize(); }
  Stmt visit(const AllocateNode *, const Stmt &) override { throw Scalarize(); }
  Stmt visit(const AttrStmtNode *, const Stmt &) override { throw Scalarize(); }
  Stmt visit(const AssertStmtNode *, const Stmt &) override { throw Scalarize(); }
  Stmt visit(const ProducerStoreNode *, const Stmt &) override { throw Scalarize(); }
  Stmt visit(const ProducerRealizeNode *, const Stmt &) override { throw Scalarize(); }

 private:
  // Makes uses of a let variable whose value became a vector refer to the vector value: ramps and
  // broadcasts are substituted, anything else gets a vector variable (returned).
  Var bind(const Var &var, const Expr &value) {
    if (value.as<RampNode>() || value.as<BroadcastNode>()) {
      subst_[var.get()] = value;
      return Var();
    }
    Var v(var.name(), value.type());
    subst_[var.get()] = v;
    return v;
  }

  template <typename T>
  T under(const Expr &pred, const T &node) {
    Expr saved = pred_;
    pred_ = saved.defined() ? AndNode::make(saved, pred) : pred;
    T r = mutate(node);
    pred_ = saved;
    return r;
  }

  // if_then_else evaluates only the taken side: once it is a vector, each side's loads are
  // restricted to the lanes that take it.
  Expr widen_if_then_else(const CallNode *op, const Expr &self) {
    Expr c = mutate(op->args[0]), t = mutate(op->args[1]), f = mutate(op->args[2]);
    if (!pred_.defined() && c.same_as(op->args[0]) && t.same_as(op->args[1]) && f.same_as(op->args[2])) {
      return self;
    }
    if (c.type().is_scalar() && t.type().is_scalar() && f.type().is_scalar()) {
      return CallNode::make(op->type, op->name, {c, t, f}, op->kind);
    }
    c = bcast(c);
    Expr p = strip_likely(c);
    t = bcast(under(p, op->args[1]));
    f = bcast(under(NotNode::make(p), op->args[2]));
    if (has_unsafe_division(t) || has_unsafe_division(f)) throw Scalarize();
    return CallNode::make(t.type(), op->name, {c, t, f}, op->kind);
  }

  // A statement made only of stores, each restricted to the lanes where pred holds.
  Stmt predicated(const Stmt &s, const Expr &pred) {
    std::vector<Stmt> stmts;
    if (const auto *b = s.as<BlockNode>())
      stmts = b->stmts;
    else
      stmts.push_back(s);
    for (auto &st : stmts) {
      if (is_nop(st)) continue;
      if (!st.as<StoreNode>()) throw Scalarize();
      st = under(pred, st);
    }
    return BlockNode::make(std::move(stmts));
  }

  std::unordered_map<const VariableNode *, Expr> subst_;
  int lanes_;
  Expr pred_;
};

class LoopVectorizer : public IRMutator {
 protected:
  using IRMutator::visit;

  Stmt visit(const ForNode *op, const Stmt &self) override {
    Stmt body = mutate(op->body);
    if (op->kind != ForKind::Vectorized) {
      if (body.same_as(op->body)) return self;
      return ForNode::make(op->loop_var, op->min, op->extent, op->kind, body, op->thread_tag);
    }
    auto extent = as_const_int(op->extent);
    if (extent && *extent > 1 && *extent <= INT_MAX && can_vectorize(body, op->loop_var.get())) {
      try {
        // Vectors have at most kMaxLanes lanes; a longer loop runs over chunks of lanes.
        int64_t lanes = *extent;
        if (lanes > kMaxLanes) {
          lanes = 0;
          for (int64_t l = kMaxLanes; l >= 2; l /= 2) {
            if (*extent % l == 0) {
              lanes = l;
              break;
            }
          }
        }
        if (lanes >= 2) {
          Expr min = cast(op->loop_var.type(), op->min);
          if (lanes == *extent) {
            Expr ramp = RampNode::make(min, make_one(min.type()), static_cast<int>(lanes));
            return Widen(op->loop_var.get(), ramp, static_cast<int>(lanes)).mutate(body);
          }
          Var chunk(op->loop_var.name() + ".chunk", op->loop_var.type());
          Expr base = min + chunk * make_const(chunk.type(), lanes);
          Expr ramp = RampNode::make(base, make_one(min.type()), static_cast<int>(lanes));
          Stmt vec = Widen(op->loop_var.get(), ramp, static_cast<int>(lanes)).mutate(body);
          return ForNode::make(chunk, make_zero(chunk.type()), make_const(chunk.type(), *extent / lanes),
                               ForKind::Serial, vec, op->thread_tag);
        }
      } catch (const Scalarize &) {
      }
    }
    return ForNode::make(op->loop_var, op->min, op->extent, ForKind::Serial, body, op->thread_tag);
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt &s) { return LoopVectorizer().mutate(s); }

}  // namespace kiln::pass
