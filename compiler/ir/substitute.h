#pragma once
// Substitution of expressions for variables, optionally giving every variable defined inside the
// statement (loop, let and buffer variables) a new node so that the copy can sit next to the
// original (unrolling, loop partitioning, double buffering).
#include <unordered_map>

#include "compiler/ir/ir.h"

namespace kiln::ir {

using VarMap = std::unordered_map<const VariableNode *, Expr>;

Expr substitute(const Expr &e, const VarMap &m);
Stmt substitute(const Stmt &s, const VarMap &m);
// Like substitute, and every variable the statement defines is replaced by a fresh one.
Stmt copy_with_fresh_vars(const Stmt &s, const VarMap &m = {});

}  // namespace kiln::ir
