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
//   {"op":"cast","dtype":"float16"}
//   {"op":"requantize","out_dtype":"int8","scale":s,"zero_point":z}
//                                      clamp(round(float(x) * s) + z) to out_dtype's range, cast
// Extra inputs come after the anchor's inputs, in chain order, with the dtype the chain has at
// that point.
#include <functional>
#include <string>
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
contracts::Json cast(const std::string &dtype);
contracts::Json requantize(double scale, int64_t zero_point, const std::string &out_dtype);
}  // namespace epilogue

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
