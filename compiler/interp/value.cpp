#include "compiler/interp/value.h"

#include <cmath>
#include <sstream>

#include "compiler/ir/float16.h"

namespace kiln::interp {

using ir::DataType;
using ir::NodeType;

Value::Value(DataType t) : type_(t) {
  KILN_CHECK(t.lanes() >= 1 && t.lanes() <= kMaxLanes, "interpreter: values have 1 to ", kMaxLanes, " lanes, got ",
             t.to_string());
  if (t.lanes() > kInline) heap_.resize(t.lanes(), Lane{0});
}

Value Value::make_int(DataType t, int64_t v) {
  Value r(t);
  const uint64_t w = wrap_int(t, static_cast<uint64_t>(v));
  for (int l = 0; l < t.lanes(); ++l) r[l].u = w;
  return r;
}

Value Value::make_float(DataType t, double v) {
  Value r(t);
  const double w = round_float(t, v);
  for (int l = 0; l < t.lanes(); ++l) r[l].f = w;
  return r;
}

uint64_t Value::true_mask() const {
  uint64_t m = 0;
  for (int l = 0; l < lanes(); ++l) {
    if ((*this)[l].u != 0) m |= uint64_t{1} << l;
  }
  return m;
}

std::string Value::to_string() const {
  std::ostringstream os;
  os.precision(type_.bits() == 64 ? 17 : 9);
  if (lanes() > 1) os << "[";
  for (int l = 0; l < lanes(); ++l) {
    if (l) os << ", ";
    if (type_.is_float()) {
      os << (*this)[l].f;
    } else if (type_.is_int()) {
      os << (*this)[l].i;
    } else {
      os << (*this)[l].u;
    }
  }
  if (lanes() > 1) os << "]";
  return os.str();
}

uint64_t wrap_int(DataType t, uint64_t raw) {
  const int bits = t.bits();
  if (bits >= 64) return raw;
  if (t.is_int()) {
    const int shift = 64 - bits;
    return static_cast<uint64_t>(static_cast<int64_t>(raw << shift) >> shift);
  }
  return raw & ((uint64_t{1} << bits) - 1);
}

double round_float(DataType t, double v) { return t.bits() == 64 ? v : static_cast<double>(static_cast<float>(v)); }

namespace {

// Applies f to every active lane of a and b; a scalar is always active.
template <typename F>
Value map2(DataType rt, const Value &a, const Value &b, uint64_t active, F f) {
  Value r(rt);
  const int n = rt.lanes();
  if (n == 1) {
    r[0] = f(a[0], b[0]);
    return r;
  }
  for (int l = 0; l < n; ++l) {
    if ((active >> l) & 1) r[l] = f(a[l], b[l]);
  }
  return r;
}

Lane int_lane(uint64_t u) {
  Lane l;
  l.u = u;
  return l;
}
Lane bool_lane(bool b) { return int_lane(b ? 1 : 0); }
Lane float_lane(double f) {
  Lane l;
  l.f = f;
  return l;
}

[[noreturn]] void division_by_zero() { throw RuntimeError("integer division by zero"); }

Value signed_op(NodeType op, const Value &a, const Value &b, uint64_t active) {
  const DataType t = a.type();
  const DataType bt = ir::Bool(t.lanes());
  switch (op) {
    case NodeType::Add:
      return map2(t, a, b, active, [t](Lane x, Lane y) { return int_lane(wrap_int(t, x.u + y.u)); });
    case NodeType::Sub:
      return map2(t, a, b, active, [t](Lane x, Lane y) { return int_lane(wrap_int(t, x.u - y.u)); });
    case NodeType::Mul:
      return map2(t, a, b, active, [t](Lane x, Lane y) { return int_lane(wrap_int(t, x.u * y.u)); });
    case NodeType::Div:
      return map2(t, a, b, active, [t](Lane x, Lane y) {
        if (y.i == 0) division_by_zero();
        if (y.i == -1) return int_lane(wrap_int(t, uint64_t{0} - x.u));
        return int_lane(wrap_int(t, static_cast<uint64_t>(x.i / y.i)));
      });
    case NodeType::Mod:
      return map2(t, a, b, active, [](Lane x, Lane y) {
        if (y.i == 0) division_by_zero();
        if (y.i == -1) return int_lane(0);
        return int_lane(static_cast<uint64_t>(x.i % y.i));
      });
    case NodeType::FloorDiv:
      return map2(t, a, b, active, [t](Lane x, Lane y) {
        if (y.i == 0) division_by_zero();
        if (y.i == -1) return int_lane(wrap_int(t, uint64_t{0} - x.u));
        int64_t q = x.i / y.i;
        const int64_t r = x.i % y.i;
        if (r != 0 && ((r < 0) != (y.i < 0))) --q;
        return int_lane(wrap_int(t, static_cast<uint64_t>(q)));
      });
    case NodeType::FloorMod:
      return map2(t, a, b, active, [](Lane x, Lane y) {
        if (y.i == 0) division_by_zero();
        if (y.i == -1) return int_lane(0);
        int64_t r = x.i % y.i;
        if (r != 0 && ((r < 0) != (y.i < 0))) r += y.i;
        return int_lane(static_cast<uint64_t>(r));
      });
    case NodeType::Min:
      return map2(t, a, b, active, [](Lane x, Lane y) { return x.i < y.i ? x : y; });
    case NodeType::Max:
      return map2(t, a, b, active, [](Lane x, Lane y) { return x.i > y.i ? x : y; });
    case NodeType::EQ:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.i == y.i); });
    case NodeType::NE:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.i != y.i); });
    case NodeType::LT:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.i < y.i); });
    case NodeType::LE:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.i <= y.i); });
    case NodeType::GT:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.i > y.i); });
    case NodeType::GE:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.i >= y.i); });
    default:
      break;  // binary nodes only; And and Or take bools, which are unsigned
  }
  throw InternalError(detail::concat("interpreter: ", ir::node_type_name(op), " on ", t.to_string()));
}

// Unsigned integers and bools.
Value unsigned_op(NodeType op, const Value &a, const Value &b, uint64_t active) {
  const DataType t = a.type();
  const DataType bt = ir::Bool(t.lanes());
  switch (op) {
    case NodeType::Add:
      return map2(t, a, b, active, [t](Lane x, Lane y) { return int_lane(wrap_int(t, x.u + y.u)); });
    case NodeType::Sub:
      return map2(t, a, b, active, [t](Lane x, Lane y) { return int_lane(wrap_int(t, x.u - y.u)); });
    case NodeType::Mul:
      return map2(t, a, b, active, [t](Lane x, Lane y) { return int_lane(wrap_int(t, x.u * y.u)); });
    case NodeType::Div:
    case NodeType::FloorDiv:
      return map2(t, a, b, active, [](Lane x, Lane y) {
        if (y.u == 0) division_by_zero();
        return int_lane(x.u / y.u);
      });
    case NodeType::Mod:
    case NodeType::FloorMod:
      return map2(t, a, b, active, [](Lane x, Lane y) {
        if (y.u == 0) division_by_zero();
        return int_lane(x.u % y.u);
      });
    case NodeType::Min:
      return map2(t, a, b, active, [](Lane x, Lane y) { return x.u < y.u ? x : y; });
    case NodeType::Max:
      return map2(t, a, b, active, [](Lane x, Lane y) { return x.u > y.u ? x : y; });
    case NodeType::EQ:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u == y.u); });
    case NodeType::NE:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u != y.u); });
    case NodeType::LT:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u < y.u); });
    case NodeType::LE:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u <= y.u); });
    case NodeType::GT:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u > y.u); });
    case NodeType::GE:
      return map2(bt, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u >= y.u); });
    case NodeType::And:
      return map2(t, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u != 0 && y.u != 0); });
    case NodeType::Or:
      return map2(t, a, b, active, [](Lane x, Lane y) { return bool_lane(x.u != 0 || y.u != 0); });
    default:
      break;  // binary nodes only
  }
  throw InternalError(detail::concat("interpreter: ", ir::node_type_name(op), " on ", t.to_string()));
}

// Floats of type T (float for float16 and float32, double for float64): every operation rounds
// to T, as compiled C code does.
template <typename T>
Value float_op(NodeType op, const Value &a, const Value &b, uint64_t active) {
  const DataType t = a.type();
  const DataType bt = ir::Bool(t.lanes());
  auto arith = [&](auto f) {
    return map2(t, a, b, active, [f](Lane x, Lane y) {
      return float_lane(static_cast<double>(f(static_cast<T>(x.f), static_cast<T>(y.f))));
    });
  };
  auto compare = [&](auto f) { return map2(bt, a, b, active, [f](Lane x, Lane y) { return bool_lane(f(x.f, y.f)); }); };
  switch (op) {
    case NodeType::Add:
      return arith([](T x, T y) -> T { return x + y; });
    case NodeType::Sub:
      return arith([](T x, T y) -> T { return x - y; });
    case NodeType::Mul:
      return arith([](T x, T y) -> T { return x * y; });
    case NodeType::Div:
      return arith([](T x, T y) -> T { return x / y; });
    case NodeType::Mod:
      return arith([](T x, T y) -> T { return std::fmod(x, y); });
    case NodeType::FloorDiv:
      return arith([](T x, T y) -> T { return std::floor(static_cast<T>(x / y)); });
    case NodeType::FloorMod:
      return arith([](T x, T y) -> T {
        const T q = std::floor(static_cast<T>(x / y));
        const T m = q * y;
        return x - m;
      });
    case NodeType::Min:
      return arith([](T x, T y) -> T { return x < y ? x : y; });
    case NodeType::Max:
      return arith([](T x, T y) -> T { return x > y ? x : y; });
    case NodeType::EQ:
      return compare([](double x, double y) { return x == y; });
    case NodeType::NE:
      return compare([](double x, double y) { return x != y; });
    case NodeType::LT:
      return compare([](double x, double y) { return x < y; });
    case NodeType::LE:
      return compare([](double x, double y) { return x <= y; });
    case NodeType::GT:
      return compare([](double x, double y) { return x > y; });
    case NodeType::GE:
      return compare([](double x, double y) { return x >= y; });
    default:
      break;  // binary nodes only; And and Or take no floats
  }
  throw InternalError(detail::concat("interpreter: ", ir::node_type_name(op), " on ", t.to_string()));
}

}  // namespace

Value binary_op(NodeType op, const Value &a, const Value &b, uint64_t active) {
  const DataType t = a.type();
  KILN_CHECK(t == b.type(), "interpreter: ", ir::node_type_name(op), " on ", t.to_string(), " and ",
             b.type().to_string());
  if (t.is_float()) {
    return t.bits() == 64 ? float_op<double>(op, a, b, active) : float_op<float>(op, a, b, active);
  }
  if (t.is_int()) return signed_op(op, a, b, active);
  if (t.code() == DataType::Code::UInt) return unsigned_op(op, a, b, active);
  throw InternalError(detail::concat("interpreter: ", ir::node_type_name(op), " on ", t.to_string()));
}

namespace {

// Converts one float to integer type t (scalar), or throws.
uint64_t float_to_int(DataType from, DataType t, double f) {
  const double tr = std::trunc(f);
  const int bits = t.bits();
  bool ok;
  if (t.is_int()) {
    const double lim = std::ldexp(1.0, bits - 1);
    ok = tr >= -lim && tr < lim;
  } else {
    ok = tr >= 0.0 && tr < std::ldexp(1.0, bits);
  }
  if (!ok) {
    std::ostringstream os;
    os.precision(from.bits() == 64 ? 17 : 9);
    os << "cast of " << f << " (" << from.element_of().to_string() << ") to " << t.element_of().to_string()
       << " is out of range";
    throw RuntimeError(os.str());
  }
  if (t.is_int()) return static_cast<uint64_t>(static_cast<int64_t>(tr));
  return static_cast<uint64_t>(tr);
}

double int_to_float(DataType from, DataType t, Lane v) {
  const bool is_signed = from.is_int();
  if (t.bits() == 64) return is_signed ? static_cast<double>(v.i) : static_cast<double>(v.u);
  const float f = is_signed ? static_cast<float>(v.i) : static_cast<float>(v.u);
  return t.bits() == 16 ? ir::round_to_half(f) : f;
}

double float_to_float(DataType t, double f) {
  if (t.bits() == 64) return f;
  const float g = static_cast<float>(f);
  return t.bits() == 16 ? ir::round_to_half(g) : g;
}

}  // namespace

Value cast_value(DataType t, const Value &v, uint64_t active) {
  const DataType from = v.type();
  KILN_CHECK(from.lanes() == t.lanes(), "interpreter: cast of ", from.to_string(), " to ", t.to_string());
  KILN_CHECK(!t.is_handle() && !from.is_handle(), "interpreter: cast of ", from.to_string(), " to ", t.to_string());
  Value r(t);
  const DataType te = t.element_of();
  for (int l = 0; l < t.lanes(); ++l) {
    if (t.lanes() > 1 && !((active >> l) & 1)) continue;
    const Lane x = v[l];
    if (t.is_bool()) {
      r[l].u = from.is_float() ? (x.f != 0.0) : (x.u != 0);
    } else if (t.is_float()) {
      r[l].f = from.is_float() ? float_to_float(t, x.f) : int_to_float(from, t, x);
    } else if (from.is_float()) {
      r[l].u = float_to_int(from, te, x.f);
    } else {
      r[l].u = wrap_int(te, x.u);
    }
  }
  return r;
}

namespace {

template <typename T>
T apply_math(const std::string &name, const T *x, size_t n) {
  if (n == 1) {
    const T a = x[0];
    if (name == "exp") return std::exp(a);
    if (name == "log") return std::log(a);
    if (name == "sqrt") return std::sqrt(a);
    if (name == "rsqrt") return T(1) / std::sqrt(a);
    if (name == "tanh") return std::tanh(a);
    if (name == "sigmoid") return T(1) / (T(1) + std::exp(-a));
    if (name == "erf") return std::erf(a);
    if (name == "fabs") return std::fabs(a);
    if (name == "floor") return std::floor(a);
    if (name == "ceil") return std::ceil(a);
    if (name == "round") return std::round(a);
    if (name == "nearbyint") return std::nearbyint(a);
    if (name == "sin") return std::sin(a);
    if (name == "cos") return std::cos(a);
    if (name == "tan") return std::tan(a);
    if (name == "asin") return std::asin(a);
    if (name == "acos") return std::acos(a);
    if (name == "atan") return std::atan(a);
    if (name == "sinh") return std::sinh(a);
    if (name == "cosh") return std::cosh(a);
    if (name == "asinh") return std::asinh(a);
    if (name == "acosh") return std::acosh(a);
    if (name == "atanh") return std::atanh(a);
  } else if (n == 2) {
    if (name == "pow") return std::pow(x[0], x[1]);
  } else if (n == 3) {
    if (name == "fma") return std::fma(x[0], x[1], x[2]);
  }
  throw InternalError(detail::concat("interpreter: unknown math intrinsic ", name, " with ", n, " arguments"));
}

}  // namespace

Value math_intrinsic(const std::string &name, const std::vector<Value> &args) {
  KILN_CHECK(!args.empty() && args.size() <= 3, "interpreter: ", name, " with ", args.size(), " arguments");
  const DataType t = args[0].type();
  for (const auto &a : args) {
    KILN_CHECK(a.type() == t && t.is_float(), "interpreter: ", name, " needs float arguments of one type, got ",
               a.type().to_string());
  }
  Value r(t);
  for (int l = 0; l < t.lanes(); ++l) {
    if (t.bits() == 64) {
      double x[3];
      for (size_t i = 0; i < args.size(); ++i) x[i] = args[i][l].f;
      r[l].f = apply_math<double>(name, x, args.size());
    } else {
      float x[3];
      for (size_t i = 0; i < args.size(); ++i) x[i] = static_cast<float>(args[i][l].f);
      r[l].f = apply_math<float>(name, x, args.size());
    }
  }
  return r;
}

}  // namespace kiln::interp
