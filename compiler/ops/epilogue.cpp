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
    if (op == "bias_add" || op == "add" || op == "multiply" || op == "relu" || op == "sigmoid" || op == "tanh") {
      only_keys(d, {"op"}, at);
      if ((op == "sigmoid" || op == "tanh") && !cur.is_float()) throw OpError(at + ": " + op + " needs a float input");
      canon = Json::object({{"op", op}});
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
                    "' (bias_add, add, multiply, relu, clip, scale, sigmoid, tanh, cast, requantize)");
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
