// The rewrite simplifier: constant folding, identities, linear forms of integer arithmetic,
// division and modulo, min/max, comparison, logical and select rules, vector (ramp/broadcast)
// arithmetic and let inlining, using the variable bounds and facts of an AnalyzerState. It runs
// bottom-up and is repeated to a fixed point with an iteration cap; a rule that builds a new node
// re-simplifies it with a bounded recursion depth.
//
// Integer rules that move terms across a comparison or reason about division exactly assume that
// int32/int64 arithmetic does not overflow (as index arithmetic); narrower and unsigned types only
// get rules that are exact under wraparound (constant folding, ring rearrangement, bounds).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "compiler/arith/analyzer_state.h"
#include "compiler/arith/const_fold.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"

namespace kiln::arith::detail {

namespace {

using namespace ir;

constexpr int kMaxRewriteDepth = 6;
constexpr int kMaxIterations = 8;

bool is_int_arith(DataType t) { return t.is_integer_like() && !t.is_bool(); }

bool is_constant(const Expr &e) { return const_int(e).has_value() || as_const_float(e).has_value(); }

// Whether e is the constant v (integer or float, scalar or broadcast).
bool is_const_value(const Expr &e, int64_t v) {
  if (auto c = const_int(e)) return *c == v;
  if (auto f = as_const_float(e)) return *f == static_cast<double>(v);
  return false;
}

std::optional<bool> const_bool(const Expr &e) {
  if (!e.defined() || !e.type().is_bool()) return std::nullopt;
  auto c = const_int(e);
  if (!c) return std::nullopt;
  return *c != 0;
}

Expr make_bool(bool v, int lanes) { return v ? const_true(lanes) : const_false(lanes); }

Expr make_cmp(NodeType k, const Expr &a, const Expr &b) {
  switch (k) {
    case NodeType::LT:
      return LTNode::make(a, b);
    case NodeType::LE:
      return LENode::make(a, b);
    case NodeType::EQ:
      return EQNode::make(a, b);
    default:
      return NENode::make(a, b);  // k is LT, LE, EQ or NE
  }
}

Expr make_minmax(bool is_min, const Expr &a, const Expr &b) {
  return is_min ? MinNode::make(a, b) : MaxNode::make(a, b);
}

bool minmax_operands(const Expr &e, bool is_min, Expr *x, Expr *y) {
  if (is_min) {
    if (const auto *m = e.as<MinNode>()) {
      *x = m->a;
      *y = m->b;
      return true;
    }
  } else if (const auto *m = e.as<MaxNode>()) {
    *x = m->a;
    *y = m->b;
    return true;
  }
  return false;
}

Expr make_ramp(const Expr &base, const Expr &stride, int lanes) {
  if (is_const_value(stride, 0)) return BroadcastNode::make(base, lanes);
  return RampNode::make(base, stride, lanes);
}

int64_t gcd64(int64_t a, int64_t b) {
  uint64_t x = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  uint64_t y = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
  while (y != 0) {
    uint64_t r = x % y;
    x = y;
    y = r;
  }
  return x > static_cast<uint64_t>(INT64_MAX) ? 1 : static_cast<int64_t>(x);
}

// Greatest common divisor of c and every coefficient and the constant of f.
int64_t form_gcd(const LinearForm &f, int64_t c) {
  int64_t g = gcd64(c, f.constant);
  for (const auto &t : f.terms) g = gcd64(g, t.coeff);
  return g;
}

bool divisible(const LinearForm &f, int64_t c) {
  if (c == 0 || c == -1) return false;
  for (const auto &t : f.terms) {
    if (t.coeff % c != 0) return false;
  }
  return f.constant % c == 0;
}

// f / c where c divides every coefficient and the constant (c != 0, -1).
LinearForm divide_exact(const LinearForm &f, int64_t c) {
  LinearForm r(f.type);
  r.ok = f.ok;
  for (const auto &t : f.terms) r.terms.push_back(LinearTerm{t.atom, t.coeff / c});
  r.constant = f.constant / c;
  return r;
}

// Whether every value of `t` is also a value of `u`.
bool represents_all(DataType u, DataType t) {
  if (t.is_integer_like() && u.is_integer_like()) {
    if (t.is_bool()) return true;
    if (u.is_bool()) return false;
    if (t.is_int()) return u.is_int() && u.bits() >= t.bits();
    return u.is_int() ? u.bits() > t.bits() : u.bits() >= t.bits();
  }
  return t.is_float() && u.is_float() && u.bits() >= t.bits();
}

// The form q with cmp <=> q <= 0, for comparisons of overflow-free scalar integers.
std::optional<LinearForm> comparison_form(const Expr &cmp) {
  Expr a, b;
  int64_t shift = 0;
  if (const auto *op = cmp.as<LTNode>())
    a = op->a, b = op->b, shift = 1;
  else if (const auto *op = cmp.as<LENode>())
    a = op->a, b = op->b;
  else if (const auto *op = cmp.as<GTNode>())
    a = op->b, b = op->a, shift = 1;
  else if (const auto *op = cmp.as<GENode>())
    a = op->b, b = op->a;
  else
    return std::nullopt;
  if (!no_overflow_int(a.type()) || !a.type().is_scalar()) return std::nullopt;
  LinearForm q(a.type());
  collect_linear(a, 1, &q);
  collect_linear(b, -1, &q);
  merge_div_mod(&q);
  q.add_constant(shift);
  if (!q.ok) return std::nullopt;
  return q;
}

class RewriteSimplifier : public IRMutator {
 public:
  explicit RewriteSimplifier(AnalyzerState &st) : st_(st) {}
  using IRMutator::mutate;

  Expr mutate(const Expr &e) override {
    Expr r = IRMutator::mutate(e);
    if (!st_.bool_facts.empty() && r.defined() && r.type().is_bool() && !const_int(r)) {
      for (auto it = st_.bool_facts.rbegin(); it != st_.bool_facts.rend(); ++it) {
        if (structural_equal(it->cond, r)) return make_bool(it->value, r.type().lanes());
        if (const auto *n = r.as<NotNode>(); n && structural_equal(it->cond, n->a)) {
          return make_bool(!it->value, r.type().lanes());
        }
      }
    }
    return r;
  }

 protected:
  Expr visit(const VariableNode *op, const Expr &self) override {
    auto it = st_.vars.find(op);
    if (it == st_.vars.end()) return self;
    if (it->second.value.defined()) return it->second.value;
    const ConstIntBound &b = it->second.bound;
    if (op->type.is_integer_like() && op->type.is_scalar() && is_finite(b) && b.min_value == b.max_value) {
      return make_const(op->type, b.min_value);
    }
    return self;
  }

  Expr visit(const CastNode *op, const Expr &self) override {
    Expr v = mutate(op->value);
    const DataType t = op->type;
    if (v.type() == t) return v;
    if (Expr c = fold_cast(t, v); c.defined()) return c;
    if (const auto *b = v.as<BroadcastNode>()) {
      return BroadcastNode::make(again(CastNode::make(t.element_of(), b->value)), b->lanes);
    }
    if (const auto *inner = v.as<CastNode>()) {
      if (inner->value.type() == t && represents_all(inner->type, t)) return inner->value;
    }
    if (v.same_as(op->value)) return self;
    return CastNode::make(t, v);
  }

#define KILN_REWRITE_BINARY(n, rule)                                                 \
  Expr visit(const n##Node *op, const Expr &self) override {                         \
    Expr a = mutate(op->a), b = mutate(op->b);                                       \
    Expr orig = (a.same_as(op->a) && b.same_as(op->b)) ? self : n##Node::make(a, b); \
    return rule;                                                                     \
  }
  KILN_REWRITE_BINARY(Add, add_rule(a, b, orig))
  KILN_REWRITE_BINARY(Sub, sub_rule(a, b, orig))
  KILN_REWRITE_BINARY(Mul, mul_rule(a, b, orig))
  KILN_REWRITE_BINARY(Div, div_rule(a, b, orig))
  KILN_REWRITE_BINARY(Mod, mod_rule(a, b, orig))
  KILN_REWRITE_BINARY(FloorDiv, floordiv_rule(a, b, orig))
  KILN_REWRITE_BINARY(FloorMod, floormod_rule(a, b, orig))
  KILN_REWRITE_BINARY(Min, minmax_rule(true, a, b, orig))
  KILN_REWRITE_BINARY(Max, minmax_rule(false, a, b, orig))
  KILN_REWRITE_BINARY(EQ, compare_rule(NodeType::EQ, a, b, orig))
  KILN_REWRITE_BINARY(NE, compare_rule(NodeType::NE, a, b, orig))
  KILN_REWRITE_BINARY(LT, compare_rule(NodeType::LT, a, b, orig))
  KILN_REWRITE_BINARY(LE, compare_rule(NodeType::LE, a, b, orig))
  KILN_REWRITE_BINARY(GT, compare_rule(NodeType::LT, b, a, LTNode::make(b, a)))
  KILN_REWRITE_BINARY(GE, compare_rule(NodeType::LE, b, a, LENode::make(b, a)))
  KILN_REWRITE_BINARY(And, logic_rule(true, a, b, orig))
  KILN_REWRITE_BINARY(Or, logic_rule(false, a, b, orig))
#undef KILN_REWRITE_BINARY

  Expr visit(const NotNode *op, const Expr &self) override {
    Expr a = mutate(op->a);
    if (Expr c = fold_not(a); c.defined()) return c;
    if (const auto *b = a.as<BroadcastNode>()) return BroadcastNode::make(again(NotNode::make(b->value)), b->lanes);
    if (const auto *n = a.as<NotNode>()) return n->a;
    if (const auto *c = a.as<EQNode>()) return again(NENode::make(c->a, c->b));
    if (const auto *c = a.as<NENode>()) return again(EQNode::make(c->a, c->b));
    // Floats are left alone: with NaN, !(a < b) is not b <= a.
    if (const auto *c = a.as<LTNode>(); c && c->a.type().is_integer_like()) return again(LENode::make(c->b, c->a));
    if (const auto *c = a.as<LENode>(); c && c->a.type().is_integer_like()) return again(LTNode::make(c->b, c->a));
    if (const auto *c = a.as<GTNode>(); c && c->a.type().is_integer_like()) return again(LENode::make(c->a, c->b));
    if (const auto *c = a.as<GENode>(); c && c->a.type().is_integer_like()) return again(LTNode::make(c->a, c->b));
    if (const auto *c = a.as<AndNode>()) {
      return again(OrNode::make(again(NotNode::make(c->a)), again(NotNode::make(c->b))));
    }
    if (const auto *c = a.as<OrNode>()) {
      return again(AndNode::make(again(NotNode::make(c->a)), again(NotNode::make(c->b))));
    }
    return a.same_as(op->a) ? self : NotNode::make(a);
  }

  Expr visit(const SelectNode *op, const Expr &self) override {
    Expr c = mutate(op->condition), tv = mutate(op->true_value), fv = mutate(op->false_value);
    if (auto cc = const_bool(c)) return *cc ? tv : fv;
    if (structural_equal(tv, fv)) return tv;
    if (const auto *n = c.as<NotNode>()) return again(SelectNode::make(n->a, fv, tv));
    if (tv.type().is_bool() && c.type() == tv.type()) {
      auto ct = const_bool(tv), cf = const_bool(fv);
      if (ct && cf && *ct && !*cf) return c;
      if (ct && cf && !*ct && *cf) return again(NotNode::make(c));
    }
    const auto *bc = c.as<BroadcastNode>();
    const auto *bt = tv.as<BroadcastNode>();
    const auto *bf = fv.as<BroadcastNode>();
    if (bc && bt && bf) {
      return BroadcastNode::make(again(SelectNode::make(bc->value, bt->value, bf->value)), bt->lanes);
    }
    if (c.same_as(op->condition) && tv.same_as(op->true_value) && fv.same_as(op->false_value)) return self;
    return SelectNode::make(c, tv, fv);
  }

  Expr visit(const RampNode *op, const Expr &self) override {
    Expr base = mutate(op->base), stride = mutate(op->stride);
    if (is_const_value(stride, 0)) return BroadcastNode::make(base, op->lanes);
    if (base.same_as(op->base) && stride.same_as(op->stride)) return self;
    return RampNode::make(base, stride, op->lanes);
  }

  Expr visit(const LetNode *op, const Expr &self) override {
    Expr value = mutate(op->value);
    if (is_cheap(value) && value.type() == op->var.type()) {
      BindingScope scope(st_);
      scope.set(op->var, bound_of(st_, value), value);
      return mutate(op->body);
    }
    Expr body;
    {
      BindingScope scope(st_);
      scope.set(op->var, bound_of(st_, value));
      body = mutate(op->body);
    }
    if (!uses_var(body, op->var.get()) && !has_side_effect(value)) return body;
    if (value.same_as(op->value) && body.same_as(op->body)) return self;
    return LetNode::make(op->var, value, body);
  }

  Expr visit(const CallNode *op, const Expr &self) override {
    Expr r = IRMutator::visit(op, self);
    const auto *c = r.as<CallNode>();
    if (c && c->name == intrinsic::kIfThenElse && c->args.size() == 3) {
      if (auto cc = const_bool(c->args[0])) {
        const Expr &pick = *cc ? c->args[1] : c->args[2];
        if (pick.type() == r.type()) return pick;
      }
    }
    if (c && c->name == intrinsic::kLikely && c->args.size() == 1 && const_bool(c->args[0]) &&
        c->args[0].type() == r.type()) {
      return c->args[0];
    }
    return r;
  }

  Expr visit(const LoadNode *op, const Expr &self) override {
    Expr index = mutate(op->index), pred = mutate(op->predicate);
    if (pred.defined() && const_bool(pred) == std::optional<bool>(true)) pred = Expr();
    if (index.same_as(op->index) && pred.same_as(op->predicate)) return self;
    return LoadNode::make(op->type.with_lanes(index.type().lanes()), op->buffer_var, index, pred);
  }

  Expr visit(const ReduceNode *op, const Expr &self) override {
    BindingScope scope(st_);
    for (const auto &iv : op->axis) {
      if (!iv.defined() || !iv->dom.defined()) continue;
      ConstIntBound b = range_bound(st_, iv->dom.min, iv->dom.extent);
      if (b.min_value <= b.max_value) scope.set(iv->var, b);
    }
    return IRMutator::visit(op, self);
  }

 private:
  Expr again(const Expr &e) {
    if (depth_ >= kMaxRewriteDepth) return e;
    ++depth_;
    Expr r = mutate(e);
    --depth_;
    return r;
  }

  ConstIntBound bound(const Expr &e) const { return bound_of(st_, e); }

  template <typename Node>
  Expr broadcast_binary(const Expr &a, const Expr &b) {
    const auto *x = a.as<BroadcastNode>();
    const auto *y = b.as<BroadcastNode>();
    if (x && y && x->lanes == y->lanes) return BroadcastNode::make(again(Node::make(x->value, y->value)), x->lanes);
    return Expr();
  }

  Expr linear_rewrite(const Expr &orig) {
    LinearForm f = linear_form(orig);
    if (!representable(f) || linear_matches(f, orig)) return orig;
    return build_linear(f);
  }

  Expr add_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::Add, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<AddNode>(a, b); r.defined()) return r;
    if (is_const_value(b, 0)) return a;
    if (is_const_value(a, 0)) return b;
    const DataType t = orig.type();
    if (is_int_arith(t) && t.is_vector()) {
      const auto *ra = a.as<RampNode>();
      const auto *rb = b.as<RampNode>();
      const auto *ba = a.as<BroadcastNode>();
      const auto *bb = b.as<BroadcastNode>();
      const int lanes = t.lanes();
      if (ra && bb) return make_ramp(again(AddNode::make(ra->base, bb->value)), ra->stride, lanes);
      if (ba && rb) return make_ramp(again(AddNode::make(ba->value, rb->base)), rb->stride, lanes);
      if (ra && rb) {
        return make_ramp(again(AddNode::make(ra->base, rb->base)), again(AddNode::make(ra->stride, rb->stride)), lanes);
      }
    }
    if (is_int_arith(t) && t.is_scalar()) return linear_rewrite(orig);
    if (t.is_float() && is_constant(a) && !is_constant(b)) return AddNode::make(b, a);
    return orig;
  }

  Expr sub_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::Sub, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<SubNode>(a, b); r.defined()) return r;
    if (is_const_value(b, 0)) return a;
    const DataType t = orig.type();
    if (is_int_arith(t) && t.is_vector()) {
      if (structural_equal(a, b)) return make_zero(t);
      const auto *ra = a.as<RampNode>();
      const auto *rb = b.as<RampNode>();
      const auto *ba = a.as<BroadcastNode>();
      const auto *bb = b.as<BroadcastNode>();
      const int lanes = t.lanes();
      if (ra && bb) return make_ramp(again(SubNode::make(ra->base, bb->value)), ra->stride, lanes);
      if (ba && rb) {
        return make_ramp(again(SubNode::make(ba->value, rb->base)),
                         again(SubNode::make(make_zero(rb->stride.type()), rb->stride)), lanes);
      }
      if (ra && rb) {
        return make_ramp(again(SubNode::make(ra->base, rb->base)), again(SubNode::make(ra->stride, rb->stride)), lanes);
      }
    }
    if (is_int_arith(t) && t.is_scalar()) return linear_rewrite(orig);
    return orig;
  }

  Expr mul_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::Mul, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<MulNode>(a, b); r.defined()) return r;
    if (is_const_value(b, 1)) return a;
    if (is_const_value(a, 1)) return b;
    const DataType t = orig.type();
    if (t.is_integer_like() && (is_const_value(a, 0) || is_const_value(b, 0))) return make_zero(t);
    if (is_int_arith(t) && t.is_vector()) {
      const auto *ra = a.as<RampNode>();
      const auto *rb = b.as<RampNode>();
      const auto *ba = a.as<BroadcastNode>();
      const auto *bb = b.as<BroadcastNode>();
      const int lanes = t.lanes();
      if (ra && bb) {
        return make_ramp(again(MulNode::make(ra->base, bb->value)), again(MulNode::make(ra->stride, bb->value)), lanes);
      }
      if (ba && rb) {
        return make_ramp(again(MulNode::make(rb->base, ba->value)), again(MulNode::make(rb->stride, ba->value)), lanes);
      }
    }
    if (is_int_arith(t) && t.is_scalar()) return linear_rewrite(orig);
    if (t.is_float() && is_constant(a) && !is_constant(b)) return MulNode::make(b, a);
    return orig;
  }

  Expr div_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::Div, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<DivNode>(a, b); r.defined()) return r;
    if (is_const_value(b, 1)) return a;
    const DataType t = orig.type();
    if (!t.is_integer_like()) return orig;
    auto cb = const_int(b);
    if (cb && *cb == 0) return orig;
    const ConstIntBound x = bound(a);
    if (cb && *cb > 0 && is_finite(x) && x.min_value / *cb == x.max_value / *cb) {
      return make_const(t, x.min_value / *cb);
    }
    if (no_overflow_int(t) && t.is_scalar() && cb) {
      const int64_t c = *cb;
      LinearForm f = linear_form(a);
      if (f.ok && divisible(f, c)) {
        LinearForm q = divide_exact(f, c);
        if (representable(q)) return build_linear(q);
      }
      if (const auto *inner = a.as<DivNode>(); inner && c > 0) {
        auto c1 = scalar_int(inner->b);
        int64_t prod;
        if (c1 && *c1 > 0 && !__builtin_mul_overflow(*c1, c, &prod) && prod <= int_type_max(t)) {
          return again(DivNode::make(inner->a, make_const(t, prod)));
        }
      }
    }
    if (t.is_int()) {
      const int64_t ymin = cb ? *cb : bound(b).min_value;
      if (x.min_value >= 0 && ymin > 0) return again(FloorDivNode::make(a, b));
    }
    return orig;
  }

  Expr mod_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::Mod, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<ModNode>(a, b); r.defined()) return r;
    const DataType t = orig.type();
    if (!t.is_integer_like()) return orig;
    if (is_const_value(b, 1) || (t.is_int() && is_const_value(b, -1))) return make_zero(t);
    auto cb = const_int(b);
    if (cb && *cb == 0) return orig;
    if (no_overflow_int(t) && t.is_scalar() && cb) {
      LinearForm f = linear_form(a);
      if (f.ok && divisible(f, *cb)) return make_zero(t);
    }
    const ConstIntBound x = bound(a);
    if (t.is_int()) {
      const int64_t ymin = cb ? *cb : bound(b).min_value;
      if (x.min_value >= 0 && ymin > 0) return again(FloorModNode::make(a, b));
    }
    if (cb && *cb != INT64_MIN) {
      const int64_t m = std::llabs(*cb);
      if (x.min_value > -m && x.max_value < m) return a;
    }
    return orig;
  }

  // floordiv / floormod of a ramp by a positive constant.
  Expr ramp_div_mod(bool div, const Expr &a, int64_t c, const Expr &orig) {
    const auto *r = a.as<RampNode>();
    if (!r) return orig;
    auto s = scalar_int(r->stride);
    if (!s) return orig;
    const DataType et = r->base.type();
    const Expr ce = make_const(et, c);
    if (*s % c == 0) {
      if (div) return make_ramp(again(FloorDivNode::make(r->base, ce)), make_const(et, *s / c), r->lanes);
      return BroadcastNode::make(again(FloorModNode::make(r->base, ce)), r->lanes);
    }
    Expr m = again(FloorModNode::make(r->base, ce));
    const ConstIntBound mb = bound(m);
    const int64_t span = sat_mul(*s, r->lanes - 1);
    if (is_finite(mb) && sat_add(mb.min_value, std::min<int64_t>(span, 0)) >= 0 &&
        sat_add(mb.max_value, std::max<int64_t>(span, 0)) < c) {
      // Every lane falls in the same block of c.
      if (div) return BroadcastNode::make(again(FloorDivNode::make(r->base, ce)), r->lanes);
      return RampNode::make(m, r->stride, r->lanes);
    }
    return orig;
  }

  Expr floordiv_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::FloorDiv, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<FloorDivNode>(a, b); r.defined()) return r;
    const DataType t = orig.type();
    if (!t.is_integer_like()) return orig;
    if (is_const_value(b, 1)) return a;
    auto cb = const_int(b);
    if (cb && *cb == 0) return orig;
    const ConstIntBound x = bound(a);
    if (cb && *cb > 0 && is_finite(x)) {
      const int64_t lo = floor_div(x.min_value, *cb), hi = floor_div(x.max_value, *cb);
      if (lo == hi) return make_const(t, lo);
    }
    if (!cb) {
      const ConstIntBound y = bound(b);
      if (y.min_value > 0 && x.min_value >= 0 && x.max_value < y.min_value) return make_zero(t);
    }
    if (!no_overflow_int(t) || !cb || *cb <= 0) return orig;
    const int64_t c = *cb;
    if (t.is_vector()) return ramp_div_mod(true, a, c, orig);
    if (const auto *inner = a.as<FloorDivNode>()) {
      auto c1 = scalar_int(inner->b);
      int64_t prod;
      if (c1 && *c1 > 0 && !__builtin_mul_overflow(*c1, c, &prod) && prod <= int_type_max(t)) {
        return again(FloorDivNode::make(inner->a, make_const(t, prod)));
      }
    }
    LinearForm f = linear_form(a);
    if (!f.ok) return orig;
    // a = quot * c + rest
    LinearForm quot(t), rest(t);
    for (const auto &term : f.terms) {
      if (term.coeff % c == 0) {
        quot.add_term(term.atom, term.coeff / c);
      } else {
        rest.add_term(term.atom, term.coeff);
      }
    }
    rest.add_constant(f.constant);
    const ConstIntBound rb = linear_bound(st_, rest);
    if (is_finite(rb)) {
      const int64_t lo = floor_div(rb.min_value, c), hi = floor_div(rb.max_value, c);
      if (lo == hi) {
        quot.add_constant(lo);
        return representable(quot) ? build_linear(quot) : orig;
      }
    }
    const int64_t q = rest.constant / c;
    rest.constant -= q * c;
    if (quot.terms.empty() && q == 0) {
      const int64_t g = form_gcd(rest, c);
      if (g > 1) {
        LinearForm reduced = divide_exact(rest, g);
        if (representable(reduced)) return again(FloorDivNode::make(build_linear(reduced), make_const(t, c / g)));
      }
      return orig;
    }
    if (!representable(rest)) return orig;
    Expr inner = again(FloorDivNode::make(build_linear(rest), b));
    quot.add_constant(q);
    collect_linear(inner, 1, &quot);
    if (!representable(quot)) return orig;
    return build_linear(quot);
  }

  Expr floormod_rule(const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(NodeType::FloorMod, a, b); c.defined()) return c;
    if (Expr r = broadcast_binary<FloorModNode>(a, b); r.defined()) return r;
    const DataType t = orig.type();
    if (!t.is_integer_like()) return orig;
    if (is_const_value(b, 1)) return make_zero(t);
    auto cb = const_int(b);
    if (cb && *cb == 0) return orig;
    const ConstIntBound x = bound(a);
    if (cb && *cb > 0 && is_finite(x)) {
      const int64_t lo = floor_div(x.min_value, *cb), hi = floor_div(x.max_value, *cb);
      if (lo == 0 && hi == 0) return a;
      int64_t shift;
      if (lo == hi && no_overflow_int(t) && !__builtin_mul_overflow(lo, *cb, &shift) && shift >= int_type_min(t) &&
          shift <= int_type_max(t)) {
        return again(SubNode::make(a, make_const(t, shift)));
      }
    }
    if (!cb) {
      const ConstIntBound y = bound(b);
      if (y.min_value > 0 && x.min_value >= 0 && x.max_value < y.min_value) return a;
    }
    if (!no_overflow_int(t) || !cb || *cb <= 0) return orig;
    const int64_t c = *cb;
    if (t.is_vector()) return ramp_div_mod(false, a, c, orig);
    if (const auto *inner = a.as<FloorModNode>()) {
      auto c1 = scalar_int(inner->b);
      if (c1 && *c1 > 0 && *c1 % c == 0) return again(FloorModNode::make(inner->a, b));
    }
    LinearForm f = linear_form(a);
    if (!f.ok) return orig;
    LinearForm rest(t);
    bool changed = false;
    for (const auto &term : f.terms) {
      if (term.coeff % c == 0) {
        changed = true;
      } else {
        rest.add_term(term.atom, term.coeff);
      }
    }
    rest.add_constant(f.constant);
    const ConstIntBound rb = linear_bound(st_, rest);
    if (is_finite(rb)) {
      const int64_t lo = floor_div(rb.min_value, c), hi = floor_div(rb.max_value, c);
      int64_t shift;
      if (lo == hi && !__builtin_mul_overflow(lo, c, &shift) && shift != INT64_MIN) {
        rest.add_constant(-shift);
        return representable(rest) ? build_linear(rest) : orig;
      }
    }
    const int64_t rem = rest.constant % c;
    if (rem != rest.constant) {
      rest.constant = rem;
      changed = true;
    }
    if (!changed) {
      const int64_t g = form_gcd(rest, c);
      if (g > 1) {
        LinearForm reduced = divide_exact(rest, g);
        if (representable(reduced)) {
          Expr m = again(FloorModNode::make(build_linear(reduced), make_const(t, c / g)));
          return again(MulNode::make(m, make_const(t, g)));
        }
      }
      return orig;
    }
    if (!representable(rest)) return orig;
    return again(FloorModNode::make(build_linear(rest), b));
  }

  Expr minmax_rule(bool is_min, const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(is_min ? NodeType::Min : NodeType::Max, a, b); c.defined()) return c;
    if (Expr r = is_min ? broadcast_binary<MinNode>(a, b) : broadcast_binary<MaxNode>(a, b); r.defined()) return r;
    if (structural_equal(a, b)) return a;
    const DataType t = orig.type();
    if (!t.is_integer_like()) {
      if (is_constant(a) && !is_constant(b)) return make_minmax(is_min, b, a);
      return orig;
    }
    const ConstIntBound x = bound(a), y = bound(b);
    if (is_min) {
      if (x.max_value <= y.min_value) return a;
      if (y.max_value <= x.min_value) return b;
    } else {
      if (x.min_value >= y.max_value) return a;
      if (y.min_value >= x.max_value) return b;
    }
    if (no_overflow_int(t) && t.is_scalar()) {
      LinearForm d(t);
      collect_linear(a, 1, &d);
      collect_linear(b, -1, &d);
      merge_div_mod(&d);
      if (d.ok) {
        if (auto le = prove_le0(st_, d)) return *le == is_min ? a : b;  // a <= b, or a > b
        LinearForm nd = d;
        nd.negate();
        if (auto ge = prove_le0(st_, nd)) return *ge == is_min ? b : a;  // b <= a, or b > a
      }
    }
    Expr p, q;
    if (minmax_operands(a, is_min, &p, &q)) {
      if (structural_equal(p, b) || structural_equal(q, b)) return a;  // min(min(x, y), x)
      if (is_constant(q) && is_constant(b)) return again(make_minmax(is_min, p, again(make_minmax(is_min, q, b))));
    }
    if (minmax_operands(b, is_min, &p, &q) && (structural_equal(p, a) || structural_equal(q, a))) return b;
    // min(max(x, y), x)
    if (minmax_operands(a, !is_min, &p, &q) && (structural_equal(p, b) || structural_equal(q, b))) return b;
    if (minmax_operands(b, !is_min, &p, &q) && (structural_equal(p, a) || structural_equal(q, a))) return a;
    if (is_constant(a) && !is_constant(b)) return again(make_minmax(is_min, b, a));
    return orig;
  }

  // Decides the comparison `d k 0`.
  std::optional<bool> decide(NodeType k, const LinearForm &d) {
    if (k == NodeType::LT) {
      LinearForm q = d;
      q.add_constant(1);
      return prove_le0(st_, q);
    }
    if (k == NodeType::LE) return prove_le0(st_, d);
    const auto le = prove_le0(st_, d);
    LinearForm nd = d;
    nd.negate();
    const auto ge = prove_le0(st_, nd);
    std::optional<bool> eq;
    if ((le && !*le) || (ge && !*ge))
      eq = false;
    else if (le && *le && ge && *ge)
      eq = true;
    if (!eq) return std::nullopt;
    return k == NodeType::EQ ? *eq : !*eq;
  }

  // Moves every term of an overflow-free integer comparison to one side, divides by the gcd of
  // the coefficients and rebuilds it as `positive terms k negative terms + constant`.
  Expr normalize_compare(NodeType k, const Expr &a, const Expr &b, const Expr &orig) {
    const DataType t = a.type();
    LinearForm d(t);
    collect_linear(a, 1, &d);
    collect_linear(b, -1, &d);
    merge_div_mod(&d);
    if (!d.ok) return orig;
    if (auto r = decide(k, d)) return make_bool(*r, 1);
    if (d.terms.empty()) return orig;
    int64_t g = 0;
    for (const auto &term : d.terms) g = gcd64(g, term.coeff);
    if (g > 1) {
      if (k == NodeType::EQ || k == NodeType::NE) {
        if (d.constant % g != 0) return make_bool(k == NodeType::NE, 1);
        d.constant /= g;
      } else if (k == NodeType::LT) {
        d.constant = floor_div(d.constant, g);
      } else {
        if (d.constant == INT64_MIN) return orig;
        d.constant = -floor_div(-d.constant, g);
      }
      for (auto &term : d.terms) term.coeff /= g;
    }
    if ((k == NodeType::EQ || k == NodeType::NE) && d.terms[0].coeff < 0) d.negate();
    for (const auto &term : d.terms) {
      if (term.coeff == INT64_MIN) return orig;
    }
    LinearForm lhs(t), rhs(t);
    for (const auto &term : d.terms) {
      if (term.coeff > 0) {
        lhs.add_term(term.atom, term.coeff);
      } else {
        rhs.add_term(term.atom, -term.coeff);
      }
    }
    if (!lhs.terms.empty()) {
      if (d.constant == INT64_MIN) return orig;
      rhs.constant = -d.constant;
    } else {
      lhs.constant = d.constant;
    }
    if (!d.ok || !representable(lhs) || !representable(rhs)) return orig;
    Expr res = make_cmp(k, build_linear(lhs), build_linear(rhs));
    return structural_equal(res, orig) ? orig : res;
  }

  // k is LT, LE, EQ or NE.
  Expr compare_rule(NodeType k, const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(k, a, b); c.defined()) return c;
    const int lanes = orig.type().lanes();
    const auto *x = a.as<BroadcastNode>();
    const auto *y = b.as<BroadcastNode>();
    if (x && y && x->lanes == y->lanes) return BroadcastNode::make(again(make_cmp(k, x->value, y->value)), lanes);
    const DataType t = a.type();
    if (!t.is_integer_like()) return orig;
    if (structural_equal(a, b)) return make_bool(k == NodeType::LE || k == NodeType::EQ, lanes);
    if (t.is_bool() && (k == NodeType::EQ || k == NodeType::NE)) {
      if (auto cb = const_bool(b)) return *cb == (k == NodeType::EQ) ? a : again(NotNode::make(a));
      if (auto ca = const_bool(a)) return *ca == (k == NodeType::EQ) ? b : again(NotNode::make(b));
    }
    const ConstIntBound ba = bound(a), bb = bound(b);
    switch (k) {
      case NodeType::LT:
        if (ba.max_value < bb.min_value) return make_bool(true, lanes);
        if (ba.min_value >= bb.max_value) return make_bool(false, lanes);
        break;
      case NodeType::LE:
        if (ba.max_value <= bb.min_value) return make_bool(true, lanes);
        if (ba.min_value > bb.max_value) return make_bool(false, lanes);
        break;
      default:  // EQ or NE
        if (ba.max_value < bb.min_value || bb.max_value < ba.min_value) return make_bool(k == NodeType::NE, lanes);
        break;
    }
    if (no_overflow_int(t) && t.is_scalar()) return normalize_compare(k, a, b, orig);
    return orig;
  }

  Expr logic_rule(bool is_and, const Expr &a, const Expr &b, const Expr &orig) {
    if (Expr c = fold_binary(is_and ? NodeType::And : NodeType::Or, a, b); c.defined()) return c;
    if (Expr r = is_and ? broadcast_binary<AndNode>(a, b) : broadcast_binary<OrNode>(a, b); r.defined()) return r;
    const int lanes = orig.type().lanes();
    // and: true is the identity, false absorbs; or: the other way round.
    if (auto ca = const_bool(a)) return *ca == is_and ? b : make_bool(!is_and, lanes);
    if (auto cb = const_bool(b)) return *cb == is_and ? a : make_bool(!is_and, lanes);
    if (structural_equal(a, b)) return a;
    const auto *na = a.as<NotNode>();
    const auto *nb = b.as<NotNode>();
    if ((na && structural_equal(na->a, b)) || (nb && structural_equal(nb->a, a))) return make_bool(!is_and, lanes);
    auto qa = comparison_form(a), qb = comparison_form(b);
    if (qa && qb) {
      // qa <= 0 and qb <= 0 are the two conditions.
      LinearForm diff = *qb;
      diff.add(*qa, -1);
      if (diff.ok) {
        const ConstIntBound db = linear_bound(st_, diff);
        if (db.max_value <= 0) return is_and ? a : b;  // qb <= qa: a implies b
        if (db.min_value >= 0) return is_and ? b : a;  // qa <= qb: b implies a
      }
      LinearForm sum = *qa;
      sum.add(*qb, 1);
      if (sum.ok) {
        const ConstIntBound sb = linear_bound(st_, sum);
        if (is_and && sb.min_value >= 1) return make_bool(false, lanes);  // both cannot hold
        if (!is_and && sb.max_value <= 1) return make_bool(true, lanes);  // both cannot fail
      }
    }
    return orig;
  }

  AnalyzerState &st_;
  int depth_ = 0;
};

}  // namespace

Expr simplify_expr(AnalyzerState &st, const Expr &e) {
  if (!e.defined()) return e;
  Expr cur = e;
  for (int i = 0; i < kMaxIterations; ++i) {
    Expr next = RewriteSimplifier(st).mutate(cur);
    if (next.same_as(cur) || structural_equal(next, cur)) break;
    cur = next;
  }
  return cur;
}

}  // namespace kiln::arith::detail
