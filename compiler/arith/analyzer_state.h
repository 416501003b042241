#pragma once
// What the parts of the analyzer (bounds, rewrite rules, statement walker) share: what is known
// about variables and which conditions are known to hold, with scoped updates.
#include <optional>
#include <unordered_map>
#include <vector>

#include "compiler/arith/analyzer.h"
#include "compiler/arith/linear_form.h"

namespace kiln::arith::detail {

struct VarInfo {
  Var var;  // keeps the variable node alive while it is a key
  ConstIntBound bound;
  Expr value;  // when defined, the variable equals this cheap expression and is replaced by it
};

// A condition known to hold on an overflow-free integer expression: form <= 0. `owner` is the
// variable whose Analyzer::bind introduced it (null for scoped facts of the statement walker).
struct LinearFact {
  const ir::VariableNode *owner;
  LinearForm form;
};

// A boolean expression known to have `value`.
struct BoolFact {
  Expr cond;
  bool value;
};

struct AnalyzerState {
  std::unordered_map<const ir::VariableNode *, VarInfo> vars;
  std::vector<LinearFact> linear_facts;
  std::vector<BoolFact> bool_facts;
};

// Binds variables and adds facts for the lifetime of the scope, then restores the state.
class BindingScope {
 public:
  explicit BindingScope(AnalyzerState &st);
  ~BindingScope();
  BindingScope(const BindingScope &) = delete;
  BindingScope &operator=(const BindingScope &) = delete;

  void set(const Var &v, const ConstIntBound &bound, const Expr &value = Expr());
  // Narrows the known bound of v.
  void tighten(const Var &v, const ConstIntBound &bound);
  void add_fact(const LinearForm &form);
  void add_fact(const Expr &cond, bool value);
  // Records everything known when `cond` has the value `truth` (conjuncts, comparisons).
  void assume(const Expr &cond, bool truth);

 private:
  AnalyzerState &st_;
  std::vector<std::pair<const ir::VariableNode *, std::optional<VarInfo>>> saved_;
  size_t linear_facts_, bool_facts_;
};

// Integers whose arithmetic is assumed not to overflow (int32, int64, as index arithmetic).
inline bool no_overflow_int(ir::DataType t) { return t.is_int() && t.bits() >= 32; }

// The bound of any value of type t.
ConstIntBound everything(ir::DataType t);
ConstIntBound bound_of(const AnalyzerState &st, const Expr &e);
ConstIntBound intersect(const ConstIntBound &a, const ConstIntBound &b);
// Bound of v in [min, min + extent).
ConstIntBound range_bound(const AnalyzerState &st, const Expr &min, const Expr &extent);

// Saturating int64 arithmetic where kNegInf / kPosInf absorb.
int64_t sat_add(int64_t a, int64_t b);
int64_t sat_sub(int64_t a, int64_t b);
int64_t sat_mul(int64_t a, int64_t b);
inline bool is_finite(const ConstIntBound &b) {
  return b.min_value != ConstIntBound::kNegInf && b.max_value != ConstIntBound::kPosInf;
}

// Constants, variables and broadcasts/ramps of them: values worth substituting for a variable.
bool is_cheap(const Expr &e);
// Whether e or s mentions v (buffer variables of loads, stores and allocations included).
bool uses_var(const Expr &e, const ir::VariableNode *v);
bool uses_var(const Stmt &s, const ir::VariableNode *v);
// Whether e calls something that is not a pure intrinsic.
bool has_side_effect(const Expr &e);

// Whether form <= 0 holds (true), form >= 1 holds (false) or neither is known.
std::optional<bool> prove_le0(const AnalyzerState &st, const LinearForm &form);

Expr simplify_expr(AnalyzerState &st, const Expr &e);
Stmt simplify_stmt(AnalyzerState &st, const Stmt &s);

}  // namespace kiln::arith::detail
