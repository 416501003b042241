#pragma once
// Epilogues: a chain of elementwise stages applied to an anchor operator's output (bias add, relu,
// clip, residual add, requantize, ...), given as a JSON list of small op descriptors in the
// workload's "epilogue" argument. Every anchor template accepts one; its schedule inlines all
// epilogue stages but the last and computes the anchor inside the last one's output tile loop, so
// the fused operator is a single loop nest.
//
// Descriptors (canonical form):
//   {"op":"bias_add"}                  + bias[channel]; adds an input of shape [channels]
//   {"op":"add"}, {"op":"multiply"}    with a tensor of the output's shape (a residual); adds an input
//   {"op":"relu"}                      max(x, 0)
//   {"op":"clip","max":b,"min":a}      min(max(x, a), b)
//   {"op":"scale","value":v}           x * v
//   {"op":"sigmoid"}, {"op":"tanh"}    float only
//   {"op":"add_scalar","value":v}      x + v; likewise subtract_scalar, multiply_scalar,
//                                      divide_scalar (v not 0), maximum_scalar, minimum_scalar;
//                                      float only
//   {"op":"leaky_relu","alpha":a}      x >= 0 ? x : a * x (a defaults to 0.01)
//   {"op":"prelu"}                     x >= 0 ? x : slope[channel] * x; adds an input of shape
//                                      [channels]
//   {"op":"hard_sigmoid","alpha":a,"beta":b}
//                                      max(0, min(1, a * x + b)) (a, b default to 0.2, 0.5)
//   {"op":"hard_swish"}                x * min(max(x + 3, 0), 6) / 6
//   {"op":"silu"}                      x * sigmoid(x)
//   {"op":"gelu","approximate":"none"} x * (1 + erf(x / sqrt 2)) / 2, or with "tanh" the tanh form
//                                      (these six float only)
//   {"op":"cast","dtype":"float16"}
//   {"op":"requantize","out_dtype":"int8","scale":s,"zero_point":z}
//                                      clamp(round(float(x) * s) + z) to out_dtype's range, cast
//   {"op":"expr","expr":e,"inputs":["full","channel",{"broadcast":[d0,...]},...]}
//                                      any elementwise expression e of the value so far (float
//                                      only); adds one input per "inputs" entry: "full" a tensor
//                                      of the output's shape, "channel" one of shape [channels]
//                                      indexed by the element's channel (like bias_add),
//                                      {"broadcast":dims} one of shape dims, the output's shape
//                                      with some axes 1, read at the element's index with those
//                                      axes at 0 (an attention mask [1,1,S] of scores [H,S,S]). e is
//                                        "x"                     the value so far
//                                        a number                a constant of its dtype
//                                        {"input":k}             input k of this descriptor
//                                        {"op":f,"args":[e,...]} f of its arguments (expr_ops())
//                                      at most 64 nodes; e.g. x * sigmoid(x) + residual:
//                                      {"op":"expr","inputs":["full"],"expr":{"op":"add","args":[
//                                      {"op":"mul","args":["x",{"op":"sigmoid","args":["x"]}]},
//                                      {"input":0}]}}
// Extra inputs come after the anchor's inputs, in chain order, with the dtype the chain has at
// that point.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "contracts/json.h"
#include "compiler/te/tensor.h"

namespace kiln::ops {

namespace epilogue {
contracts::Json bias_add();
contracts::Json add();
contracts::Json multiply();
contracts::Json relu();
contracts::Json clip(double lo, double hi);
contracts::Json scale(double value);
contracts::Json sigmoid();
contracts::Json tanh();
contracts::Json add_scalar(double value);
contracts::Json subtract_scalar(double value);
contracts::Json multiply_scalar(double value);
contracts::Json divide_scalar(double value);
contracts::Json maximum_scalar(double value);
contracts::Json minimum_scalar(double value);
contracts::Json leaky_relu(double alpha = 0.01);
contracts::Json prelu();
contracts::Json hard_sigmoid(double alpha = 0.2, double beta = 0.5);
contracts::Json hard_swish();
contracts::Json silu();
contracts::Json gelu(bool tanh_approximation = false);
contracts::Json cast(const std::string &dtype);
contracts::Json requantize(double scale, int64_t zero_point, const std::string &out_dtype);
// An expression descriptor; `inputs` lists each extra input's kind ("full" or "channel").
contracts::Json expr(const contracts::Json &e, const std::vector<std::string> &inputs = {});
// The kind of an expression input of shape `dims` that broadcasts to the output's shape.
contracts::Json broadcast_input(const std::vector<int64_t> &dims);
}  // namespace epilogue

// The functions an expression descriptor may apply, with their argument counts: unary neg, abs,
// exp, log, sqrt, erf, sigmoid, tanh, relu, reciprocal, floor, ceil; binary add, sub, mul, div,
// max, min, pow; comparisons greater, greater_equal, less, less_equal, equal (a condition, only as
// where's first argument); where(condition, then, else).
const std::vector<std::pair<std::string, int>> &expr_ops();

// The most nodes (functions, "x", numbers and inputs) an expression may have.
inline constexpr int kMaxExprNodes = 64;
// The nodes of an expression: all of them, or (functions_only) its functions, the operations per
// element it computes.
int expr_node_count(const contracts::Json &e, bool functions_only = false);

// An expression of an "expr" descriptor written as a formula, e.g. "add(mul(x, sigmoid(x)), in0)".
std::string expr_string(const contracts::Json &e);

// One kind of descriptor an epilogue list may hold: an example in canonical form and what it does,
// for help (`kiln templates show`).
struct EpilogueOpFormat {
  std::string descriptor;
  std::string meaning;
};
// Every kind, in the order of the list above.
const std::vector<EpilogueOpFormat> &epilogue_formats();

// Which channel of the anchor's output an element belongs to (what a bias is indexed by).
struct ChannelMap {
  int64_t channels = 1;
  std::function<ir::Expr(const std::vector<ir::Var> &)> index;
};

// Validates an epilogue list for an anchor whose output has dtype `in` and returns its canonical
// form. Throws OpError mentioning `where`.
contracts::Json canonical_epilogue(const contracts::Json &list, ir::DataType in, const std::string &where);
// The dtype at the end of the chain.
ir::DataType epilogue_dtype(const contracts::Json &list, ir::DataType in);
// Operations of the chain on `elements` output elements (one per element per stage).
double epilogue_flop(const contracts::Json &list, double elements);
// Builds the stages on `anchor`; appends extra inputs to *inputs. Returns the stages in order
// (empty for an empty list).
std::vector<te::Tensor> build_epilogue(const te::Tensor &anchor, const contracts::Json &list, const ChannelMap &channel,
                                       std::vector<te::Tensor> *inputs);

}  // namespace kiln::ops
