#include "compiler/lower/interval.h"

#include "compiler/arith/analyzer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::lower {

using namespace ir;

namespace {

constexpr int kMaxDepth = 64;

bool is_point(const Interval &i) { return i.min.defined() && i.min.same_as(i.max); }

class IntervalEvaluator {
 public:
  explicit IntervalEvaluator(const RelaxMap &relax) : relax_(relax) {}

  Interval eval(const Expr &e) {
    if (++depth_ > kMaxDepth * 16) throw InternalError("interval evaluation recursed too deep");
    Interval r = eval_impl(e);
    --depth_;
    return r;
  }

 private:
  Interval eval_impl(const Expr &e) {
    if (e.as<IntImmNode>() || e.as<FloatImmNode>()) return Interval::point(e);
    if (const auto *v = e.as<VariableNode>()) {
      auto it = relax_.find(v);
      if (it == relax_.end()) return Interval::point(e);
      if (var_depth_ >= kMaxDepth) return Interval::everything();
      ++var_depth_;
      Interval r;
      if (it->second.min.defined()) r.min = eval(it->second.min).min;
      if (it->second.max.defined()) r.max = eval(it->second.max).max;
      --var_depth_;
      return r;
    }
    if (const auto *op = e.as<AddNode>()) {
      Interval a = eval(op->a), b = eval(op->b);
      if (is_point(a) && is_point(b) && a.min.same_as(op->a) && b.min.same_as(op->b)) return Interval::point(e);
      return {a.min.defined() && b.min.defined() ? a.min + b.min : Expr(),
              a.max.defined() && b.max.defined() ? a.max + b.max : Expr()};
    }
    if (const auto *op = e.as<SubNode>()) {
      Interval a = eval(op->a), b = eval(op->b);
      if (is_point(a) && is_point(b) && a.min.same_as(op->a) && b.min.same_as(op->b)) return Interval::point(e);
      return {a.min.defined() && b.max.defined() ? a.min - b.max : Expr(),
              a.max.defined() && b.min.defined() ? a.max - b.min : Expr()};
    }
    if (const auto *op = e.as<MulNode>()) return mul(e, op->a, op->b);
    if (const auto *op = e.as<DivNode>()) return div(e, op->a, op->b, false);
    if (const auto *op = e.as<FloorDivNode>()) return div(e, op->a, op->b, true);
    if (const auto *op = e.as<ModNode>()) return mod(e, op->a, op->b, false);
    if (const auto *op = e.as<FloorModNode>()) return mod(e, op->a, op->b, true);
    if (const auto *op = e.as<MinNode>()) {
      Interval a = eval(op->a), b = eval(op->b);
      Interval r;
      if (a.min.defined() && b.min.defined()) r.min = ir::min(a.min, b.min);
      if (a.max.defined() && b.max.defined())
        r.max = ir::min(a.max, b.max);
      else if (a.max.defined())
        r.max = a.max;
      else if (b.max.defined())
        r.max = b.max;
      return r;
    }
    if (const auto *op = e.as<MaxNode>()) {
      Interval a = eval(op->a), b = eval(op->b);
      Interval r;
      if (a.max.defined() && b.max.defined()) r.max = ir::max(a.max, b.max);
      if (a.min.defined() && b.min.defined())
        r.min = ir::max(a.min, b.min);
      else if (a.min.defined())
        r.min = a.min;
      else if (b.min.defined())
        r.min = b.min;
      return r;
    }
    if (const auto *op = e.as<SelectNode>()) {
      return union_interval(eval(op->true_value), eval(op->false_value));
    }
    if (const auto *op = e.as<CallNode>()) {
      if (op->name == intrinsic::kIfThenElse && op->args.size() == 3) {
        return union_interval(eval(op->args[1]), eval(op->args[2]));
      }
      return depends_on_relaxed(e) ? Interval::everything() : Interval::point(e);
    }
    if (const auto *op = e.as<CastNode>()) {
      Interval a = eval(op->value);
      // Widening or int-to-float casts are monotonic; anything else is given up.
      DataType from = op->value.type(), to = op->type;
      bool monotonic = (to.is_float() && !from.is_float()) ||
                       (to.is_int() && from.is_int() && to.bits() >= from.bits()) ||
                       (to.is_float() && from.is_float() && to.bits() >= from.bits());
      if (is_point(a)) return Interval::point(e);
      if (!monotonic) return Interval::everything();
      return {a.min.defined() ? cast(to, a.min) : Expr(), a.max.defined() ? cast(to, a.max) : Expr()};
    }
    if (const auto *op = e.as<LetNode>()) {
      (void)op;
      return depends_on_relaxed(e) ? Interval::everything() : Interval::point(e);
    }
    // Loads and anything else: a point if nothing in it varies.
    return depends_on_relaxed(e) ? Interval::everything() : Interval::point(e);
  }

  bool depends_on_relaxed(const Expr &e) {
    bool dep = false;
    post_order_visit(e, [&](const IRNode *n) {
      if (n->node_type == NodeType::Variable && relax_.count(static_cast<const VariableNode *>(n))) dep = true;
    });
    return dep;
  }

  Interval mul(const Expr &e, const Expr &ea, const Expr &eb) {
    Interval a = eval(ea), b = eval(eb);
    if (is_point(a) && is_point(b)) return Interval::point(a.min.same_as(ea) && b.min.same_as(eb) ? e : a.min * b.min);
    auto scale = [](const Interval &x, const Expr &c, int64_t cv) -> Interval {
      if (cv >= 0) {
        return {x.min.defined() ? x.min * c : Expr(), x.max.defined() ? x.max * c : Expr()};
      }
      return {x.max.defined() ? x.max * c : Expr(), x.min.defined() ? x.min * c : Expr()};
    };
    if (auto c = as_const_int(b.min); c && is_point(b)) return scale(a, b.min, *c);
    if (auto c = as_const_int(a.min); c && is_point(a)) return scale(b, a.min, *c);
    if (auto c = as_const_float(b.min); c && is_point(b)) return scale(a, b.min, *c >= 0 ? 1 : -1);
    if (auto c = as_const_float(a.min); c && is_point(a)) return scale(b, a.min, *c >= 0 ? 1 : -1);
    // Both vary: bounded only when both are known non-negative.
    arith::Analyzer an;
    if (a.bounded() && b.bounded() && an.can_prove(a.min >= make_zero(a.min.type())) &&
        an.can_prove(b.min >= make_zero(b.min.type()))) {
      return {a.min * b.min, a.max * b.max};
    }
    return Interval::everything();
  }

  Interval div(const Expr &e, const Expr &ea, const Expr &eb, bool floor) {
    Interval a = eval(ea), b = eval(eb);
    auto mk = [&](const Expr &x, const Expr &y) { return floor ? floordiv(x, y) : truncdiv(x, y); };
    if (is_point(a) && is_point(b))
      return Interval::point(a.min.same_as(ea) && b.min.same_as(eb) ? e : mk(a.min, b.min));
    if (e.type().is_float()) {
      if (auto c = as_const_float(b.min); c && is_point(b) && *c > 0) {
        return {a.min.defined() ? a.min / b.min : Expr(), a.max.defined() ? a.max / b.max : Expr()};
      }
      return Interval::everything();
    }
    auto c = as_const_int(b.min);
    if (c && is_point(b) && *c > 0) {
      // Division by a positive constant is monotonic (both truncating and floor).
      return {a.min.defined() ? mk(a.min, b.min) : Expr(), a.max.defined() ? mk(a.max, b.min) : Expr()};
    }
    if (c && is_point(b) && *c < 0) {
      return {a.max.defined() ? mk(a.max, b.min) : Expr(), a.min.defined() ? mk(a.min, b.min) : Expr()};
    }
    return Interval::everything();
  }

  Interval mod(const Expr &e, const Expr &ea, const Expr &eb, bool floor) {
    Interval a = eval(ea), b = eval(eb);
    if (is_point(a) && is_point(b)) {
      return Interval::point(a.min.same_as(ea) && b.min.same_as(eb) ? e
                             : floor                                ? floormod(a.min, b.min)
                                                                    : truncmod(a.min, b.min));
    }
    auto c = as_const_int(b.min);
    if (!(c && is_point(b) && *c > 0)) return Interval::everything();
    DataType t = e.type();
    arith::Analyzer an;
    bool nonneg = a.min.defined() && an.can_prove(a.min >= make_zero(t));
    // Within one period the remainder is the value itself shifted; keep it simple otherwise.
    if (floor || nonneg) return {make_zero(t), make_const(t, *c - 1)};
    return {make_const(t, -(*c - 1)), make_const(t, *c - 1)};
  }

  const RelaxMap &relax_;
  int depth_ = 0;
  int var_depth_ = 0;
};

}  // namespace

Interval eval_interval(const Expr &e, const RelaxMap &relax) {
  IntervalEvaluator ev(relax);
  Interval r = ev.eval(e);
  if (r.min.defined()) r.min = arith::simplify(r.min);
  if (r.max.defined()) r.max = arith::simplify(r.max);
  return r;
}

Interval union_interval(const Interval &a, const Interval &b) {
  Interval r;
  if (a.min.defined() && b.min.defined()) r.min = a.min.same_as(b.min) ? a.min : ir::min(a.min, b.min);
  if (a.max.defined() && b.max.defined()) r.max = a.max.same_as(b.max) ? a.max : ir::max(a.max, b.max);
  return r;
}

}  // namespace kiln::lower
