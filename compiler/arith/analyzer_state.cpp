// What the analyzer knows while it works: scoped bindings and facts, proofs from linear facts,
// and small queries on expressions (cheap values, variable uses, side effects).
#include "compiler/arith/analyzer_state.h"

#include <cstdint>

#include "compiler/arith/const_fold.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"

namespace kiln::arith::detail {

namespace {

using namespace ir;

class VarUseFinder : public IRVisitor {
 public:
  explicit VarUseFinder(const VariableNode *v) : v_(v) {}
  bool found = false;

  void visit_expr(const Expr &e) override {
    if (!found) IRVisitor::visit_expr(e);
  }
  void visit_stmt(const Stmt &s) override {
    if (!found) IRVisitor::visit_stmt(s);
  }
  void visit(const VariableNode *op) override { found = found || op == v_; }
  void visit(const LoadNode *op) override {
    found = found || op->buffer_var.get() == v_;
    IRVisitor::visit(op);
  }
  void visit(const StoreNode *op) override {
    found = found || op->buffer_var.get() == v_;
    IRVisitor::visit(op);
  }
  void visit(const AllocateNode *op) override {
    found = found || op->buffer_var.get() == v_;
    IRVisitor::visit(op);
  }
  void visit(const AttrStmtNode *op) override {
    found = found || op->node.get() == v_;
    IRVisitor::visit(op);
  }
  void visit(const ForNode *op) override {
    found = found || op->loop_var.get() == v_;
    IRVisitor::visit(op);
  }
  void visit(const LetStmtNode *op) override {
    found = found || op->var.get() == v_;
    IRVisitor::visit(op);
  }
  void visit(const LetNode *op) override {
    found = found || op->var.get() == v_;
    IRVisitor::visit(op);
  }

 private:
  const VariableNode *v_;
};

// When form <= 0 bounds a single variable (v + c <= 0 or c - v <= 0), that variable and bound.
bool single_var_bound(const LinearForm &f, const VariableNode **v, ConstIntBound *b) {
  if (f.terms.size() != 1 || !f.ok) return false;
  const auto *var = f.terms[0].atom.as<VariableNode>();
  const int64_t k = f.terms[0].coeff;
  if (!var || (k != 1 && k != -1) || f.constant == INT64_MIN) return false;
  *v = var;
  *b = ConstIntBound();
  if (k == 1) {
    b->max_value = -f.constant;  // v + c <= 0
  } else {
    b->min_value = f.constant;  // -v + c <= 0
  }
  return true;
}

}  // namespace

BindingScope::BindingScope(AnalyzerState &st)
    : st_(st), linear_facts_(st.linear_facts.size()), bool_facts_(st.bool_facts.size()) {}

BindingScope::~BindingScope() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second) {
      st_.vars[it->first] = *it->second;
    } else {
      st_.vars.erase(it->first);
    }
  }
  if (st_.linear_facts.size() > linear_facts_) {
    st_.linear_facts.erase(st_.linear_facts.begin() + static_cast<std::ptrdiff_t>(linear_facts_),
                           st_.linear_facts.end());
  }
  if (st_.bool_facts.size() > bool_facts_) {
    st_.bool_facts.erase(st_.bool_facts.begin() + static_cast<std::ptrdiff_t>(bool_facts_), st_.bool_facts.end());
  }
}

void BindingScope::set(const Var &v, const ConstIntBound &bound, const Expr &value) {
  auto it = st_.vars.find(v.get());
  saved_.emplace_back(v.get(), it == st_.vars.end() ? std::nullopt : std::optional<VarInfo>(it->second));
  st_.vars[v.get()] = VarInfo{v, intersect(bound, everything(v.type())), value};
}

void BindingScope::tighten(const Var &v, const ConstIntBound &bound) {
  auto it = st_.vars.find(v.get());
  VarInfo info = it == st_.vars.end() ? VarInfo{v, everything(v.type()), Expr()} : it->second;
  const ConstIntBound b = intersect(info.bound, bound);
  if (b.min_value > b.max_value) return;  // contradictory: the code under it never runs
  set(v, b, info.value);
}

void BindingScope::add_fact(const LinearForm &form) {
  if (!form.ok) return;
  st_.linear_facts.push_back(LinearFact{nullptr, form});
  const VariableNode *v;
  ConstIntBound b;
  if (single_var_bound(form, &v, &b)) tighten(Var(form.terms[0].atom), b);
}

void BindingScope::add_fact(const Expr &cond, bool value) { st_.bool_facts.push_back(BoolFact{cond, value}); }

void BindingScope::assume(const Expr &cond, bool truth) {
  if (!cond.defined() || !cond.type().is_bool() || !cond.type().is_scalar() || const_int(cond)) return;
  if (const auto *c = cond.as<CallNode>(); c && c->name == intrinsic::kLikely && c->args.size() == 1) {
    assume(c->args[0], truth);
    return;
  }
  if (const auto *n = cond.as<NotNode>()) {
    assume(n->a, !truth);
    return;
  }
  if (truth) {
    if (const auto *a = cond.as<AndNode>()) {
      assume(a->a, true);
      assume(a->b, true);
      return;
    }
  } else if (const auto *o = cond.as<OrNode>()) {
    assume(o->a, false);
    assume(o->b, false);
    return;
  }
  add_fact(cond, truth);
  // Linear facts: each comparison as form <= 0.
  Expr a, b;
  int64_t shift = 0;
  bool both = false;  // equality: a - b <= 0 and b - a <= 0
  if (const auto *op = cond.as<LTNode>()) {
    a = truth ? op->a : op->b, b = truth ? op->b : op->a, shift = truth ? 1 : 0;
  } else if (const auto *op = cond.as<LENode>()) {
    a = truth ? op->a : op->b, b = truth ? op->b : op->a, shift = truth ? 0 : 1;
  } else if (const auto *op = cond.as<GTNode>()) {
    a = truth ? op->b : op->a, b = truth ? op->a : op->b, shift = truth ? 1 : 0;
  } else if (const auto *op = cond.as<GENode>()) {
    a = truth ? op->b : op->a, b = truth ? op->a : op->b, shift = truth ? 0 : 1;
  } else if (const auto *op = cond.as<EQNode>(); op && truth) {
    a = op->a, b = op->b, both = true;
  } else if (const auto *op = cond.as<NENode>(); op && !truth) {
    a = op->a, b = op->b, both = true;
  } else {
    return;
  }
  if (!no_overflow_int(a.type()) || !a.type().is_scalar()) return;
  LinearForm f(a.type());
  collect_linear(a, 1, &f);
  collect_linear(b, -1, &f);
  merge_div_mod(&f);
  f.add_constant(shift);
  if (!f.ok) return;
  std::vector<LinearForm> forms{f};
  if (both) {
    forms.push_back(f);
    forms.back().negate();
  }
  for (const auto &form : forms) add_fact(form);
}

std::optional<bool> prove_le0(const AnalyzerState &st, const LinearForm &q) {
  if (!q.ok) return std::nullopt;
  const ConstIntBound b = linear_bound(st, q);
  if (b.max_value <= 0) return true;
  if (b.min_value >= 1) return false;
  for (const auto &fact : st.linear_facts) {
    if (fact.form.type != q.type) continue;
    LinearForm r = q;  // q - f <= 0 and f <= 0 give q <= 0
    r.add(fact.form, -1);
    if (r.ok && linear_bound(st, r).max_value <= 0) return true;
    LinearForm s = q;  // q + f >= 1 and f <= 0 give q >= 1
    s.add(fact.form, 1);
    if (s.ok && linear_bound(st, s).min_value >= 1) return false;
  }
  return std::nullopt;
}

namespace {

// Node count of a small scalar integer index expression (variables, constants, + - and
// multiplication, floor division and modulo by constants); -1 for anything else.
int index_size(const Expr &e) {
  if (!e.type().is_int() || !e.type().is_scalar()) return -1;
  if (e.as<IntImmNode>() || e.as<VariableNode>()) return 1;
  auto bin = [](const Expr &a, const Expr &b, bool b_const) {
    if (b_const && !b.as<IntImmNode>()) return -1;
    int x = index_size(a), y = index_size(b);
    return x < 0 || y < 0 ? -1 : x + y + 1;
  };
  if (const auto *n = e.as<AddNode>()) return bin(n->a, n->b, false);
  if (const auto *n = e.as<SubNode>()) return bin(n->a, n->b, false);
  if (const auto *n = e.as<MulNode>()) return bin(n->a, n->b, true);
  if (const auto *n = e.as<FloorDivNode>()) return bin(n->a, n->b, true);
  if (const auto *n = e.as<FloorModNode>()) return bin(n->a, n->b, true);
  return -1;
}

}  // namespace

bool is_cheap(const Expr &e) {
  if (!e.defined() || e.type().is_handle()) return false;
  if (e.as<IntImmNode>() || e.as<FloatImmNode>() || e.as<VariableNode>()) return true;
  if (const auto *b = e.as<BroadcastNode>()) return is_cheap(b->value);
  if (const auto *r = e.as<RampNode>()) return is_cheap(r->base) && r->stride.as<IntImmNode>();
  // Small index arithmetic (a fused loop's floordiv/floormod) is worth substituting: it lets
  // the uses simplify against each other.
  int n = index_size(e);
  return n > 0 && n <= 7;
}

bool uses_var(const Expr &e, const VariableNode *v) {
  VarUseFinder f(v);
  f.visit_expr(e);
  return f.found;
}

bool uses_var(const Stmt &s, const VariableNode *v) {
  VarUseFinder f(v);
  f.visit_stmt(s);
  return f.found;
}

bool has_side_effect(const Expr &e) {
  bool found = false;
  post_order_visit(e, [&found](const IRNode *n) {
    if (n->node_type == NodeType::Call && static_cast<const CallNode *>(n)->kind != CallNode::Kind::PureIntrinsic) {
      found = true;
    }
  });
  return found;
}

}  // namespace kiln::arith::detail
