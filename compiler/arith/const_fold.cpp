#include "compiler/arith/const_fold.h"

#include <cmath>
#include <limits>

#include "contracts/error.h"

namespace kiln::arith::detail {

namespace {

using namespace ir;

using Int128 = __int128;

// The bool immediate of comparison `op` on two constants of one type.
template <typename T>
Expr compare(NodeType op, T x, T y) {
  bool r = false;
  switch (op) {
    case NodeType::EQ:
      r = x == y;
      break;
    case NodeType::NE:
      r = x != y;
      break;
    case NodeType::LT:
      r = x < y;
      break;
    case NodeType::LE:
      r = x <= y;
      break;
    case NodeType::GT:
      r = x > y;
      break;
    case NodeType::GE:
      r = x >= y;
      break;
    default:  // only the comparison kinds reach here
      KILN_CHECK(false, "compare: ", node_type_name(op), " is not a comparison");
  }
  return IntImmNode::make(Bool(), r);
}

Expr fold_int(NodeType op, DataType t, int64_t a, int64_t b) {
  const Int128 x = a, y = b;
  Int128 r = 0;
  switch (op) {
    case NodeType::Add:
      r = x + y;
      break;
    case NodeType::Sub:
      r = x - y;
      break;
    case NodeType::Mul:
      r = x * y;
      break;
    case NodeType::Div:
      if (y == 0) return Expr();
      r = x / y;
      break;
    case NodeType::Mod:
      if (y == 0) return Expr();
      r = x % y;
      break;
    case NodeType::FloorDiv:
      if (y == 0) return Expr();
      r = x / y;
      if (x % y != 0 && ((x < 0) != (y < 0))) r -= 1;
      break;
    case NodeType::FloorMod:
      if (y == 0) return Expr();
      r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      break;
    case NodeType::Min:
      r = x < y ? x : y;
      break;
    case NodeType::Max:
      r = x < y ? y : x;
      break;
    case NodeType::EQ:
    case NodeType::NE:
    case NodeType::LT:
    case NodeType::LE:
    case NodeType::GT:
    case NodeType::GE:
      return compare(op, x, y);
    case NodeType::And:
      r = (x != 0) && (y != 0);
      break;
    case NodeType::Or:
      r = (x != 0) || (y != 0);
      break;
    default:
      return Expr();  // not a binary operator
  }
  if (r < int_type_min(t) || r > int_type_max(t)) return Expr();
  return IntImmNode::make(t, static_cast<int64_t>(r));
}

template <typename F>
Expr fold_float_arith(NodeType op, DataType t, F x, F y) {
  F r;
  switch (op) {
    case NodeType::Add:
      r = x + y;
      break;
    case NodeType::Sub:
      r = x - y;
      break;
    case NodeType::Mul:
      r = x * y;
      break;
    case NodeType::Div:
      if (y == 0) return Expr();
      r = x / y;
      break;
    default:
      return Expr();  // the other binary kinds are folded by fold_float or not at all
  }
  if (!std::isfinite(r)) return Expr();
  return FloatImmNode::make(t, static_cast<double>(r));
}

Expr fold_float(NodeType op, DataType t, double x, double y) {
  switch (op) {
    case NodeType::EQ:
    case NodeType::NE:
    case NodeType::LT:
    case NodeType::LE:
    case NodeType::GT:
    case NodeType::GE:
      return compare(op, x, y);
    case NodeType::Min:
    case NodeType::Max:
      if (std::isnan(x) || std::isnan(y)) return Expr();
      return FloatImmNode::make(t, (op == NodeType::Min) == (x < y) ? x : y);
    default:
      break;  // arithmetic, below
  }
  if (!std::isfinite(x) || !std::isfinite(y)) return Expr();
  if (t.bits() == 32) return fold_float_arith<float>(op, t, static_cast<float>(x), static_cast<float>(y));
  if (t.bits() == 64) return fold_float_arith<double>(op, t, x, y);
  return Expr();  // float16 arithmetic is not folded: its rounding is not modelled here
}

}  // namespace

int64_t int_type_min(DataType t) {
  if (t.is_int()) return t.bits() >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits() - 1));
  return 0;
}

int64_t int_type_max(DataType t) {
  if (t.is_bool()) return 1;
  if (t.is_int()) return t.bits() >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits() - 1)) - 1;
  if (t.is_uint()) return t.bits() >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << t.bits()) - 1;
  return 0;
}

std::optional<int64_t> scalar_int(const Expr &e) {
  const auto *i = e.as<IntImmNode>();
  if (!i) return std::nullopt;
  if (i->value < int_type_min(i->type) || i->value > int_type_max(i->type)) return std::nullopt;
  return i->value;
}

std::optional<int64_t> const_int(const Expr &e) {
  if (const auto *b = e.as<BroadcastNode>()) return scalar_int(b->value);
  return scalar_int(e);
}

Expr fold_binary(NodeType op, const Expr &a, const Expr &b) {
  if (!a.defined() || !b.defined() || a.type() != b.type() || !a.type().is_scalar()) return Expr();
  const DataType t = a.type();
  if (t.is_integer_like()) {
    auto x = scalar_int(a), y = scalar_int(b);
    if (!x || !y) return Expr();
    return fold_int(op, t, *x, *y);
  }
  if (t.is_float()) {
    const auto *x = a.as<FloatImmNode>();
    const auto *y = b.as<FloatImmNode>();
    if (!x || !y) return Expr();
    return fold_float(op, t, x->value, y->value);
  }
  return Expr();
}

Expr fold_not(const Expr &a) {
  if (!a.defined() || !a.type().is_bool() || !a.type().is_scalar()) return Expr();
  auto x = scalar_int(a);
  if (!x) return Expr();
  return IntImmNode::make(Bool(), *x == 0);
}

Expr fold_cast(DataType t, const Expr &value) {
  if (!value.defined() || !t.is_scalar() || !value.type().is_scalar()) return Expr();
  if (auto x = scalar_int(value)) {
    if (t.is_bool()) return IntImmNode::make(t, *x != 0);
    if (t.is_integer_like()) {
      if (*x < int_type_min(t) || *x > int_type_max(t)) return Expr();
      return IntImmNode::make(t, *x);
    }
    if (t.is_float() && t.bits() == 32) return FloatImmNode::make(t, static_cast<double>(static_cast<float>(*x)));
    if (t.is_float() && t.bits() == 64) return FloatImmNode::make(t, static_cast<double>(*x));
    return Expr();
  }
  if (const auto *f = value.as<FloatImmNode>()) {
    const double v = f->value;
    if (t.is_bool()) return IntImmNode::make(t, v != 0);
    if (t.is_integer_like()) {
      if (!std::isfinite(v)) return Expr();
      const double r = std::trunc(v);
      // Compare in double against bounds that are exactly representable.
      if (r < static_cast<double>(int_type_min(t)) || r >= std::ldexp(1.0, t.is_int() ? t.bits() - 1 : t.bits()) ||
          r > 9.2e18) {
        return Expr();
      }
      return IntImmNode::make(t, static_cast<int64_t>(r));
    }
    if (t.is_float() && t.bits() == 32) {
      if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max()) return Expr();
      return FloatImmNode::make(t, static_cast<double>(static_cast<float>(v)));
    }
    if (t.is_float() && t.bits() == 64) return FloatImmNode::make(t, v);
  }
  return Expr();
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace kiln::arith::detail
