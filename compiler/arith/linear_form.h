#pragma once
// Linear forms of integer expressions: constant + sum of coeff * atom, where an atom is anything
// that is not an addition, a subtraction, a multiplication by a constant or a constant. Terms keep
// the order in which they first appear, so rebuilt expressions are deterministic.
#include <cstdint>
#include <vector>

#include "compiler/arith/analyzer.h"

namespace kiln::arith::detail {

struct AnalyzerState;

struct LinearTerm {
  Expr atom;
  int64_t coeff;
};

struct LinearForm {
  explicit LinearForm(ir::DataType t) : type(t) {}
  ir::DataType type;
  std::vector<LinearTerm> terms;
  int64_t constant = 0;
  // False once a coefficient overflowed int64 or the form grew too large to be worth rebuilding.
  bool ok = true;

  void add_term(const Expr &atom, int64_t coeff);
  void add_constant(int64_t c);
  // this += o * scale
  void add(const LinearForm &o, int64_t scale);
  void negate() { add_scaled_self(-1); }
  bool is_constant() const { return terms.empty(); }

 private:
  void add_scaled_self(int64_t scale);
};

// Adds scale * e to out.
void collect_linear(const Expr &e, int64_t scale, LinearForm *out);
// Replaces div(x, c) * c * k + mod(x, c) * k pairs by x * k (floor and truncating versions).
void merge_div_mod(LinearForm *f);
// collect_linear(e, 1) followed by merge_div_mod.
LinearForm linear_form(const Expr &e);
// True when every coefficient and the constant can be written as a literal of the form's type.
bool representable(const LinearForm &f);
// Builds positive terms first, then subtracts negative ones, then the constant. Requires ok.
Expr build_linear(const LinearForm &f);
// Whether build_linear(f) would be structurally equal to e, without building it.
bool linear_matches(const LinearForm &f, const Expr &e);
// Bounds of the form from the bounds of its atoms.
ConstIntBound linear_bound(const AnalyzerState &st, const LinearForm &f);

}  // namespace kiln::arith::detail
