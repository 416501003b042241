#include "compiler/ops/epilogue.h"

#include <cmath>
#include <limits>

#include "compiler/ir/error.h"
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

bool is_scalar_op(const std::string &op) {
  return op == "add_scalar" || op == "subtract_scalar" || op == "multiply_scalar" || op == "divide_scalar" ||
         op == "maximum_scalar" || op == "minimum_scalar";
}

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
                            op == "leaky_relu" || op == "hard_sigmoid" || op == "gelu" || is_scalar_op(op);
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
    } else {
      throw OpError(at + ": unknown epilogue op '" + op +
                    "' (bias_add, add, multiply, relu, clip, scale, sigmoid, tanh, add_scalar, subtract_scalar, "
                    "multiply_scalar, divide_scalar, maximum_scalar, minimum_scalar, leaky_relu, prelu, hard_sigmoid, "
                    "hard_swish, silu, gelu, cast, requantize)");
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
  return static_cast<double>(list.is_array() ? list.size() : 0) * elements;
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
