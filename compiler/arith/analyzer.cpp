#include "compiler/arith/analyzer.h"

#include <algorithm>

#include "compiler/arith/analyzer_state.h"
#include "compiler/arith/const_fold.h"
#include "compiler/ir/op.h"
#include "compiler/ir/structural.h"

namespace kiln::arith {

using detail::AnalyzerState;

struct Analyzer::Impl {
  AnalyzerState st;
};

Analyzer::Analyzer() : impl_(std::make_unique<Impl>()) {}
Analyzer::~Analyzer() = default;

void Analyzer::bind(const Var &v, const Range &r) {
  if (!v.defined() || !r.defined()) return;
  unbind(v);
  auto &st = impl_->st;
  const Expr min = detail::simplify_expr(st, r.min), extent = detail::simplify_expr(st, r.extent);
  ConstIntBound b = detail::intersect(detail::range_bound(st, min, extent), detail::everything(v.type()));
  if (b.min_value > b.max_value) b = detail::everything(v.type());
  st.vars[v.get()] = detail::VarInfo{v, b, Expr()};
  // Symbolic ends become facts: min - v <= 0 and v - min - extent + 1 <= 0.
  if (detail::no_overflow_int(v.type()) && v.type().is_scalar() && min.type() == v.type() &&
      extent.type() == v.type() && !(as_const_int(min) && as_const_int(extent))) {
    detail::LinearForm lo(v.type()), hi(v.type());
    detail::collect_linear(min, 1, &lo);
    lo.add_term(v, -1);
    hi.add_term(v, 1);
    detail::collect_linear(min, -1, &hi);
    detail::collect_linear(extent, -1, &hi);
    hi.add_constant(1);
    if (lo.ok) st.linear_facts.push_back(detail::LinearFact{v.get(), lo});
    if (hi.ok) st.linear_facts.push_back(detail::LinearFact{v.get(), hi});
  }
}

void Analyzer::bind(const Var &v, const Expr &value) {
  if (!v.defined() || !value.defined()) return;
  unbind(v);
  auto &st = impl_->st;
  const Expr simplified = detail::simplify_expr(st, value);
  const bool substitute = detail::is_cheap(simplified) && simplified.type() == v.type();
  st.vars[v.get()] =
      detail::VarInfo{v, detail::intersect(detail::bound_of(st, simplified), detail::everything(v.type())),
                      substitute ? simplified : Expr()};
  // A value that is not substituted still relates v to other variables: v - value == 0.
  if (!substitute && detail::no_overflow_int(v.type()) && v.type().is_scalar() && simplified.type() == v.type()) {
    detail::LinearForm f(v.type());
    f.add_term(v, 1);
    detail::collect_linear(simplified, -1, &f);
    if (f.ok) {
      st.linear_facts.push_back(detail::LinearFact{v.get(), f});
      f.negate();
      if (f.ok) st.linear_facts.push_back(detail::LinearFact{v.get(), f});
    }
  }
}

void Analyzer::unbind(const Var &v) {
  auto &st = impl_->st;
  st.vars.erase(v.get());
  st.linear_facts.erase(std::remove_if(st.linear_facts.begin(), st.linear_facts.end(),
                                       [&v](const detail::LinearFact &f) { return f.owner == v.get(); }),
                        st.linear_facts.end());
}

ConstIntBound Analyzer::const_int_bound(const Expr &e) {
  if (!e.defined()) return ConstIntBound();
  auto &st = impl_->st;
  const ConstIntBound a = detail::bound_of(st, e);
  const ConstIntBound b = detail::bound_of(st, detail::simplify_expr(st, e));
  const ConstIntBound r = detail::intersect(a, b);
  return r.min_value <= r.max_value ? r : a;
}

Expr Analyzer::simplify(const Expr &e) { return detail::simplify_expr(impl_->st, e); }

bool Analyzer::can_prove(const Expr &cond) {
  if (!cond.defined() || !cond.type().is_bool()) return false;
  const Expr s = detail::simplify_expr(impl_->st, cond);
  auto c = detail::const_int(s);
  return c && *c != 0;
}

bool Analyzer::can_prove_equal(const Expr &a, const Expr &b) {
  if (!a.defined() || !b.defined()) return false;
  if (ir::structural_equal(a, b)) return true;
  Expr eq;
  try {
    eq = a == b;
  } catch (const std::exception &) {
    return false;  // types that cannot be compared
  }
  return can_prove(eq);
}

Expr simplify(const Expr &e) {
  Analyzer analyzer;
  return analyzer.simplify(e);
}

Stmt simplify(const Stmt &s) {
  AnalyzerState st;
  return detail::simplify_stmt(st, s);
}

}  // namespace kiln::arith
