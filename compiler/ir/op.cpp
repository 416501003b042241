#include "compiler/ir/op.h"

#include <cmath>
#include <limits>

#include "compiler/ir/ir_printer.h"

namespace kiln::ir {

Expr make_const(DataType t, int64_t v) {
  Expr s =
      t.is_float() ? FloatImmNode::make(t.element_of(), static_cast<double>(v)) : IntImmNode::make(t.element_of(), v);
  return t.lanes() > 1 ? BroadcastNode::make(s, t.lanes()) : s;
}

Expr make_const(DataType t, double v) {
  Expr s =
      t.is_float() ? FloatImmNode::make(t.element_of(), v) : IntImmNode::make(t.element_of(), static_cast<int64_t>(v));
  return t.lanes() > 1 ? BroadcastNode::make(s, t.lanes()) : s;
}

Expr make_zero(DataType t) { return make_const(t, int64_t{0}); }
Expr make_one(DataType t) { return make_const(t, int64_t{1}); }
Expr const_true(int lanes) { return make_const(Bool(lanes), int64_t{1}); }
Expr const_false(int lanes) { return make_const(Bool(lanes), int64_t{0}); }

Expr max_value(DataType t) {
  if (t.is_bool()) return make_const(t, int64_t{1});
  if (t.is_int()) {
    return make_const(t, t.bits() == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits() - 1)) - 1);
  }
  if (t.is_uint()) {
    return make_const(t, t.bits() == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << t.bits()) - 1);
  }
  if (t.is_float()) {
    if (t.bits() == 16) return make_const(t, 65504.0);
    if (t.bits() == 32) return make_const(t, static_cast<double>(std::numeric_limits<float>::max()));
    return make_const(t, std::numeric_limits<double>::max());
  }
  throw ExprError("no maximum value for type " + t.to_string());
}

Expr min_value(DataType t) {
  if (t.is_bool() || t.is_uint()) return make_const(t, int64_t{0});
  if (t.is_int()) {
    return make_const(t, t.bits() == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits() - 1)));
  }
  if (t.is_float()) {
    if (t.bits() == 16) return make_const(t, -65504.0);
    if (t.bits() == 32) return make_const(t, -static_cast<double>(std::numeric_limits<float>::max()));
    return make_const(t, std::numeric_limits<double>::lowest());
  }
  throw ExprError("no minimum value for type " + t.to_string());
}

std::optional<int64_t> as_const_int(const Expr &e) {
  if (!e.defined()) return std::nullopt;
  if (const auto *i = e.as<IntImmNode>()) return i->value;
  if (const auto *b = e.as<BroadcastNode>()) return as_const_int(b->value);
  return std::nullopt;
}

std::optional<double> as_const_float(const Expr &e) {
  if (!e.defined()) return std::nullopt;
  if (const auto *f = e.as<FloatImmNode>()) return f->value;
  if (const auto *b = e.as<BroadcastNode>()) return as_const_float(b->value);
  return std::nullopt;
}

bool is_const_int(const Expr &e, int64_t v) {
  auto c = as_const_int(e);
  return c && *c == v;
}

bool is_const(const Expr &e) { return as_const_int(e).has_value() || as_const_float(e).has_value(); }

Expr cast(DataType t, Expr e) {
  if (!e.defined()) throw ExprError("cast of an undefined expression");
  if (e.type() == t) return e;
  if (t.lanes() > 1 && e.type().lanes() == 1) {
    if (auto c = as_const_int(e)) return make_const(t, *c);
    if (auto c = as_const_float(e)) return make_const(t, *c);
    return BroadcastNode::make(cast(t.element_of(), std::move(e)), t.lanes());
  }
  if (e.type().lanes() != t.lanes()) {
    throw ExprError(detail::concat("cannot cast ", e.type().to_string(), " to ", t.to_string(), ": lanes differ"));
  }
  if (t.is_scalar()) {
    if (const auto *i = e.as<IntImmNode>()) return make_const(t, i->value);
    if (const auto *f = e.as<FloatImmNode>()) {
      if (t.is_float()) return make_const(t, f->value);
    }
  }
  return CastNode::make(t, std::move(e));
}

namespace {

bool is_imm(const Expr &e) { return e.as<IntImmNode>() || e.as<FloatImmNode>(); }

// Brings a and b to one type (see operator+).
void match_types(Expr &a, Expr &b, const char *op) {
  if (!a.defined() || !b.defined()) throw ExprError(std::string("operand of '") + op + "' is undefined");
  DataType ta = a.type(), tb = b.type();
  if (ta == tb) return;
  if (ta.is_handle() || tb.is_handle()) {
    throw ExprError(detail::concat("operator '", op, "' on a handle: ", ta.to_string(), ", ", tb.to_string()));
  }
  // Lanes.
  if (ta.lanes() != tb.lanes()) {
    if (ta.lanes() == 1) {
      a = cast(ta.with_lanes(tb.lanes()), a);
    } else if (tb.lanes() == 1) {
      b = cast(tb.with_lanes(ta.lanes()), b);
    } else {
      throw ExprError(
          detail::concat("operator '", op, "' on vectors of different lanes: ", ta.to_string(), ", ", tb.to_string()));
    }
    ta = a.type();
    tb = b.type();
    if (ta == tb) return;
  }
  // An immediate adopts the other side's type, unless that would turn a float into an int.
  auto imm_adopts = [](const Expr &imm, DataType other) { return !(imm.type().is_float() && !other.is_float()); };
  const bool a_imm = is_imm(a) || (a.as<BroadcastNode>() && is_imm(a.as<BroadcastNode>()->value));
  const bool b_imm = is_imm(b) || (b.as<BroadcastNode>() && is_imm(b.as<BroadcastNode>()->value));
  if (b_imm && imm_adopts(b, ta)) {
    b = cast(ta, b);
    return;
  }
  if (a_imm && imm_adopts(a, tb)) {
    a = cast(tb, a);
    return;
  }
  if (ta.is_float() && !tb.is_float()) {
    b = cast(ta, b);
  } else if (!ta.is_float() && tb.is_float()) {
    a = cast(tb, a);
  } else if (ta.bits() < tb.bits()) {
    a = cast(tb, a);
  } else if (tb.bits() < ta.bits()) {
    b = cast(ta, b);
  } else if (ta.is_bool() != tb.is_bool()) {
    if (ta.is_bool())
      a = cast(tb, a);
    else
      b = cast(ta, b);
  } else {
    throw ExprError(detail::concat("operator '", op, "': cannot mix ", ta.to_string(), " and ", tb.to_string(),
                                   " without an explicit cast"));
  }
}

Expr to_bool(Expr e, const char *op) {
  if (!e.defined()) throw ExprError(std::string("operand of '") + op + "' is undefined");
  if (e.type().is_bool()) return e;
  if (e.type().is_handle()) throw ExprError(std::string("operator '") + op + "' on a handle");
  return NENode::make(e, make_zero(e.type()));
}

void require_integer(const Expr &a, const char *op) {
  if (!a.type().is_integer_like()) {
    throw ExprError(detail::concat("operator '", op, "' needs integers, got ", a.type().to_string()));
  }
}

}  // namespace

Expr operator+(Expr a, Expr b) {
  match_types(a, b, "+");
  return AddNode::make(a, b);
}
Expr operator-(Expr a, Expr b) {
  match_types(a, b, "-");
  return SubNode::make(a, b);
}
Expr operator*(Expr a, Expr b) {
  match_types(a, b, "*");
  return MulNode::make(a, b);
}
Expr operator/(Expr a, Expr b) {
  match_types(a, b, "/");
  return DivNode::make(a, b);
}
Expr operator%(Expr a, Expr b) {
  match_types(a, b, "%");
  require_integer(a, "%");
  return ModNode::make(a, b);
}
Expr operator-(Expr a) {
  if (auto c = as_const_int(a); c && a.type().is_scalar()) return make_const(a.type(), -*c);
  if (auto c = as_const_float(a); c && a.type().is_scalar()) return make_const(a.type(), -*c);
  return SubNode::make(make_zero(a.type()), a);
}
Expr truncdiv(Expr a, Expr b) {
  match_types(a, b, "truncdiv");
  require_integer(a, "truncdiv");
  return DivNode::make(a, b);
}
Expr truncmod(Expr a, Expr b) {
  match_types(a, b, "truncmod");
  require_integer(a, "truncmod");
  return ModNode::make(a, b);
}
Expr floordiv(Expr a, Expr b) {
  match_types(a, b, "floordiv");
  require_integer(a, "floordiv");
  return FloorDivNode::make(a, b);
}
Expr floormod(Expr a, Expr b) {
  match_types(a, b, "floormod");
  require_integer(a, "floormod");
  return FloorModNode::make(a, b);
}
Expr min(Expr a, Expr b) {
  match_types(a, b, "min");
  return MinNode::make(a, b);
}
Expr max(Expr a, Expr b) {
  match_types(a, b, "max");
  return MaxNode::make(a, b);
}
Expr operator==(Expr a, Expr b) {
  match_types(a, b, "==");
  return EQNode::make(a, b);
}
Expr operator!=(Expr a, Expr b) {
  match_types(a, b, "!=");
  return NENode::make(a, b);
}
Expr operator<(Expr a, Expr b) {
  match_types(a, b, "<");
  return LTNode::make(a, b);
}
Expr operator<=(Expr a, Expr b) {
  match_types(a, b, "<=");
  return LENode::make(a, b);
}
Expr operator>(Expr a, Expr b) {
  match_types(a, b, ">");
  return GTNode::make(a, b);
}
Expr operator>=(Expr a, Expr b) {
  match_types(a, b, ">=");
  return GENode::make(a, b);
}
Expr operator&&(Expr a, Expr b) {
  a = to_bool(a, "&&");
  b = to_bool(b, "&&");
  match_types(a, b, "&&");
  return AndNode::make(a, b);
}
Expr operator||(Expr a, Expr b) {
  a = to_bool(a, "||");
  b = to_bool(b, "||");
  match_types(a, b, "||");
  return OrNode::make(a, b);
}
Expr operator!(Expr a) { return NotNode::make(to_bool(a, "!")); }

Expr select(Expr cond, Expr t, Expr f) {
  cond = to_bool(cond, "select");
  match_types(t, f, "select");
  if (cond.type().lanes() != t.type().lanes() && cond.type().lanes() == 1 && t.type().lanes() > 1) {
    cond = BroadcastNode::make(cond, t.type().lanes());
  }
  return SelectNode::make(cond, t, f);
}

Expr if_then_else(Expr cond, Expr t, Expr f) {
  cond = to_bool(cond, "if_then_else");
  match_types(t, f, "if_then_else");
  DataType ty = t.type();
  return CallNode::make(ty, intrinsic::kIfThenElse, {cond, t, f}, CallNode::Kind::PureIntrinsic);
}

namespace {

Expr float_intrinsic(const char *name, std::vector<Expr> args) {
  for (auto &a : args) {
    if (!a.defined()) throw ExprError(std::string(name) + ": undefined argument");
  }
  // Integers are promoted to float32 as in numpy's math functions.
  for (auto &a : args) {
    if (!a.type().is_float()) a = cast(Float(32, a.type().lanes()), a);
  }
  for (size_t i = 1; i < args.size(); ++i) match_types(args[0], args[i], name);
  for (size_t i = 1; i < args.size(); ++i) match_types(args[0], args[i], name);
  DataType t = args[0].type();
  return CallNode::make(t, name, std::move(args), CallNode::Kind::PureIntrinsic);
}

}  // namespace

Expr exp(Expr x) { return float_intrinsic("exp", {std::move(x)}); }
Expr log(Expr x) { return float_intrinsic("log", {std::move(x)}); }
Expr sqrt(Expr x) { return float_intrinsic("sqrt", {std::move(x)}); }
Expr rsqrt(Expr x) { return float_intrinsic("rsqrt", {std::move(x)}); }
Expr tanh(Expr x) { return float_intrinsic("tanh", {std::move(x)}); }
Expr sigmoid(Expr x) { return float_intrinsic("sigmoid", {std::move(x)}); }
Expr erf(Expr x) { return float_intrinsic("erf", {std::move(x)}); }
Expr pow(Expr x, Expr y) { return float_intrinsic("pow", {std::move(x), std::move(y)}); }
Expr fabs(Expr x) { return float_intrinsic("fabs", {std::move(x)}); }
Expr floor(Expr x) { return float_intrinsic("floor", {std::move(x)}); }
Expr ceil(Expr x) { return float_intrinsic("ceil", {std::move(x)}); }
Expr round(Expr x) { return float_intrinsic("round", {std::move(x)}); }
Expr fma(Expr a, Expr b, Expr c) { return float_intrinsic("fma", {std::move(a), std::move(b), std::move(c)}); }
Expr nearbyint(Expr x) { return float_intrinsic("nearbyint", {std::move(x)}); }
Expr sin(Expr x) { return float_intrinsic("sin", {std::move(x)}); }
Expr cos(Expr x) { return float_intrinsic("cos", {std::move(x)}); }
Expr tan(Expr x) { return float_intrinsic("tan", {std::move(x)}); }
Expr asin(Expr x) { return float_intrinsic("asin", {std::move(x)}); }
Expr acos(Expr x) { return float_intrinsic("acos", {std::move(x)}); }
Expr atan(Expr x) { return float_intrinsic("atan", {std::move(x)}); }
Expr sinh(Expr x) { return float_intrinsic("sinh", {std::move(x)}); }
Expr cosh(Expr x) { return float_intrinsic("cosh", {std::move(x)}); }
Expr asinh(Expr x) { return float_intrinsic("asinh", {std::move(x)}); }
Expr acosh(Expr x) { return float_intrinsic("acosh", {std::move(x)}); }
Expr atanh(Expr x) { return float_intrinsic("atanh", {std::move(x)}); }

Expr abs(Expr x) {
  if (!x.defined()) throw ExprError("abs: undefined argument");
  if (x.type().is_float()) return fabs(x);
  if (x.type().is_uint() || x.type().is_bool()) return x;
  return select(x < make_zero(x.type()), -x, x);
}

bool is_math_intrinsic(const std::string &n) {
  return n == "exp" || n == "log" || n == "sqrt" || n == "rsqrt" || n == "tanh" || n == "sigmoid" || n == "erf" ||
         n == "pow" || n == "fabs" || n == "floor" || n == "ceil" || n == "round" || n == "fma" || n == "nearbyint" ||
         n == "sin" || n == "cos" || n == "tan" || n == "asin" || n == "acos" || n == "atan" || n == "sinh" ||
         n == "cosh" || n == "asinh" || n == "acosh" || n == "atanh";
}

Expr prefetch(Expr read) {
  const bool ok = read.defined() && (read.as<ProducerLoadNode>() || read.as<LoadNode>()) && read.type().is_scalar();
  if (!ok) throw ExprError("prefetch needs a scalar read of a tensor or buffer");
  return CallNode::make(Int(32), intrinsic::kPrefetch, {std::move(read)}, CallNode::Kind::Intrinsic);
}

bool is_prefetch(const Expr &e) {
  const auto *c = e.as<CallNode>();
  return c && c->name == intrinsic::kPrefetch;
}

Expr likely(Expr cond) {
  cond = to_bool(cond, "likely");
  DataType t = cond.type();
  return CallNode::make(t, intrinsic::kLikely, {cond}, CallNode::Kind::PureIntrinsic);
}

}  // namespace kiln::ir
