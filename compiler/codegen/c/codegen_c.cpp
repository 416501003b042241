#include "compiler/codegen/c/codegen_c.h"

#include "compiler/codegen/c/c_abi_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "compiler/ir/float16.h"
#include "compiler/ir/ir_printer.h"
#include "compiler/ir/ir_visitor.h"
#include "compiler/ir/op.h"
#include "compiler/lower/make_packed_api.h"
#include "deploy/c_abi.h"

namespace kiln::codegen {

using ir::DataType;
using ir::Expr;
using ir::NodeType;
using ir::Stmt;
using ir::VariableNode;

namespace {

// Allocations up to this size live on the stack; larger ones are malloc'd.
constexpr int64_t kMaxStackBytes = 64 * 1024;

bool is_c_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string sanitize(const std::string &name) {
  std::string s;
  for (char c : name) s += is_c_ident_char(c) ? c : '_';
  if (s.empty()) return "v";
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "v" + s;
  // Leading underscores and the helpers' prefix belong to the implementation and to us.
  if (s[0] == '_' || s.rfind("kiln_", 0) == 0) s = "v" + s;
  return s;
}

// Identifiers a variable may not take: C keywords, the standard names the generated code uses.
const std::unordered_set<std::string> &reserved_names() {
  static const std::unordered_set<std::string> names = {"auto",
                                                        "break",
                                                        "case",
                                                        "char",
                                                        "const",
                                                        "continue",
                                                        "default",
                                                        "do",
                                                        "double",
                                                        "else",
                                                        "enum",
                                                        "extern",
                                                        "float",
                                                        "for",
                                                        "goto",
                                                        "if",
                                                        "inline",
                                                        "int",
                                                        "long",
                                                        "register",
                                                        "restrict",
                                                        "return",
                                                        "short",
                                                        "signed",
                                                        "sizeof",
                                                        "static",
                                                        "struct",
                                                        "switch",
                                                        "typedef",
                                                        "union",
                                                        "unsigned",
                                                        "void",
                                                        "volatile",
                                                        "while",
                                                        "bool",
                                                        "true",
                                                        "false",
                                                        "NULL",
                                                        "INFINITY",
                                                        "NAN",
                                                        "size_t",
                                                        "int8_t",
                                                        "int16_t",
                                                        "int32_t",
                                                        "int64_t",
                                                        "uint8_t",
                                                        "uint16_t",
                                                        "uint32_t",
                                                        "uint64_t",
                                                        "INT64_C",
                                                        "UINT64_C",
                                                        "malloc",
                                                        "free",
                                                        "memcpy",
                                                        "memset",
                                                        "exp",
                                                        "expf",
                                                        "log",
                                                        "logf",
                                                        "sqrt",
                                                        "sqrtf",
                                                        "tanh",
                                                        "tanhf",
                                                        "erf",
                                                        "erff",
                                                        "pow",
                                                        "powf",
                                                        "fabs",
                                                        "fabsf",
                                                        "floor",
                                                        "floorf",
                                                        "ceil",
                                                        "ceilf",
                                                        "round",
                                                        "roundf",
                                                        "fma",
                                                        "fmaf",
                                                        "nearbyint",
                                                        "nearbyintf",
                                                        "sin",
                                                        "sinf",
                                                        "cos",
                                                        "cosf",
                                                        "tan",
                                                        "tanf",
                                                        "asin",
                                                        "asinf",
                                                        "acos",
                                                        "acosf",
                                                        "atan",
                                                        "atanf",
                                                        "sinh",
                                                        "sinhf",
                                                        "cosh",
                                                        "coshf",
                                                        "asinh",
                                                        "asinhf",
                                                        "acosh",
                                                        "acoshf",
                                                        "atanh",
                                                        "atanhf",

                                                        "fmod",
                                                        "fmodf",
                                                        "main",
                                                        "uintptr_t",
                                                        "KilnArg",
                                                        "KilnPackedFunc",
                                                        "KilnParallelBody",
                                                        "KilnRuntimeApi",
                                                        "KilnParamInfo",
                                                        "KilnFunctionInfo",
                                                        "KilnModuleInfo",
                                                        "kKilnOk",
                                                        "kKilnErrorArgument",
                                                        "kKilnErrorAssert",
                                                        "kKilnErrorAlloc"};
  return names;
}

// The C type a value of scalar type t is computed in (float16 is computed as float): the types of
// literals and helper functions, and of CodeGenC::type_name for C.
std::string c_type(DataType t) {
  if (t.is_handle()) return "void*";
  if (t.is_bool()) return "bool";
  if (t.is_float()) return t.bits() == 64 ? "double" : "float";
  return detail::concat(t.is_int() ? "int" : "uint", t.bits(), "_t");
}

// The suffix of per-type helpers: b, i8 ... i64, u8 ... u64, f32, f64.
std::string type_suffix(DataType t) {
  if (t.is_bool()) return "b";
  if (t.is_float()) return t.bits() == 64 ? "f64" : "f32";
  return detail::concat(t.is_int() ? "i" : "u", t.bits());
}

bool is_narrow_int(DataType t) { return t.is_integer_like() && !t.is_bool() && t.bits() < 32; }

std::string int_literal(DataType t, int64_t v) {
  if (t.is_bool()) return v ? "true" : "false";
  if (t.is_uint()) {
    const uint64_t u = static_cast<uint64_t>(v);
    if (t.bits() == 64) return detail::concat("UINT64_C(", u, ")");
    if (t.bits() == 32) return detail::concat(u, "u");
    return detail::concat("((", c_type(t), ")", u, ")");
  }
  if (t.bits() == 64) {
    if (v == std::numeric_limits<int64_t>::min()) return "(-INT64_C(9223372036854775807) - 1)";
    return v < 0 ? detail::concat("(-INT64_C(", -v, "))") : detail::concat("INT64_C(", v, ")");
  }
  if (t.bits() == 32) {
    if (v == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
    return v < 0 ? detail::concat("(", v, ")") : std::to_string(v);
  }
  return detail::concat("((", c_type(t), ")", v, ")");
}

std::string float_literal(DataType t, double v) {
  const bool f64 = t.bits() == 64;
  if (std::isnan(v)) return f64 ? "((double)NAN)" : "NAN";
  if (std::isinf(v)) {
    if (f64) return v > 0 ? "((double)INFINITY)" : "(-(double)INFINITY)";
    return v > 0 ? "INFINITY" : "(-INFINITY)";
  }
  // A float16 immediate stands for the half nearest to its value (computed in float).
  if (!f64) v = t.is_float16() ? ir::round_to_half(static_cast<float>(v)) : static_cast<float>(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, f64 ? "%.17g" : "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (!f64) s += "f";
  return v < 0 || (v == 0 && std::signbit(v)) ? "(" + s + ")" : s;
}

std::string zero_literal(DataType t) {
  if (t.is_float()) return t.bits() == 64 ? "0.0" : "0.0f";
  return t.is_bool() ? "false" : "0";
}

std::string c_string_literal(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '?') {
      out += "\\?";  // no trigraphs
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);  // three octal digits: nothing that follows can join
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Drops one pair of parentheses around the whole text.
std::string strip_parens(const std::string &s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')') --depth;
    if (depth == 0 && i + 1 < s.size()) return s;
  }
  return s.substr(1, s.size() - 2);
}

// An identifier or an integer literal: cheap to evaluate again.
bool is_simple(const std::string &s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_c_ident_char(c)) return false;
  }
  return true;
}

// The helper functions, in the order they are emitted; dependencies come first.
struct Helper {
  std::string key;
  std::string code;
  std::vector<std::string> deps;
};

std::string int_helpers_code(const std::string &op, DataType t) {
  const std::string ty = c_type(t);
  const std::string sfx = type_suffix(t);
  std::ostringstream os;
  os << "static inline " << ty << " kiln_" << op << "_" << sfx << "(" << ty << " a, " << ty << " b) {\n";
  if (op == "floordiv") {
    os << "  if (b == -1) return (" << ty << ")(0 - a);\n"
       << "  " << ty << " q = (" << ty << ")(a / b);\n"
       << "  " << ty << " r = (" << ty << ")(a % b);\n"
       << "  return (r != 0 && ((r < 0) != (b < 0))) ? (" << ty << ")(q - 1) : q;\n";
  } else {
    os << "  if (b == -1) return 0;\n"
       << "  " << ty << " r = (" << ty << ")(a % b);\n"
       << "  return (r != 0 && ((r < 0) != (b < 0))) ? (" << ty << ")(r + b) : r;\n";
  }
  os << "}\n";
  return os.str();
}

const std::vector<Helper> &all_helpers() {
  static const std::vector<Helper> helpers = [] {
    std::vector<Helper> h;
    h.push_back({"f16_to_f32",
                 "static inline float kiln_f16_to_f32(uint16_t h) {\n"
                 "  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;\n"
                 "  uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;\n"
                 "  uint32_t mant = (uint32_t)h & 0x3ffu;\n"
                 "  uint32_t x;\n"
                 "  float f;\n"
                 "  if (exp == 0x1fu) {\n"
                 "    x = sign | 0x7f800000u | (mant << 13);\n"
                 "  } else if (exp != 0) {\n"
                 "    x = sign | ((exp + 112u) << 23) | (mant << 13);\n"
                 "  } else {\n"
                 "    f = (float)mant * 5.9604644775390625e-8f;\n"
                 "    return sign ? -f : f;\n"
                 "  }\n"
                 "  memcpy(&f, &x, sizeof f);\n"
                 "  return f;\n"
                 "}\n",
                 {}});
    h.push_back({"f32_to_f16",
                 "static inline uint16_t kiln_f32_to_f16(float f) {\n"
                 "  uint32_t x, sign, mant, half, rem;\n"
                 "  int32_t exp, e;\n"
                 "  memcpy(&x, &f, sizeof x);\n"
                 "  sign = (x >> 16) & 0x8000u;\n"
                 "  mant = x & 0x7fffffu;\n"
                 "  exp = (int32_t)((x >> 23) & 0xffu);\n"
                 "  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));\n"
                 "  e = exp - 127 + 15;\n"
                 "  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);\n"
                 "  if (e <= 0) {\n"
                 "    uint32_t shift, mid;\n"
                 "    if (e < -10) return (uint16_t)sign;\n"
                 "    mant |= 0x800000u;\n"
                 "    shift = (uint32_t)(14 - e);\n"
                 "    half = mant >> shift;\n"
                 "    rem = mant & ((1u << shift) - 1u);\n"
                 "    mid = 1u << (shift - 1u);\n"
                 "    if (rem > mid || (rem == mid && (half & 1u))) ++half;\n"
                 "    return (uint16_t)(sign | half);\n"
                 "  }\n"
                 "  half = ((uint32_t)e << 10) | (mant >> 13);\n"
                 "  rem = mant & 0x1fffu;\n"
                 "  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;\n"
                 "  return (uint16_t)(sign | half);\n"
                 "}\n",
                 {}});
    h.push_back({"f16_round",
                 "static inline float kiln_f16_round(float f) { return kiln_f16_to_f32(kiln_f32_to_f16(f)); }\n",
                 {"f16_to_f32", "f32_to_f16"}});
    for (int bits : {8, 16, 32, 64}) {
      for (const char *op : {"floordiv", "floormod"}) {
        h.push_back({detail::concat(op, "_i", bits), int_helpers_code(op, ir::Int(bits)), {}});
      }
    }
    h.push_back({"floormod_f32",
                 "static inline float kiln_floormod_f32(float a, float b) { return a - floorf(a / b) * b; }\n",
                 {}});
    h.push_back({"floormod_f64",
                 "static inline double kiln_floormod_f64(double a, double b) { return a - floor(a / b) * b; }\n",
                 {}});
    std::vector<DataType> types = {ir::Bool()};
    for (int bits : {8, 16, 32, 64}) types.push_back(ir::Int(bits));
    for (int bits : {8, 16, 32, 64}) types.push_back(ir::UInt(bits));
    types.push_back(ir::Float(32));
    types.push_back(ir::Float(64));
    for (const char *op : {"min", "max"}) {
      for (DataType t : types) {
        const std::string ty = c_type(t);
        h.push_back({detail::concat(op, "_", type_suffix(t)),
                     detail::concat("static inline ", ty, " kiln_", op, "_", type_suffix(t), "(", ty, " a, ", ty,
                                    " b) { return a ", op == std::string("min") ? "<" : ">", " b ? a : b; }\n"),
                     {}});
      }
    }
    h.push_back(
        {"sigmoid_f32", "static inline float kiln_sigmoid_f32(float x) { return 1.0f / (1.0f + expf(-x)); }\n", {}});
    h.push_back(
        {"sigmoid_f64", "static inline double kiln_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }\n", {}});
    h.push_back({"rsqrt_f32", "static inline float kiln_rsqrt_f32(float x) { return 1.0f / sqrtf(x); }\n", {}});
    h.push_back({"rsqrt_f64", "static inline double kiln_rsqrt_f64(double x) { return 1.0 / sqrt(x); }\n", {}});
    return h;
  }();
  return helpers;
}

// The name of a field of KilnArg, by lower::ArgField.
const char *arg_field_name(int field) {
  static const char *const names[] = {"data", "ndim", "shape", "strides", "dtype_code", "dtype_bits", "dtype_lanes"};
  KILN_CHECK(field >= 0 && field < 7, "C back end: arg_field of field ", field);
  return names[field];
}

}  // namespace

std::string CodeGenC::fresh(const std::string &hint) {
  const std::string base = sanitize(hint);
  std::string name = base;
  for (int i = 1; used_names_.count(name) || reserved_names().count(name); ++i) name = detail::concat(base, "_", i);
  used_names_.insert(name);
  return name;
}

const CodeGenC::Binding &CodeGenC::lookup(const ir::Var &v) const {
  auto it = bound_.find(v.get());
  if (it == bound_.end() || it->second.empty()) {
    throw InternalError(detail::concat("C back end: variable ", v.name(), " is not bound in function ", f_.name));
  }
  return it->second.back();
}

void CodeGenC::need(const std::string &key) {
  for (const auto &h : all_helpers()) {
    if (h.key != key) continue;
    for (const auto &d : h.deps) need(d);
    helpers_.insert(key);
    return;
  }
  throw InternalError("C back end: no helper " + key);
}

std::string CodeGenC::helper_call(const std::string &key, const std::vector<std::string> &args) {
  need(key);
  std::string s = "kiln_" + key + "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + strip_parens(args[i]);
  return s + ")";
}

void CodeGenC::open_lanes(int lanes) {
  KILN_CHECK(lane_.empty(), "C back end: nested lane loops");
  if (lane_name_.empty()) lane_name_ = fresh("lane");
  lane_ = lane_name_;
  line(detail::concat("for (int32_t ", lane_, " = 0; ", lane_, " < ", lanes, "; ++", lane_, ") {"));
  ++indent_;
}

void CodeGenC::close_lanes() {
  --indent_;
  line("}");
  lane_.clear();
}

std::string CodeGenC::expr(const Expr &e) {
  const DataType t = e.type();
  if (t.lanes() > 1 && lane_.empty()) {
    throw InternalError("C back end: vector expression outside a lane loop: " + ir::to_string(e));
  }
  switch (e.node_type()) {
    case NodeType::IntImm:
      return int_literal(t, e.as<ir::IntImmNode>()->value);
    case NodeType::FloatImm: {
      const double v = e.as<ir::FloatImmNode>()->value;
      // A float16 immediate stands for the half nearest to its value.
      return t.is_float16() ? half_literal(ir::round_to_half(static_cast<float>(v))) : float_literal(t, v);
    }
    case NodeType::StringImm:
      return c_string_literal(e.as<ir::StringImmNode>()->value);
    case NodeType::Variable: {
      const Binding &b = lookup(ir::Var(e));
      if (!b.lane_array) return b.text;
      KILN_CHECK(!lane_.empty(), "C back end: vector variable outside a lane loop");
      return b.text + "[" + lane_ + "]";
    }
    case NodeType::Cast:
      return cast(t, e.as<ir::CastNode>()->value);
#define KILN_BINARY_CASE(n)                                     \
  case NodeType::n: {                                           \
    const auto *op = static_cast<const ir::n##Node *>(e.get()); \
    return binary(NodeType::n, op->a, op->b, op->a.type());     \
  }
      KILN_BINARY_NODES(KILN_BINARY_CASE)
#undef KILN_BINARY_CASE
    case NodeType::Not:
      return "(!" + expr(e.as<ir::NotNode>()->a) + ")";
    case NodeType::Select: {
      const auto *op = e.as<ir::SelectNode>();
      const std::string c = expr(op->condition);
      const std::string a = expr(op->true_value);
      const std::string b = expr(op->false_value);
      return "(" + c + " ? " + a + " : " + b + ")";
    }
    case NodeType::Ramp: {
      const auto *op = e.as<ir::RampNode>();
      const std::string base = expr(op->base);
      std::string s;
      if (ir::is_one(op->stride)) {
        s = base + " + " + lane_;
      } else {
        s = base + " + " + lane_ + " * " + expr(op->stride);
      }
      const DataType et = op->base.type();
      return is_narrow_int(et) ? "((" + type_name(et) + ")(" + s + "))" : "(" + s + ")";
    }
    case NodeType::Broadcast:
      return expr(e.as<ir::BroadcastNode>()->value);
    case NodeType::Let: {
      const auto *op = e.as<ir::LetNode>();
      if (conditional_ > 0) {
        // Hoisting would evaluate the value even where the branch is not taken.
        push(op->var, "(" + strip_parens(expr(op->value)) + ")");
      } else {
        const std::string value = expr(op->value);
        const std::string name = fresh(op->var.name());
        line(type_name(op->var.type().element_of()) + " " + name + " = " + strip_parens(value) + ";");
        push(op->var, name);
      }
      const std::string body = expr(op->body);
      pop(op->var);
      return body;
    }
    case NodeType::Call:
      return call(e.as<ir::CallNode>());
    case NodeType::Load:
      return load(e.as<ir::LoadNode>());
    case NodeType::ProducerLoad:
    case NodeType::Reduce:
      throw InternalError(detail::concat("C back end: ", ir::node_type_name(e.node_type()),
                                         " cannot appear in lowered IR (lower the function first)"));
#define KILN_STMT_CASE(n) case NodeType::n:
      KILN_STMT_NODES(KILN_STMT_CASE)
#undef KILN_STMT_CASE
      break;  // statement kinds, which no expression has
  }
  throw InternalError(detail::concat("C back end: unexpected expression ", ir::node_type_name(e.node_type())));
}

std::string CodeGenC::binary(NodeType op, const Expr &ea, const Expr &eb, DataType t) {
  if (t.is_float16()) {
    if (std::string s = half_binary(op, ea, eb); !s.empty()) return s;
  }
  const std::string a = expr(ea);
  const std::string b = expr(eb);
  return binary_text(op, a, b, t);
}

std::string CodeGenC::binary_text(NodeType op, const std::string &a, const std::string &b, DataType t) {
  auto infix = [&](const char *sym) { return "(" + a + " " + sym + " " + b + ")"; };
  auto wrapped = [&](const char *sym) {
    return is_narrow_int(t) ? "((" + type_name(t) + ")(" + a + " " + sym + " " + b + "))" : infix(sym);
  };
  const std::string sfx = type_suffix(t);
  switch (op) {
    case NodeType::Add:
      return wrapped("+");
    case NodeType::Sub:
      return wrapped("-");
    case NodeType::Mul:
      return wrapped("*");
    case NodeType::Div:
      return wrapped("/");
    case NodeType::Mod:
      if (t.is_float()) return math_function("fmod", t) + "(" + strip_parens(a) + ", " + strip_parens(b) + ")";
      return wrapped("%");
    case NodeType::FloorDiv:
      if (t.is_float()) return math_function("floor", t) + "(" + a + " / " + b + ")";
      if (t.is_int()) return helper_call("floordiv_" + sfx, {a, b});
      return wrapped("/");
    case NodeType::FloorMod:
      if (t.is_int() || t.is_float()) return helper_call("floormod_" + sfx, {a, b});
      return wrapped("%");
    case NodeType::Min:
      return helper_call("min_" + sfx, {a, b});
    case NodeType::Max:
      return helper_call("max_" + sfx, {a, b});
    case NodeType::EQ:
      return infix("==");
    case NodeType::NE:
      return infix("!=");
    case NodeType::LT:
      return infix("<");
    case NodeType::LE:
      return infix("<=");
    case NodeType::GT:
      return infix(">");
    case NodeType::GE:
      return infix(">=");
    case NodeType::And:
      return infix("&&");
    case NodeType::Or:
      return infix("||");
    default:
      break;  // only the binary nodes reach here
  }
  throw InternalError(detail::concat("C back end: binary ", ir::node_type_name(op)));
}

std::string CodeGenC::cast(DataType t, const Expr &v) {
  const DataType from = v.type();
  const std::string x = expr(v);
  if (t.is_float16() || from.is_float16()) {
    if (std::string s = half_cast(t.element_of(), from.element_of(), x); !s.empty()) return s;
  }
  if (t.is_bool()) return "(" + x + " != 0)";
  if (t.is_float16()) {
    return helper_call("f16_round", {from.is_float() && from.bits() <= 32 ? x : "(float)" + x});
  }
  if (from.is_float16() && t.is_float() && t.bits() == 32) return x;
  return "((" + type_name(t.element_of()) + ")" + x + ")";
}

std::string CodeGenC::call(const ir::CallNode *op) {
  const std::string &name = op->name;
  const DataType t = op->type;
  if (std::string s = intrinsic_call(op); !s.empty()) return s;
  if (name == ir::intrinsic::kIfThenElse) {
    KILN_CHECK(op->args.size() == 3, "C back end: if_then_else takes 3 arguments");
    const std::string c = expr(op->args[0]);
    ++conditional_;
    const std::string a = expr(op->args[1]);
    const std::string b = expr(op->args[2]);
    --conditional_;
    return "(" + c + " ? " + a + " : " + b + ")";
  }
  if (name == ir::intrinsic::kLikely) {
    KILN_CHECK(op->args.size() == 1, "C back end: likely takes 1 argument");
    return expr(op->args[0]);
  }
  if (ir::is_math_intrinsic(name)) {
    KILN_CHECK(t.is_float(), "C back end: ", name, " of ", t.to_string());
    std::vector<std::string> args;
    for (const auto &a : op->args) {
      KILN_CHECK(a.type() == t, "C back end: ", name, " argument of type ", a.type().to_string());
      args.push_back(strip_parens(expr(a)));
    }
    return math_call(name, t, args);
  }
  if (name == lower::intrinsic::kArgField) return arg_field(op);
  if (name == lower::intrinsic::kIsNull) {
    KILN_CHECK(op->args.size() == 1, "C back end: isnull takes 1 argument");
    return "(" + expr(op->args[0]) + " == NULL)";
  }
  if (name == lower::intrinsic::kIsAligned) {
    KILN_CHECK(op->args.size() == 2, "C back end: is_aligned takes 2 arguments");
    auto bytes = ir::as_const_int(op->args[1]);
    KILN_CHECK(bytes && *bytes > 0, "C back end: is_aligned needs a positive constant");
    return detail::concat("((uintptr_t)", expr(op->args[0]), " % ", *bytes, "u == 0)");
  }
  throw InternalError(detail::concat("C back end: unsupported call ", name, " in function ", f_.name));
}

std::string CodeGenC::math_call(const std::string &name, DataType t, const std::vector<std::string> &args) {
  if (name == "sigmoid" || name == "rsqrt") return helper_call(name + "_" + type_suffix(t), args);
  std::string s = math_function(name, t) + "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i];
  return s + ")";
}

// args[i].field, or args[i].shape[d] / args[i].strides[d].
std::string CodeGenC::arg_field(const ir::CallNode *op) {
  KILN_CHECK(op->args.size() == 3 || op->args.size() == 4, "C back end: arg_field takes 3 or 4 arguments");
  auto i = ir::as_const_int(op->args[1]);
  auto field = ir::as_const_int(op->args[2]);
  KILN_CHECK(i && field, "C back end: arg_field needs a constant index and field");
  std::string s = detail::concat(expr(op->args[0]), "[", *i, "].", arg_field_name(static_cast<int>(*field)));
  if (op->args.size() == 4) s += "[" + strip_parens(expr(op->args[3])) + "]";
  return s;
}

std::string CodeGenC::load(const ir::LoadNode *op) {
  const std::string buf = lookup(op->buffer_var).text;
  std::string s = buf + "[" + strip_parens(expr(op->index)) + "]";
  if (op->type.is_float16()) s = half_load(s);
  if (op->predicate.defined()) {
    const std::string zero = op->type.is_float16() ? half_literal(0.0) : zero_literal(op->type);
    s = "(" + expr(op->predicate) + " ? " + s + " : " + zero + ")";
  }
  return s;
}

void CodeGenC::fail(const std::string &message, const std::string &status) {
  line("kiln_error = " + c_string_literal(message) + ";");
  for (auto it = heap_.rbegin(); it != heap_.rend(); ++it) line("free(" + *it + ");");
  line("return " + status + ";");
}

void CodeGenC::stmt(const Stmt &s) {
  switch (s.node_type()) {
    case NodeType::LetStmt: {
      const auto *op = s.as<ir::LetStmtNode>();
      const DataType t = op->var.type();
      if (t.is_handle()) {
        const std::string src = expr(op->value);
        const DataType pointee = op->var->pointee;
        const std::string name = fresh(op->var.name());
        line(storage_type_name(pointee) + "* " + name + " = " + src + ";");
        push(op->var, name);
      } else if (t.is_vector()) {
        const std::string name = fresh(op->var.name());
        line(detail::concat(type_name(t.element_of()), " ", name, "[", t.lanes(), "];"));
        open_lanes(t.lanes());
        line(name + "[" + lane_ + "] = " + strip_parens(expr(op->value)) + ";");
        close_lanes();
        push(op->var, name, true);
      } else {
        const std::string value = expr(op->value);
        const std::string name = fresh(op->var.name());
        line(type_name(t) + " " + name + " = " + strip_parens(value) + ";");
        push(op->var, name);
      }
      stmt(op->body);
      pop(op->var);
      return;
    }
    case NodeType::AttrStmt: {
      const auto *op = s.as<ir::AttrStmtNode>();
      if (op->key == lower::kKernelBody) {
        kernel_call(op);
      } else {
        stmt(op->body);
      }
      return;
    }
    case NodeType::AssertStmt: {
      const auto *op = s.as<ir::AssertStmtNode>();
      const DataType t = op->condition.type();
      std::string fails;  // when the assertion fails
      if (t.is_vector()) {
        const std::string all = fresh("assert_ok");
        line("bool " + all + " = true;");
        open_lanes(t.lanes());
        line(all + " = " + all + " && " + expr(op->condition) + ";");
        close_lanes();
        fails = "!" + all;
      } else if (const auto *n = op->condition.as<ir::NotNode>()) {
        fails = strip_parens(expr(n->a));
      } else {
        const std::string cond = expr(op->condition);
        fails = "!" + (is_simple(cond) ? cond : "(" + strip_parens(cond) + ")");
      }
      line("if (" + fails + ") {");
      ++indent_;
      fail(op->message, assert_status_);
      --indent_;
      line("}");
      stmt(op->body);
      return;
    }
    case NodeType::Store:
      store(s.as<ir::StoreNode>());
      return;
    case NodeType::Allocate:
      allocate(s.as<ir::AllocateNode>());
      return;
    case NodeType::For:
      loop(s.as<ir::ForNode>());
      return;
    case NodeType::IfThenElse: {
      const auto *op = s.as<ir::IfThenElseNode>();
      line("if (" + strip_parens(expr(op->condition)) + ") {");
      ++indent_;
      stmt(op->then_case);
      --indent_;
      if (op->else_case.defined() && !ir::is_nop(op->else_case)) {
        line("} else {");
        ++indent_;
        stmt(op->else_case);
        --indent_;
      }
      line("}");
      return;
    }
    case NodeType::Block:
      for (const auto &c : s.as<ir::BlockNode>()->stmts) stmt(c);
      return;
    case NodeType::Evaluate: {
      const auto *op = s.as<ir::EvaluateNode>();
      if (ir::is_nop(s) || ir::is_prefetch(op->value)) return;  // a prefetch is a hint: nothing
      if (op->value.type().is_vector()) {
        open_lanes(op->value.type().lanes());
        line("(void)" + expr(op->value) + ";");
        close_lanes();
      } else {
        line("(void)" + expr(op->value) + ";");
      }
      return;
    }
    case NodeType::ProducerStore:
    case NodeType::ProducerRealize:
      throw InternalError(detail::concat("C back end: ", ir::node_type_name(s.node_type()),
                                         " cannot appear in lowered IR (lower the function first)"));
#define KILN_EXPR_CASE(n) case NodeType::n:
      KILN_EXPR_NODES(KILN_EXPR_CASE)
#undef KILN_EXPR_CASE
      break;  // expression kinds, which no statement has
  }
  throw InternalError(detail::concat("C back end: unexpected statement ", ir::node_type_name(s.node_type())));
}

void CodeGenC::store(const ir::StoreNode *op) {
  const std::string buf = lookup(op->buffer_var).text;
  const DataType t = op->value.type();
  auto assign = [&](const std::string &index, const std::string &value) {
    const std::string v = t.is_float16() ? half_store(value) : strip_parens(value);
    return buf + "[" + strip_parens(index) + "] = " + v + ";";
  };
  if (t.is_scalar()) {
    const std::string index = expr(op->index);
    const std::string value = expr(op->value);
    if (op->predicate.defined()) {
      line("if (" + strip_parens(expr(op->predicate)) + ") {");
      ++indent_;
      line(assign(index, value));
      --indent_;
      line("}");
    } else {
      line(assign(index, value));
    }
    return;
  }
  // All lanes are computed before any is stored: the value may read what the store overwrites.
  const int lanes = t.lanes();
  const std::string val = fresh(lookup(op->buffer_var).text + "_val");
  const std::string idx = fresh(lookup(op->buffer_var).text + "_idx");
  const std::string mask = op->predicate.defined() ? fresh(lookup(op->buffer_var).text + "_mask") : "";
  line("{");
  ++indent_;
  line(detail::concat(type_name(t.element_of()), " ", val, "[", lanes, "];"));
  line(detail::concat(type_name(op->index.type().element_of()), " ", idx, "[", lanes, "];"));
  if (!mask.empty()) line(detail::concat("bool ", mask, "[", lanes, "];"));
  open_lanes(lanes);
  line(val + "[" + lane_ + "] = " + strip_parens(expr(op->value)) + ";");
  line(idx + "[" + lane_ + "] = " + strip_parens(expr(op->index)) + ";");
  if (!mask.empty()) line(mask + "[" + lane_ + "] = " + strip_parens(expr(op->predicate)) + ";");
  close_lanes();
  open_lanes(lanes);
  const std::string stmt_text = assign(idx + "[" + lane_ + "]", val + "[" + lane_ + "]");
  line(mask.empty() ? stmt_text : "if (" + mask + "[" + lane_ + "]) " + stmt_text);
  close_lanes();
  --indent_;
  line("}");
}

int64_t CodeGenC::max_array_bytes(const std::string &) { return kMaxStackBytes; }

void CodeGenC::allocate(const ir::AllocateNode *op) {
  const DataType elem = op->dtype.element_of();
  const std::string st = storage_type_name(elem);
  int64_t count = op->dtype.lanes();
  bool constant = true;
  for (const auto &e : op->extents) {
    auto c = ir::as_const_int(e);
    if (!c || *c < 0 || __builtin_mul_overflow(count, *c, &count)) {
      constant = false;
      break;
    }
  }
  const std::string name = fresh(op->buffer_var.name());
  const std::string qualifier = scope_qualifier(op->scope);
  const int64_t limit = max_array_bytes(op->scope);
  const bool fits = constant && count <= limit / std::max<int64_t>(1, elem.bytes());
  if (fits) {
    line(detail::concat(qualifier.empty() ? "" : qualifier + " ", st, " ", name, "[", std::max<int64_t>(count, 1),
                        "];  // ", op->scope));
    push(op->buffer_var, name);
    stmt(op->body);
    pop(op->buffer_var);
    return;
  }
  if (!heap_allocations()) {
    throw UserError(constant ? detail::concat("function ", f_.name, ": the ", op->scope, " allocation ",
                                              op->buffer_var.name(), " takes ", count * elem.bytes(),
                                              " bytes, more than the ", limit, " this target allows")
                             : detail::concat("function ", f_.name, ": the ", op->scope, " allocation ",
                                              op->buffer_var.name(), " has no constant size"));
  }
  std::string size;
  if (constant) {
    size = detail::concat("INT64_C(", count, ")");
  } else {
    for (const auto &e : op->extents) size += (size.empty() ? "" : " * ") + ("(int64_t)" + expr(e));
    if (op->dtype.lanes() > 1) size += detail::concat(" * ", op->dtype.lanes());
  }
  const std::string count_name = fresh(name + "_count");
  line("int64_t " + count_name + " = " + size + ";");
  line(st + "* " + name + " = (" + st + "*)malloc(sizeof(" + st + ") * (size_t)(" + count_name + " > 0 ? " +
       count_name + " : 1));  // " + op->scope);
  line("if (" + name + " == NULL) {");
  ++indent_;
  fail("out of memory allocating " + op->buffer_var.name() + " in " + f_.name, "kKilnErrorAlloc");
  --indent_;
  line("}");
  heap_.push_back(name);
  push(op->buffer_var, name);
  stmt(op->body);
  pop(op->buffer_var);
  heap_.pop_back();
  line("free(" + name + ");");
}

void CodeGenC::loop(const ir::ForNode *op) {
  switch (op->kind) {
    case ir::ForKind::ThreadBinding:
      thread_loop(op);
      return;
    case ir::ForKind::Serial:
      serial_loop(op, "");
      return;
    case ir::ForKind::Parallel:
    case ir::ForKind::Vectorized:
    case ir::ForKind::Unrolled:
      serial_loop(op, std::string("  // ") + ir::for_kind_name(op->kind));
      return;
  }
  throw InternalError(detail::concat("C back end: loop kind ", static_cast<int>(op->kind)));
}

void CodeGenC::serial_loop(const ir::ForNode *op, const std::string &note) {
  const std::string ty = type_name(op->loop_var.type());
  const std::string min = strip_parens(expr(op->min));
  const std::string extent = expr(op->extent);
  const std::string name = fresh(op->loop_var.name());
  std::string end =
      ir::is_zero(op->min) ? strip_parens(extent) : (is_simple(min) ? min : "(" + min + ")") + " + " + extent;
  if (!is_simple(end)) {
    const std::string end_name = fresh(name + "_end");
    line(ty + " " + end_name + " = " + end + ";");
    end = end_name;
  }
  line("for (" + ty + " " + name + " = " + min + "; " + name + " < " + end + "; ++" + name + ") {" + note);
  ++indent_;
  push(op->loop_var, name);
  stmt(op->body);
  pop(op->loop_var);
  --indent_;
  line("}");
}

// The kernel's body: written as a function of its own, called here with the parameters the entry
// point has bound.
void CodeGenC::kernel_call(const ir::AttrStmtNode *op) {
  KILN_CHECK(kernel_.empty(), "C back end: function ", f_.name, " has two kernel bodies");
  std::ostringstream saved;
  std::swap(saved, body_);
  const int saved_indent = indent_;
  const std::string saved_status = assert_status_;
  KILN_CHECK(heap_.empty() && lane_.empty(), "C back end: the kernel of ", f_.name, " is called inside a scope");
  indent_ = 1;
  assert_status_ = "kKilnErrorAssert";
  kernel_ = kernel_function("kiln_kernel", op->body);
  std::swap(saved, body_);
  indent_ = saved_indent;
  assert_status_ = saved_status;
  std::string call = "return kiln_kernel(";
  bool first = true;
  for (const auto &p : f_.params) {
    call += (first ? "" : ", ") + lookup(p.data).text;
    first = false;
  }
  for (const auto &v : f_.size_vars) {
    call += (first ? "" : ", ") + lookup(v).text;
    first = false;
  }
  line(call + ");");
}

std::string CodeGenC::kernel_function(const std::string &name, const Stmt &body) {
  std::vector<std::string> params;
  for (const auto &p : f_.params) params.push_back(pointer_param(p.dtype.element_of(), lookup(p.data).text));
  for (const auto &v : f_.size_vars) params.push_back(type_name(v.type()) + " " + lookup(v).text);
  std::ostringstream os;
  os << kernel_qualifiers() << " " << name << "(";
  for (size_t i = 0; i < params.size(); ++i) os << (i ? ", " : "") << params[i];
  if (params.empty()) os << "void";
  os << ") {\n";
  stmt(body);
  os << body_.str() << "  return 0;\n}\n";
  body_.str("");
  return os.str();
}

std::string CodeGenC::generate() {
  const std::string code = functions();
  std::ostringstream os;
  os << preamble();
  for (const auto &h : all_helpers()) {
    if (helpers_.count(h.key)) os << h.code;
  }
  if (!helpers_.empty()) os << "\n";
  os << code;
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// The hooks, for C

std::string CodeGenC::preamble() {
  return detail::concat("// Kiln C back end: function ", f_.name, ".\n",
                        "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
                        "#include <stdlib.h>\n#include <string.h>\n\n",
                        kCAbiHeaderText, "\nstatic const char *kiln_error = \"\";\n\n");
}

std::string CodeGenC::functions() {
  const lower::PackedFunc packed = lower::make_packed_api(f_);
  const std::string args = fresh("args");
  const std::string num_args = fresh("num_args");
  push(packed.args, args);
  push(packed.num_args, num_args);
  assert_status_ = "kKilnErrorArgument";
  stmt(packed.func.body);
  KILN_CHECK(!kernel_.empty(), "C back end: the entry of ", f_.name, " has no kernel body");
  const std::string entry = body_.str();
  body_.str("");

  std::ostringstream os;
  os << kernel_ << "\n";
  os << "static int32_t kiln_entry(const KilnArg* " << args << ", int32_t " << num_args << ") {\n" << entry << "}\n\n";
  os << "int32_t " << packed.symbol
     << "(const KilnArg* args, int32_t num_args) { return kiln_entry(args, num_args); }\n\n";
  os << "static const char *kiln_last_error(void) { return kiln_error; }\n\n";
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const ir::Buffer &p = f_.params[i];
    if (p.shape.empty()) continue;
    os << "static const int64_t kiln_shape_" << i << "[] = {";
    for (size_t d = 0; d < p.shape.size(); ++d) {
      auto c = ir::as_const_int(p.shape[d]);
      os << (d ? ", " : "") << (c ? *c : -1);
    }
    os << "};\n";
  }
  if (!f_.params.empty()) {
    os << "static const KilnParamInfo kiln_params[] = {\n";
    for (size_t i = 0; i < f_.params.size(); ++i) {
      const ir::Buffer &p = f_.params[i];
      os << "  {" << c_string_literal(p.name) << ", " << p.shape.size() << ", " << static_cast<int>(p.dtype.code())
         << ", " << p.dtype.bits() << ", " << p.dtype.lanes() << ", "
         << (p.shape.empty() ? std::string("NULL") : detail::concat("kiln_shape_", i)) << "},\n";
    }
    os << "};\n";
  }
  os << "static const KilnFunctionInfo kiln_function = {" << c_string_literal(f_.name) << ", "
     << c_string_literal(packed.signature) << ", kiln_entry, " << f_.params.size() << ", "
     << (f_.params.empty() ? "NULL" : "kiln_params") << "};\n";
  os << "static const KilnFunctionInfo *const kiln_functions[] = {&kiln_function};\n";
  os << "static const KilnRuntimeApi *kiln_runtime_api = NULL;\n";
  os << "const KilnModuleInfo " << KILN_MODULE_INFO_SYMBOL << " = {" << KILN_ABI_VERSION
     << ", 1, kiln_functions, kiln_last_error, &kiln_runtime_api, \"c\"};\n";
  return os.str();
}

std::string CodeGenC::kernel_qualifiers() { return "static int32_t"; }

std::string CodeGenC::pointer_param(DataType elem, const std::string &name) {
  return storage_type_name(elem) + "* restrict " + name;
}

std::string CodeGenC::type_name(DataType t) { return c_type(t); }

std::string CodeGenC::half_literal(double v) { return float_literal(ir::Float(16), v); }

std::string CodeGenC::half_load(const std::string &access) { return helper_call("f16_to_f32", {access}); }

std::string CodeGenC::half_store(const std::string &value) { return helper_call("f32_to_f16", {value}); }

std::string CodeGenC::half_cast(DataType /*to*/, DataType /*from*/, const std::string & /*x*/) { return ""; }

std::string CodeGenC::half_binary(NodeType /*op*/, const Expr & /*a*/, const Expr & /*b*/) { return ""; }

std::string CodeGenC::storage_type_name(DataType t) { return t.is_float16() ? "uint16_t" : type_name(t.element_of()); }

std::string CodeGenC::math_function(const std::string &name, DataType t) { return t.bits() == 64 ? name : name + "f"; }

std::string CodeGenC::intrinsic_call(const ir::CallNode *op) {
  if (op->name == ir::intrinsic::kSyncThreads) {
    throw UserError(detail::concat("function ", f_.name,
                                   ": C back end cannot run thread loops with barriers; use the interpreter or CUDA"));
  }
  return "";
}

void CodeGenC::thread_loop(const ir::ForNode *op) { serial_loop(op, "  // " + op->thread_tag); }

std::string CodeGenC::scope_qualifier(const std::string &) { return ""; }

std::string codegen_c(const ir::LoweredFunc &f) { return CodeGenC(f).generate(); }

}  // namespace kiln::codegen
