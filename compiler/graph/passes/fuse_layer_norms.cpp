#include <map>
#include <optional>
#include <vector>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/match_util.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"

namespace kiln::graph::passes {

namespace {

// The reduced axes of a ReduceMean over the last axis with keepdims, or false.
bool mean_over_last_axis(const Graph &g, const Node &n) {
  if (n.op != "ReduceMean" || n.attr_int("keepdims", 1) == 0) return false;
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    const Value &a = g.value(n.inputs[1]);
    if (!a.is_constant()) return false;
    axes.clear();
    for (double v : tensor_values(a.constant)) axes.push_back(static_cast<int64_t>(v));
  }
  const int64_t rank = g.value(n.inputs[0]).type.rank();
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

struct LayerNormMatch {
  ValueId x = kNoValue, scale = kNoValue, bias = kNoValue;
  double epsilon = 0;
  std::vector<size_t> nodes;  // in order; the last one's output is the normalized value
};

// y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale (+ bias) over the last axis, scale
// and bias constants of the last axis's extent, from the ReduceMean at `k`.
std::optional<LayerNormMatch> match_layer_norm(const Graph &g, const Uses &u, size_t k) {
  const Node &mean = g.nodes()[k];
  if (!mean_over_last_axis(g, mean)) return std::nullopt;
  LayerNormMatch m;
  m.x = mean.inputs[0];
  const TensorType &xt = g.value(m.x).type;
  if (xt.dtype != ir::Float(32) || xt.rank() < 1) return std::nullopt;
  const int64_t c = xt.shape.back();
  auto node = [&](std::optional<size_t> i, const char *op) -> const Node * {
    return i && g.nodes()[*i].op == op ? &g.nodes()[*i] : nullptr;
  };
  auto sub_k = u.only(mean.outputs[0]);
  const Node *sub = node(sub_k, "Sub");
  if (!sub || sub->inputs[0] != m.x || sub->inputs[1] != mean.outputs[0]) return std::nullopt;
  const ValueId d = sub->outputs[0];
  const auto &dr = u.readers[static_cast<size_t>(d)];
  if (dr.size() != 2 || u.is_output[static_cast<size_t>(d)]) return std::nullopt;
  const size_t pow_k = g.nodes()[dr[0]].op == "Pow" ? dr[0] : dr[1], div_k = pow_k == dr[0] ? dr[1] : dr[0];
  const Node *pw = node(pow_k, "Pow");
  if (!pw || pw->inputs[0] != d || !near(scalar_constant(g, pw->inputs[1]), 2.0)) return std::nullopt;
  auto var_k = u.only(pw->outputs[0]);
  if (!var_k || !mean_over_last_axis(g, g.nodes()[*var_k])) return std::nullopt;
  auto add_k = u.only(g.nodes()[*var_k].outputs[0]);
  const Node *add = node(add_k, "Add");
  if (!add) return std::nullopt;
  const std::optional<double> eps = scalar_constant(g, other_operand(*add, g.nodes()[*var_k].outputs[0]));
  if (!eps || *eps < 0) return std::nullopt;
  auto sqrt_k = u.only(add->outputs[0]);
  const Node *sq = node(sqrt_k, "Sqrt");
  if (!sq) return std::nullopt;
  const Node *div = node(u.only(sq->outputs[0]), "Div");
  if (!div || u.only(sq->outputs[0]) != div_k || div->inputs[0] != d || div->inputs[1] != sq->outputs[0])
    return std::nullopt;
  auto last_axis_constant = [&](ValueId v) {
    const Value &val = g.value(v);
    return val.is_constant() && val.type.dtype == ir::Float(32) && val.type.numel() == c && val.type.shape.back() == c;
  };
  auto mul_k = u.only(div->outputs[0]);
  const Node *mul = node(mul_k, "Mul");
  if (!mul) return std::nullopt;
  m.scale = other_operand(*mul, div->outputs[0]);
  if (m.scale == kNoValue || !last_axis_constant(m.scale) || g.value(mul->outputs[0]).type != xt) return std::nullopt;
  m.epsilon = *eps;
  m.nodes = {k, *sub_k, pow_k, *var_k, *add_k, *sqrt_k, div_k, *mul_k};
  auto bias_k = u.only(mul->outputs[0]);
  const Node *bias = node(bias_k, "Add");
  if (bias) {
    const ValueId b = other_operand(*bias, mul->outputs[0]);
    if (b != kNoValue && last_axis_constant(b) && g.value(bias->outputs[0]).type == xt) {
      m.bias = b;
      m.nodes.push_back(*bias_k);
    }
  }
  return m;
}

}  // namespace

Graph fuse_layer_norms(const Graph &g) {
  const Uses u(g);
  std::map<size_t, LayerNormMatch> matches;  // last node -> match
  std::vector<bool> absorbed(g.nodes().size(), false);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    if (absorbed[k]) continue;
    std::optional<LayerNormMatch> m = match_layer_norm(g, u, k);
    if (!m) continue;
    for (size_t r : m->nodes) absorbed[r] = true;
    matches.emplace(m->nodes.back(), *m);
  }
  Rewriter rw(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    auto it = matches.find(k);
    if (it == matches.end()) {
      if (!absorbed[k]) rw.copy(n);
      continue;
    }
    const LayerNormMatch &m = it->second;
    const int64_t c = g.value(m.x).type.shape.back();
    Node ln;
    ln.op = "LayerNormalization";
    ln.name = g.nodes()[m.nodes.front()].name;
    ln.attrs["axis"] = Attribute::of_int(-1);
    ln.attrs["epsilon"] = Attribute::of_float(m.epsilon);
    ln.inputs = {rw.map(m.x), rw.constant(ln.name + "_scale", g.value(m.scale).constant.view(0, {c}))};
    if (m.bias != kNoValue) ln.inputs.push_back(rw.constant(ln.name + "_bias", g.value(m.bias).constant.view(0, {c})));
    const ValueId out = n.outputs[0];
    rw.set(out, rw.add(ln, {g.value(out).name})[0]);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
