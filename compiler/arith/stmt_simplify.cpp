// Statement simplification: every expression is simplified with the loop variables bound to their
// ranges, let variables to their values and the conditions of enclosing if statements assumed;
// if statements with a decided condition and loops that never run are removed.
#include "compiler/arith/analyzer_state.h"
#include "compiler/arith/const_fold.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::arith::detail {

namespace {

using namespace ir;

std::optional<bool> const_bool(const Expr &e) {
  if (!e.defined() || !e.type().is_bool()) return std::nullopt;
  auto c = const_int(e);
  if (!c) return std::nullopt;
  return *c != 0;
}

class StmtSimplifier : public IRMutator {
 public:
  explicit StmtSimplifier(AnalyzerState &st) : st_(st) {}
  using IRMutator::mutate;

  Expr mutate(const Expr &e) override { return e.defined() ? simplify_expr(st_, e) : e; }

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    Expr min = mutate(op->min), extent = mutate(op->extent);
    const ConstIntBound eb = bound_of(st_, extent);
    if (eb.max_value <= 0) return make_nop();
    if (is_one(extent) && op->kind == ForKind::Serial && min.type() == op->loop_var.type()) {
      BindingScope scope(st_);
      if (is_cheap(min)) {
        scope.set(op->loop_var, bound_of(st_, min), min);
        return mutate(op->body);
      }
      scope.set(op->loop_var, bound_of(st_, min));
      Stmt body = mutate(op->body);
      if (!uses_var(body, op->loop_var.get())) return body;
      return LetStmtNode::make(op->loop_var, min, body);
    }
    Stmt body;
    {
      BindingScope scope(st_);
      const ConstIntBound vb = range_bound(st_, min, extent);
      if (vb.min_value <= vb.max_value) scope.set(op->loop_var, vb);
      if (no_overflow_int(op->loop_var.type()) && min.type() == op->loop_var.type() &&
          extent.type() == op->loop_var.type() && !(as_const_int(min) && as_const_int(extent))) {
        // Symbolic ends: min - v <= 0 and v - min - extent + 1 <= 0.
        LinearForm lo(min.type()), hi(min.type());
        collect_linear(min, 1, &lo);
        lo.add_term(op->loop_var, -1);
        hi.add_term(op->loop_var, 1);
        collect_linear(min, -1, &hi);
        collect_linear(extent, -1, &hi);
        hi.add_constant(1);
        scope.add_fact(lo);
        scope.add_fact(hi);
      }
      body = mutate(op->body);
    }
    if (is_nop(body)) return make_nop();
    if (min.same_as(op->min) && extent.same_as(op->extent) && body.same_as(op->body)) return self;
    return ForNode::make(op->loop_var, min, extent, op->kind, body, op->thread_tag);
  }

  Stmt visit(const LetStmtNode *op, const Stmt &self) override {
    Expr value = mutate(op->value);
    BindingScope scope(st_);
    if (is_cheap(value) && value.type() == op->var.type()) {
      scope.set(op->var, bound_of(st_, value), value);
      return mutate(op->body);
    }
    scope.set(op->var, bound_of(st_, value));
    if (no_overflow_int(op->var.type()) && op->var.type().is_scalar() && value.type() == op->var.type()) {
      LinearForm f(value.type());  // var - value == 0
      f.add_term(op->var, 1);
      collect_linear(value, -1, &f);
      if (f.ok) {
        scope.add_fact(f);
        f.negate();
        scope.add_fact(f);
      }
    }
    Stmt body = mutate(op->body);
    if (!uses_var(body, op->var.get()) && !has_side_effect(value)) return body;
    if (value.same_as(op->value) && body.same_as(op->body)) return self;
    return LetStmtNode::make(op->var, value, body);
  }

  Stmt visit(const AttrStmtNode *op, const Stmt &self) override {
    Expr value = mutate(op->value);
    Stmt body;
    {
      BindingScope scope(st_);
      const auto *v = op->node.as<VariableNode>();
      if (v && value.defined() && (op->key == attr::kThreadExtent || op->key == attr::kVirtualThread) &&
          value.type() == v->type) {
        const ConstIntBound b = range_bound(st_, make_zero(value.type()), value);
        if (b.min_value <= b.max_value) scope.set(Var(op->node), b);
      }
      body = mutate(op->body);
    }
    if (value.same_as(op->value) && body.same_as(op->body)) return self;
    return AttrStmtNode::make(op->node, op->key, value, body);
  }

  Stmt visit(const IfThenElseNode *op, const Stmt &self) override {
    Expr cond = mutate(op->condition);
    if (auto c = const_bool(cond)) {
      if (*c) return mutate(op->then_case);
      return op->else_case.defined() ? mutate(op->else_case) : make_nop();
    }
    Stmt then_case, else_case;
    {
      BindingScope scope(st_);
      scope.assume(cond, true);
      then_case = mutate(op->then_case);
    }
    if (op->else_case.defined()) {
      BindingScope scope(st_);
      scope.assume(cond, false);
      else_case = mutate(op->else_case);
      if (is_nop(else_case)) else_case = Stmt();
    }
    if (is_nop(then_case) && !else_case.defined() && !has_side_effect(cond)) return make_nop();
    if (is_nop(then_case) && else_case.defined() && cond.type().is_bool()) {
      return IfThenElseNode::make(simplify_expr(st_, NotNode::make(cond)), else_case);
    }
    if (cond.same_as(op->condition) && then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) {
      return self;
    }
    return IfThenElseNode::make(cond, then_case, else_case);
  }

  Stmt visit(const AssertStmtNode *op, const Stmt &self) override {
    Expr cond = mutate(op->condition);
    if (const_bool(cond) == std::optional<bool>(true)) return mutate(op->body);
    Stmt body;
    {
      BindingScope scope(st_);
      scope.assume(cond, true);
      body = mutate(op->body);
    }
    if (cond.same_as(op->condition) && body.same_as(op->body)) return self;
    return AssertStmtNode::make(cond, op->message, body);
  }

  Stmt visit(const StoreNode *op, const Stmt &self) override {
    Expr value = mutate(op->value), index = mutate(op->index), pred = mutate(op->predicate);
    if (pred.defined() && const_bool(pred) == std::optional<bool>(true)) pred = Expr();
    if (value.same_as(op->value) && index.same_as(op->index) && pred.same_as(op->predicate)) return self;
    return StoreNode::make(op->buffer_var, value, index, pred);
  }

 private:
  AnalyzerState &st_;
};

}  // namespace

Stmt simplify_stmt(AnalyzerState &st, const Stmt &s) {
  if (!s.defined()) return s;
  return StmtSimplifier(st).mutate(s);
}

}  // namespace kiln::arith::detail
