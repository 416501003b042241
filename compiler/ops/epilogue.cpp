#include "compiler/ops/epilogue.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/ir/error.h"
#include "compiler/ir/op.h"
#include "compiler/ops/registry.h"

namespace kiln::ops {

using contracts::Json;
using namespace ir;

namespace epilogue {
Json bias_add() { return Json::object({{"op", "bias_add"}}); }
Json add() { return Json::object({{"op", "add"}}); }
Json multiply() { return Json::object({{"op", "multiply"}}); }
Json relu() { return Json::object({{"op", "relu"}}); }
Json clip(double lo, double hi) { return Json::object({{"op", "clip"}, {"min", lo}, {"max", hi}}); }
Json scale(double value) { return Json::object({{"op", "scale"}, {"value", value}}); }
Json sigmoid() { return Json::object({{"op", "sigmoid"}}); }
Json tanh() { return Json::object({{"op", "tanh"}}); }
Json cast(const std::string &dtype) { return Json::object({{"op", "cast"}, {"dtype", dtype}}); }
Json add_scalar(double value) { return Json::object({{"op", "add_scalar"}, {"value", value}}); }
Json subtract_scalar(double value) { return Json::object({{"op", "subtract_scalar"}, {"value", value}}); }
Json multiply_scalar(double value) { return Json::object({{"op", "multiply_scalar"}, {"value", value}}); }
Json divide_scalar(double value) { return Json::object({{"op", "divide_scalar"}, {"value", value}}); }
Json maximum_scalar(double value) { return Json::object({{"op", "maximum_scalar"}, {"value", value}}); }
Json minimum_scalar(double value) { return Json::object({{"op", "minimum_scalar"}, {"value", value}}); }
Json leaky_relu(double alpha) { return Json::object({{"op", "leaky_relu"}, {"alpha", alpha}}); }
Json prelu() { return Json::object({{"op", "prelu"}}); }
Json hard_sigmoid(double alpha, double beta) {
  return Json::object({{"op", "hard_sigmoid"}, {"alpha", alpha}, {"beta", beta}});
}
Json hard_swish() { return Json::object({{"op", "hard_swish"}}); }
Json silu() { return Json::object({{"op", "silu"}}); }
Json gelu(bool tanh_approximation) {
  return Json::object({{"op", "gelu"}, {"approximate", tanh_approximation ? "tanh" : "none"}});
}
Json requantize(double scale, int64_t zero_point, const std::string &out_dtype) {
  return Json::object({{"op", "requantize"}, {"out_dtype", out_dtype}, {"scale", scale}, {"zero_point", zero_point}});
}
Json expr(const Json &e, const std::vector<std::string> &inputs) {
  Json in = Json::array();
  for (const auto &k : inputs) in.push_back(k);
  return Json::object({{"op", "expr"}, {"expr", e}, {"inputs", in}});
}
Json broadcast_input(const std::vector<int64_t> &dims) { return Json::object({{"broadcast", Json::array_of(dims)}}); }
}  // namespace epilogue

namespace {

DataType parse_dtype(const std::string &s, const std::string &where) {
  try {
    DataType t = DataType::parse(s);
    if (t.lanes() != 1 || t.is_handle()) throw ExprError(s);
    return t;
  } catch (const ExprError &) {
    throw OpError(where + ": '" + s + "' is not a scalar dtype");
  }
}

double number(const Json &d, const std::string &key, const std::string &where) {
  const Json *v = d.find(key);
  if (!v || !v->is_number()) throw OpError(where + ": needs a number \"" + key + "\"");
  double x = v->as_double();
  if (!std::isfinite(x)) throw OpError(where + ": \"" + key + "\" must be finite");
  return x;
}

void only_keys(const Json &d, std::initializer_list<const char *> keys, const std::string &where) {
  for (const auto &[k, v] : d.as_object()) {
    (void)v;
    bool ok = false;
    for (const char *a : keys) ok = ok || k == a;
    if (!ok) throw OpError(where + ": unknown field \"" + k + "\"");
  }
}

// An expression input's kind: "full", "channel", or {"broadcast":[d0, ...]} (each dimension a
// positive integer; at least one).
Json canonical_input_kind(const Json &k, const std::string &at) {
  if (k.is_string() && (k.as_string() == "full" || k.as_string() == "channel")) return k;
  const Json *b = k.is_object() && k.size() == 1 ? k.find("broadcast") : nullptr;
  if (b && b->is_array() && b->size() > 0) {
    bool ok = true;
    for (const auto &d : b->as_array()) ok = ok && d.is_int() && d.as_int() >= 1;
    if (ok) return Json::object({{"broadcast", *b}});
  }
  throw OpError(at + ": an input kind is \"full\", \"channel\" or {\"broadcast\":[dims]} with positive dims, got " +
                k.dump());
}

bool is_scalar_op(const std::string &op) {
  return op == "add_scalar" || op == "subtract_scalar" || op == "multiply_scalar" || op == "divide_scalar" ||
         op == "maximum_scalar" || op == "minimum_scalar";
}

}  // namespace

const std::vector<std::pair<std::string, int>> &expr_ops() {
  static const std::vector<std::pair<std::string, int>> ops = {
      {"neg", 1},           {"abs", 1},     {"exp", 1},        {"log", 1},   {"sqrt", 1},
      {"erf", 1},           {"sigmoid", 1}, {"tanh", 1},       {"relu", 1},  {"reciprocal", 1},
      {"floor", 1},         {"ceil", 1},    {"add", 2},        {"sub", 2},   {"mul", 2},
      {"div", 2},           {"max", 2},     {"min", 2},        {"pow", 2},   {"greater", 2},
      {"greater_equal", 2}, {"less", 2},    {"less_equal", 2}, {"equal", 2}, {"where", 3}};
  return ops;
}

namespace {

bool is_comparison(const std::string &f) {
  return f == "greater" || f == "greater_equal" || f == "less" || f == "less_equal" || f == "equal";
}

// Checks expression `e` (a value when !condition, a comparison when condition) against `num_inputs`
// extra inputs; returns its canonical form. `nodes` counts the nodes seen.
Json canonical_expr(const Json &e, size_t num_inputs, bool condition, int *nodes, const std::string &at) {
  if (++*nodes > kMaxExprNodes)
    throw OpError(at + ": the expression has more than " + std::to_string(kMaxExprNodes) + " nodes");
  auto value_only = [&](const std::string &what) {
    if (condition) throw OpError(at + ": where's first argument must be a comparison, got " + what);
  };
  if (e.is_string()) {
    if (e.as_string() != "x")
      throw OpError(at + ": unknown name \"" + e.as_string() + "\" in the expression (the value is \"x\")");
    value_only("\"x\"");
    return Json("x");
  }
  if (e.is_number()) {
    value_only(e.dump());
    const double v = e.as_double();
    if (!std::isfinite(v)) throw OpError(at + ": a constant of the expression must be finite");
    return Json(v);
  }
  if (!e.is_object())
    throw OpError(at + ": an expression is \"x\", a number, {\"input\":k} or {\"op\":f,\"args\":[...]}, got " +
                  e.dump());
  if (const Json *k = e.find("input")) {
    only_keys(e, {"input"}, at);
    value_only(e.dump());
    if (!k->is_int() || k->as_int() < 0 || static_cast<size_t>(k->as_int()) >= num_inputs)
      throw OpError(at + ": {\"input\":" + k->dump() + "} is not one of the descriptor's " +
                    std::to_string(num_inputs) + " inputs");
    return Json::object({{"input", k->as_int()}});
  }
  only_keys(e, {"op", "args"}, at);
  const Json *f = e.find("op");
  const Json *args = e.find("args");
  if (!f || !f->is_string() || !args || !args->is_array())
    throw OpError(at + ": an expression node needs a function \"op\" and a list \"args\", got " + e.dump());
  const std::string fn = f->as_string();
  int arity = -1;
  for (const auto &[name, n] : expr_ops()) {
    if (name == fn) arity = n;
  }
  if (arity < 0) {
    std::string names;
    for (const auto &[name, n] : expr_ops()) names += (names.empty() ? "" : ", ") + name;
    throw OpError(at + ": unknown expression function '" + fn + "' (" + names + ")");
  }
  if (static_cast<int>(args->size()) != arity)
    throw OpError(at + ": " + fn + " takes " + std::to_string(arity) + " arguments, got " +
                  std::to_string(args->size()));
  if (is_comparison(fn) != condition)
    throw OpError(at + (condition ? ": where's first argument must be a comparison, got " + fn
                                  : ": the comparison " + fn + " may only be where's first argument"));
  Json out = Json::array();
  for (size_t i = 0; i < args->size(); ++i)
    out.push_back(canonical_expr((*args)[i], num_inputs, fn == "where" && i == 0, nodes, at));
  return Json::object({{"args", out}, {"op", fn}});
}

Expr build_expr(const Json &e, const Expr &x, const std::vector<Expr> &in, DataType dt) {
  if (e.is_string()) return x;
  if (e.is_number()) return make_const(dt, e.as_double());
  if (e.contains("input")) return in[static_cast<size_t>(e["input"].as_int())];
  const std::string f = e["op"].as_string();
  std::vector<Expr> a;
  for (const auto &arg : e["args"].as_array()) a.push_back(build_expr(arg, x, in, dt));
  if (f == "neg") return make_zero(dt) - a[0];
  if (f == "abs") return ir::fabs(a[0]);
  if (f == "exp") return ir::exp(a[0]);
  if (f == "log") return ir::log(a[0]);
  if (f == "sqrt") return ir::sqrt(a[0]);
  if (f == "erf") return ir::erf(a[0]);
  if (f == "sigmoid") return ir::sigmoid(a[0]);
  if (f == "tanh") return ir::tanh(a[0]);
  if (f == "relu") return ir::max(a[0], make_zero(dt));
  if (f == "reciprocal") return make_one(dt) / a[0];
  if (f == "floor") return ir::floor(a[0]);
  if (f == "ceil") return ir::ceil(a[0]);
  if (f == "add") return a[0] + a[1];
  if (f == "sub") return a[0] - a[1];
  if (f == "mul") return a[0] * a[1];
  if (f == "div") return a[0] / a[1];
  if (f == "max") return ir::max(a[0], a[1]);
  if (f == "min") return ir::min(a[0], a[1]);
  if (f == "pow") return ir::pow(a[0], a[1]);
  if (f == "greater") return a[0] > a[1];
  if (f == "greater_equal") return a[0] >= a[1];
  if (f == "less") return a[0] < a[1];
  if (f == "less_equal") return a[0] <= a[1];
  if (f == "equal") return a[0] == a[1];
  return ir::select(a[0], a[1], a[2]);  // where
}

}  // namespace

int expr_node_count(const Json &e, bool functions_only) {
  if (!e.is_object() || !e.contains("args") || !e["args"].is_array()) return functions_only ? 0 : 1;
  int n = 1;
  for (const auto &a : e["args"].as_array()) n += expr_node_count(a, functions_only);
  return n;
}

std::string expr_string(const Json &e) {
  if (e.is_string()) return e.as_string();
  if (e.is_number()) return e.dump();
  if (e.is_object() && e.contains("input")) return "in" + e["input"].dump();
  if (!e.is_object() || !e.contains("op") || !e.contains("args")) return e.dump();
  std::string s = e["op"].is_string() ? e["op"].as_string() : e["op"].dump();
  s += "(";
  for (size_t i = 0; i < e["args"].size(); ++i) s += (i ? ", " : "") + expr_string(e["args"][i]);
  return s + ")";
}

namespace {

// Walks the chain, checking each descriptor; calls f(canonical descriptor, dtype before, dtype after).
template <typename F>
void walk(const Json &list, DataType in, const std::string &where, F f) {
  if (!list.is_array()) throw OpError(where + ": the epilogue must be a list of op descriptors");
  DataType cur = in;
  for (size_t i = 0; i < list.size(); ++i) {
    const Json &d = list[i];
    const std::string at = where + ", epilogue op " + std::to_string(i);
    if (!d.is_object() || !d.contains("op") || !d["op"].is_string()) {
      throw OpError(at + ": expected an object with an \"op\" name, got " + d.dump());
    }
    const std::string op = d["op"].as_string();
    Json canon;
    DataType next = cur;
    const bool float_only = op == "sigmoid" || op == "tanh" || op == "hard_swish" || op == "silu" || op == "prelu" ||
                            op == "leaky_relu" || op == "hard_sigmoid" || op == "gelu" || op == "expr" ||
                            is_scalar_op(op);
    if (float_only && !cur.is_float()) throw OpError(at + ": " + op + " needs a float input");
    if (op == "bias_add" || op == "add" || op == "multiply" || op == "relu" || op == "sigmoid" || op == "tanh" ||
        op == "hard_swish" || op == "silu" || op == "prelu") {
      only_keys(d, {"op"}, at);
      canon = Json::object({{"op", op}});
    } else if (is_scalar_op(op)) {
      only_keys(d, {"op", "value"}, at);
      const double v = number(d, "value", at);
      if (op == "divide_scalar" && v == 0) throw OpError(at + ": divide_scalar by zero");
      canon = Json::object({{"op", op}, {"value", v}});
    } else if (op == "leaky_relu") {
      only_keys(d, {"op", "alpha"}, at);
      canon = epilogue::leaky_relu(d.contains("alpha") ? number(d, "alpha", at) : 0.01);
    } else if (op == "hard_sigmoid") {
      only_keys(d, {"op", "alpha", "beta"}, at);
      canon = epilogue::hard_sigmoid(d.contains("alpha") ? number(d, "alpha", at) : 0.2,
                                     d.contains("beta") ? number(d, "beta", at) : 0.5);
    } else if (op == "gelu") {
      only_keys(d, {"op", "approximate"}, at);
      const Json *a = d.find("approximate");
      if (a && (!a->is_string() || (a->as_string() != "none" && a->as_string() != "tanh"))) {
        throw OpError(at + ": gelu's \"approximate\" is \"none\" or \"tanh\"");
      }
      canon = epilogue::gelu(a && a->as_string() == "tanh");
    } else if (op == "clip") {
      only_keys(d, {"op", "min", "max"}, at);
      double lo = number(d, "min", at), hi = number(d, "max", at);
      if (lo > hi) throw OpError(at + ": clip min is above max");
      canon = epilogue::clip(lo, hi);
    } else if (op == "scale") {
      only_keys(d, {"op", "value"}, at);
      if (!cur.is_float()) throw OpError(at + ": scale needs a float input (use requantize for integers)");
      canon = epilogue::scale(number(d, "value", at));
    } else if (op == "cast") {
      only_keys(d, {"op", "dtype"}, at);
      if (!d.contains("dtype") || !d["dtype"].is_string()) throw OpError(at + ": cast needs a \"dtype\"");
      next = parse_dtype(d["dtype"].as_string(), at);
      canon = epilogue::cast(next.to_string());
    } else if (op == "requantize") {
      only_keys(d, {"op", "scale", "zero_point", "out_dtype"}, at);
      double s = number(d, "scale", at);
      const Json *z = d.find("zero_point");
      if (z && !z->is_int()) throw OpError(at + ": zero_point must be an integer");
      const Json *o = d.find("out_dtype");
      if (o && !o->is_string()) throw OpError(at + ": out_dtype must be a dtype name");
      next = parse_dtype(o ? o->as_string() : "int8", at);
      if (!next.is_int() && !next.is_uint()) throw OpError(at + ": requantize needs an integer out_dtype");
      canon = epilogue::requantize(s, z ? z->as_int() : 0, next.to_string());
    } else if (op == "expr") {
      only_keys(d, {"op", "expr", "inputs"}, at);
      const Json *in = d.find("inputs");
      Json kinds = Json::array();
      if (in) {
        if (!in->is_array())
          throw OpError(at + ": \"inputs\" must be a list of \"full\", \"channel\" or {\"broadcast\":[...]}");
        for (const auto &k : in->as_array()) kinds.push_back(canonical_input_kind(k, at));
      }
      const Json *e = d.find("expr");
      if (!e) throw OpError(at + ": expr needs an \"expr\"");
      int nodes = 0;
      canon = Json::object(
          {{"expr", canonical_expr(*e, kinds.size(), false, &nodes, at)}, {"inputs", kinds}, {"op", "expr"}});
    } else {
      throw OpError(at + ": unknown epilogue op '" + op +
                    "' (bias_add, add, multiply, relu, clip, scale, sigmoid, tanh, add_scalar, subtract_scalar, "
                    "multiply_scalar, divide_scalar, maximum_scalar, minimum_scalar, leaky_relu, prelu, hard_sigmoid, "
                    "hard_swish, silu, gelu, cast, requantize, expr)");
    }
    f(canon, cur, next);
    cur = next;
  }
}

}  // namespace

const std::vector<EpilogueOpFormat> &epilogue_formats() {
  static const std::vector<EpilogueOpFormat> formats = {
      {R"({"op":"bias_add"})", "x + bias[channel]; adds an input of shape [channels]"},
      {R"({"op":"add"})", "x + y, y an input of the output's shape (a residual)"},
      {R"({"op":"multiply"})", "x * y, y an input of the output's shape"},
      {R"({"op":"relu"})", "max(x, 0)"},
      {R"({"op":"clip","max":6.0,"min":0.0})", "min(max(x, min), max)"},
      {R"({"op":"scale","value":0.5})", "x * value (float only)"},
      {R"({"op":"sigmoid"})", "1 / (1 + exp(-x)) (float only)"},
      {R"({"op":"tanh"})", "tanh(x) (float only)"},
      {R"({"op":"add_scalar","value":1.0})", "x + value (float only)"},
      {R"({"op":"subtract_scalar","value":1.0})", "x - value (float only)"},
      {R"({"op":"multiply_scalar","value":2.0})", "x * value (float only)"},
      {R"({"op":"divide_scalar","value":2.0})", "x / value, value not zero (float only)"},
      {R"({"op":"maximum_scalar","value":0.0})", "max(x, value) (float only)"},
      {R"({"op":"minimum_scalar","value":6.0})", "min(x, value) (float only)"},
      {R"({"op":"leaky_relu","alpha":0.01})", "x if x >= 0, else alpha * x; alpha defaults to 0.01 (float only)"},
      {R"({"op":"prelu"})", "x if x >= 0, else slope[channel] * x; adds an input of shape [channels] (float only)"},
      {R"({"op":"hard_sigmoid","alpha":0.2,"beta":0.5})",
       "max(0, min(1, alpha * x + beta)); alpha and beta default to 0.2 and 0.5 (float only)"},
      {R"({"op":"hard_swish"})", "x * min(max(x + 3, 0), 6) / 6 (float only)"},
      {R"({"op":"silu"})", "x * sigmoid(x) (float only)"},
      {R"({"op":"gelu","approximate":"none"})",
       "x * (1 + erf(x / sqrt(2))) / 2; \"tanh\": x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2 (float only)"},
      {R"({"op":"cast","dtype":"float16"})", "x converted to dtype"},
      {R"({"op":"requantize","out_dtype":"int8","scale":0.05,"zero_point":0})",
       "clamp(round(float(x) * scale) + zero_point) to out_dtype's range"},
      {R"({"expr":{"args":[{"args":["x"],"op":"relu"},{"input":0}],"op":"add"},"inputs":["full"],"op":"expr"})",
       "any elementwise expression of x, numbers, {\"input\":k} (inputs \"full\": the output's shape, \"channel\": "
       "[channels], {\"broadcast\":[dims]}: the output's shape with some axes 1) and {\"op\":f,\"args\":[...]}, f one "
       "of neg, abs, exp, log, sqrt, erf, sigmoid, tanh, relu, "
       "reciprocal, floor, ceil, add, sub, mul, div, max, min, pow, where(comparison, a, b) with greater, "
       "greater_equal, less, less_equal, equal (float only, at most 64 nodes)"},
  };
  return formats;
}

Json canonical_epilogue(const Json &list, DataType in, const std::string &where) {
  Json out = Json::array();
  walk(list, in, where, [&](const Json &d, DataType, DataType) { out.push_back(d); });
  return out;
}

DataType epilogue_dtype(const Json &list, DataType in) {
  DataType t = in;
  walk(list, in, "epilogue", [&](const Json &, DataType, DataType next) { t = next; });
  return t;
}

double epilogue_flop(const Json &list, double elements) {
  if (!list.is_array()) return 0;
  double ops = 0;
  for (const auto &d : list.as_array()) {
    const Json *op = d.is_object() ? d.find("op") : nullptr;
    const bool expr = op && op->is_string() && op->as_string() == "expr" && d.contains("expr");
    ops += expr ? std::max(1, expr_node_count(d["expr"], true)) : 1;
  }
  return ops * elements;
}

std::vector<te::Tensor> build_epilogue(const te::Tensor &anchor, const Json &list, const ChannelMap &channel,
                                       std::vector<te::Tensor> *inputs) {
  std::vector<te::Tensor> stages;
  te::Tensor cur = anchor;
  const std::vector<Expr> shape = anchor.shape();
  int n = 0;
  walk(list, anchor.dtype(), "epilogue", [&](const Json &d, DataType dt, DataType next) {
    const std::string op = d["op"].as_string();
    const std::string name = anchor.name() + "." + op + (n ? std::to_string(n) : "");
    ++n;
    te::Tensor prev = cur;
    auto at = [&](const std::vector<Var> &i) { return prev(std::vector<Expr>(i.begin(), i.end())); };
    te::FCompute f;
    if (op == "bias_add") {
      te::Tensor b = te::placeholder({Expr(static_cast<int>(channel.channels))}, dt, name + ".bias");
      inputs->push_back(b);
      f = [=](const std::vector<Var> &i) { return at(i) + b(channel.index(i)); };
    } else if (op == "add" || op == "multiply") {
      te::Tensor r = te::placeholder(shape, dt, name + ".rhs");
      inputs->push_back(r);
      bool mul = op == "multiply";
      f = [=](const std::vector<Var> &i) {
        Expr rhs = r(std::vector<Expr>(i.begin(), i.end()));
        return mul ? at(i) * rhs : at(i) + rhs;
      };
    } else if (op == "relu") {
      f = [=](const std::vector<Var> &i) { return ir::max(at(i), make_zero(dt)); };
    } else if (op == "clip") {
      Expr lo = dt.is_float() ? make_const(dt, d["min"].as_double())
                              : make_const(dt, static_cast<int64_t>(std::ceil(d["min"].as_double())));
      Expr hi = dt.is_float() ? make_const(dt, d["max"].as_double())
                              : make_const(dt, static_cast<int64_t>(std::floor(d["max"].as_double())));
      f = [=](const std::vector<Var> &i) { return ir::min(ir::max(at(i), lo), hi); };
    } else if (op == "scale") {
      Expr v = make_const(dt, d["value"].as_double());
      f = [=](const std::vector<Var> &i) { return at(i) * v; };
    } else if (op == "sigmoid") {
      f = [=](const std::vector<Var> &i) { return ir::sigmoid(at(i)); };
    } else if (op == "tanh") {
      f = [=](const std::vector<Var> &i) { return ir::tanh(at(i)); };
    } else if (is_scalar_op(op)) {
      Expr v = make_const(dt, d["value"].as_double());
      f = [=](const std::vector<Var> &i) {
        Expr x = at(i);
        if (op == "add_scalar") return x + v;
        if (op == "subtract_scalar") return x - v;
        if (op == "multiply_scalar") return x * v;
        if (op == "divide_scalar") return x / v;
        if (op == "maximum_scalar") return ir::max(x, v);
        return ir::min(x, v);
      };
    } else if (op == "leaky_relu") {
      Expr alpha = make_const(dt, d["alpha"].as_double());
      f = [=](const std::vector<Var> &i) {
        Expr x = at(i);
        return ir::select(x >= make_zero(dt), x, x * alpha);
      };
    } else if (op == "prelu") {
      te::Tensor slope = te::placeholder({Expr(static_cast<int>(channel.channels))}, dt, name + ".slope");
      inputs->push_back(slope);
      f = [=](const std::vector<Var> &i) {
        Expr x = at(i);
        return ir::select(x >= make_zero(dt), x, x * slope(channel.index(i)));
      };
    } else if (op == "hard_sigmoid") {
      Expr alpha = make_const(dt, d["alpha"].as_double()), beta = make_const(dt, d["beta"].as_double());
      f = [=](const std::vector<Var> &i) {
        return ir::max(ir::min(at(i) * alpha + beta, make_const(dt, 1.0)), make_zero(dt));
      };
    } else if (op == "hard_swish") {
      f = [=](const std::vector<Var> &i) {
        Expr x = at(i);
        Expr r = ir::min(ir::max(x + make_const(dt, 3.0), make_zero(dt)), make_const(dt, 6.0));
        return x * (r * make_const(dt, 1.0 / 6.0));
      };
    } else if (op == "silu") {
      f = [=](const std::vector<Var> &i) {
        Expr x = at(i);
        return x * ir::sigmoid(x);
      };
    } else if (op == "gelu") {
      const bool tanh_form = d["approximate"].as_string() == "tanh";
      f = [=](const std::vector<Var> &i) {
        Expr x = at(i);
        Expr half_x = x * make_const(dt, 0.5);
        if (tanh_form) {
          Expr inner = (x + x * x * x * make_const(dt, 0.044715)) * make_const(dt, 0.7978845608028654);
          return half_x * (make_const(dt, 1.0) + ir::tanh(inner));
        }
        return half_x * (make_const(dt, 1.0) + ir::erf(x * make_const(dt, 0.7071067811865476)));
      };
    } else if (op == "expr") {
      // Per input: how it is indexed by the output's index (kFull: the same index; kChannel: the
      // element's channel; kBroadcast: the same index with its axes of extent 1 at 0).
      enum Kind { kFull, kChannel, kBroadcast };
      std::vector<te::Tensor> extra;
      std::vector<Kind> kinds;
      std::vector<std::vector<bool>> kept;  // kBroadcast: per axis, whether the input has it
      for (size_t k = 0; k < d["inputs"].size(); ++k) {
        const Json &kind = d["inputs"][k];
        const std::string in_name = name + ".in" + std::to_string(k);
        te::Tensor t;
        kept.emplace_back();
        if (kind.is_object()) {
          const Json &dims = kind["broadcast"];
          if (dims.size() != shape.size())
            throw OpError(name + ": broadcast input " + std::to_string(k) + " " + dims.dump() + " has " +
                          std::to_string(dims.size()) + " axes, the output " + std::to_string(shape.size()));
          std::vector<Expr> bshape;
          for (size_t a = 0; a < shape.size(); ++a) {
            const int64_t e = dims[a].as_int();
            const std::optional<int64_t> o = as_const_int(shape[a]);
            if (e != 1 && (!o || *o != e))
              throw OpError(name + ": broadcast input " + std::to_string(k) + " " + dims.dump() +
                            " does not broadcast to the output's shape: axis " + std::to_string(a));
            kept.back().push_back(e != 1 || (o && *o == 1));
            bshape.push_back(Expr(static_cast<int>(e)));
          }
          t = te::placeholder(bshape, dt, in_name);
          kinds.push_back(kBroadcast);
        } else if (kind.as_string() == "channel") {
          t = te::placeholder({Expr(static_cast<int>(channel.channels))}, dt, in_name);
          kinds.push_back(kChannel);
        } else {
          t = te::placeholder(shape, dt, in_name);
          kinds.push_back(kFull);
        }
        inputs->push_back(t);
        extra.push_back(t);
      }
      const Json e = d["expr"];
      f = [=](const std::vector<Var> &i) {
        std::vector<Expr> in;
        for (size_t k = 0; k < extra.size(); ++k) {
          if (kinds[k] == kChannel) {
            in.push_back(extra[k](channel.index(i)));
          } else if (kinds[k] == kBroadcast) {
            std::vector<Expr> idx;
            for (size_t a = 0; a < i.size(); ++a) idx.push_back(kept[k][a] ? Expr(i[a]) : Expr(0));
            in.push_back(extra[k](idx));
          } else {
            in.push_back(extra[k](std::vector<Expr>(i.begin(), i.end())));
          }
        }
        return build_expr(e, at(i), in, dt);
      };
    } else if (op == "cast") {
      f = [=](const std::vector<Var> &i) { return ir::cast(next, at(i)); };
    } else {  // requantize
      Expr s = make_const(Float(32), d["scale"].as_double());
      Expr z = make_const(Float(32), static_cast<double>(d["zero_point"].as_int()));
      Expr lo = cast(Float(32), min_value(next)), hi = cast(Float(32), max_value(next));
      f = [=](const std::vector<Var> &i) {
        Expr v = ir::round(cast(Float(32), at(i)) * s) + z;
        return cast(next, ir::min(ir::max(v, lo), hi));
      };
    }
    cur = te::compute(shape, f, name, "elemwise");
    stages.push_back(cur);
  });
  return stages;
}

}  // namespace kiln::ops
