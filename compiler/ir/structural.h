#pragma once
// Structural equality and hashing of IR: two trees are equal when they have the same node kinds,
// types and fields. It is the one comparison of IR in Kiln: the simplifier uses it to recognise
// repeated terms (x - x, min(x, x)), passes to compare indices, tests to compare a result with the
// expected IR.
//
// Variables bound inside the compared trees (by Let, LetStmt, For and Allocate, by the axes of a
// Reduce and by the lhs/rhs of its combiner) are matched one-to-one by position, within their
// scope: `for (i, 0, 8) A[i] = 0` equals `for (j, 0, 8) A[j] = 0`. Variables free in the trees are
// matched as FreeVars says. Producers are compared by identity, combiners of reductions by
// structure, floating-point immediates by their bits (0.0 differs from -0.0, a NaN equals a NaN with
// the same bits). Equal trees hash equally.
#include <cstddef>
#include <cstdint>

#include "compiler/ir/ir.h"

namespace kiln::ir {

// How the variables that are free in the compared trees are matched.
enum class FreeVars : uint8_t {
  Same,    // a free variable matches only itself (the same node)
  Mapped,  // free variables are matched one-to-one by first occurrence (alpha-equivalence)
};

bool structural_equal(const Expr &a, const Expr &b, FreeVars free_vars = FreeVars::Same);
bool structural_equal(const Stmt &a, const Stmt &b, FreeVars free_vars = FreeVars::Same);
size_t structural_hash(const Expr &e, FreeVars free_vars = FreeVars::Same);
size_t structural_hash(const Stmt &s, FreeVars free_vars = FreeVars::Same);

// For hash containers keyed by expressions (free variables the same).
struct StructuralHash {
  size_t operator()(const Expr &e) const { return structural_hash(e); }
};
struct StructuralEqual {
  bool operator()(const Expr &a, const Expr &b) const { return structural_equal(a, b); }
};

}  // namespace kiln::ir
