#pragma once
// Arithmetic analysis: constant integer bounds, simplification and proofs, with known ranges of
// variables (loop variables, let bindings).
#include <cstdint>
#include <limits>
#include <memory>
#include <unordered_map>

#include "compiler/ir/ir.h"

namespace kiln::arith {

using ir::Expr;
using ir::Range;
using ir::Stmt;
using ir::Var;

// Inclusive bounds of an integer expression; kPosInf / kNegInf mean unbounded.
struct ConstIntBound {
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  int64_t min_value = kNegInf;
  int64_t max_value = kPosInf;
};

class Analyzer {
 public:
  Analyzer();
  ~Analyzer();
  Analyzer(const Analyzer &) = delete;
  Analyzer &operator=(const Analyzer &) = delete;

  // From now on, v lies in [r.min, r.min + r.extent).
  void bind(const Var &v, const Range &r);
  // From now on, v equals value (a let binding): simplification may substitute it.
  void bind(const Var &v, const Expr &value);
  // Forgets what is known about v.
  void unbind(const Var &v);

  ConstIntBound const_int_bound(const Expr &e);
  Expr simplify(const Expr &e);
  // True only when cond holds for every value of the bound variables.
  bool can_prove(const Expr &cond);
  bool can_prove_equal(const Expr &a, const Expr &b);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Context-free simplification of an expression.
Expr simplify(const Expr &e);
// Simplifies every expression of a statement, with each loop variable bound to its loop's range
// and let variables to their values; folds constant conditions and removes empty loops.
Stmt simplify(const Stmt &s);

}  // namespace kiln::arith
