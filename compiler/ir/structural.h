#pragma once
// Structural equality and hashing of IR. Variables bound inside the compared trees (loop, let and
// allocation variables) are matched by position; free variables by identity, or by position too
// when map_free_vars is set. Equal trees hash equally.
#include <cstddef>

#include "compiler/ir/ir.h"

namespace kiln::ir {

bool structural_equal(const Expr &a, const Expr &b, bool map_free_vars = false);
bool structural_equal(const Stmt &a, const Stmt &b, bool map_free_vars = false);
size_t structural_hash(const Expr &e, bool map_free_vars = false);
size_t structural_hash(const Stmt &s, bool map_free_vars = false);

struct StructuralHash {
  size_t operator()(const Expr &e) const { return structural_hash(e); }
};
struct StructuralEqual {
  bool operator()(const Expr &a, const Expr &b) const { return structural_equal(a, b); }
};

}  // namespace kiln::ir
