#pragma once
// Structural equality of expressions: same node kinds, types and fields, with variables compared
// by identity. Used to recognise repeated terms (x - x, min(x, x), floordiv/floormod pairs).
#include "compiler/ir/ir.h"

namespace kiln::arith::detail {

bool expr_equal(const ir::Expr &a, const ir::Expr &b);

}  // namespace kiln::arith::detail
