#pragma once
// Constant folding of scalar immediates, exact in the node's type: a fold that would overflow the
// type, divide by zero or produce a non-finite float is not made.
#include <cstdint>
#include <optional>

#include "compiler/ir/ir.h"

namespace kiln::arith::detail {

// Range of an integer type (bool is [0, 1]; uint64 is limited to the int64 maximum).
int64_t int_type_min(ir::DataType t);
int64_t int_type_max(ir::DataType t);

// The value of a scalar integer immediate that lies within its type's range.
std::optional<int64_t> scalar_int(const ir::Expr &e);
// The value of an integer immediate or of a broadcast of one, within the element type's range.
std::optional<int64_t> const_int(const ir::Expr &e);

// Folds `op(a, b)` for scalar immediates of one type; undefined when it cannot fold exactly.
// `op` is an arithmetic, comparison or logical node type.
ir::Expr fold_binary(ir::NodeType op, const ir::Expr &a, const ir::Expr &b);
ir::Expr fold_not(const ir::Expr &a);
ir::Expr fold_cast(ir::DataType t, const ir::Expr &value);

// Floor division and modulo of int64 values (b != 0, no INT64_MIN / -1).
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

}  // namespace kiln::arith::detail
