#include <map>
#include <optional>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "contracts/json.h"

namespace kiln::graph::passes {

namespace {

using contracts::Json;

// What one elementwise consumer becomes in the anchor's epilogue.
struct Step {
  Json descriptor;
  ValueId extra = kNoValue;  // a tensor the step reads (old graph), if any
};

std::optional<double> scalar_constant(const Graph &g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value &val = g.value(v);
  if (!val.is_constant() || val.type.numel() != 1 || val.type.dtype.is_float16()) return std::nullopt;
  return tensor_values(val.constant)[0];
}

// The epilogue step for node `n` reading `cur` (its only use of it), or nullopt when `n` does not
// fuse.
std::optional<Step> step_for(const Graph &g, const Node &n, ValueId cur) {
  const TensorType &t = g.value(cur).type;
  if (n.outputs.size() != 1 || g.value(n.outputs[0]).type != t) return std::nullopt;
  auto only = [&](const char *op) { return Step{Json::object({{"op", op}})}; };
  if (n.op == "Relu") return only("relu");
  if (n.op == "Sigmoid") return only("sigmoid");
  if (n.op == "Tanh") return only("tanh");
  if (n.op == "HardSwish") return only("hard_swish");
  if (n.op == "HardSigmoid")
    return Step{Json::object(
        {{"op", "hard_sigmoid"}, {"alpha", n.attr_float("alpha", 0.2)}, {"beta", n.attr_float("beta", 0.5)}})};
  if (n.op == "LeakyRelu") return Step{Json::object({{"op", "leaky_relu"}, {"alpha", n.attr_float("alpha", 0.01)}})};
  if (n.op == "Clip") {
    const ValueId lo = n.inputs.size() > 1 ? n.inputs[1] : kNoValue, hi = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    std::optional<double> a = lo == kNoValue ? std::optional<double>(-3.4e38) : scalar_constant(g, lo);
    std::optional<double> b = hi == kNoValue ? std::optional<double>(3.4e38) : scalar_constant(g, hi);
    if (!a || !b) return std::nullopt;
    return Step{Json::object({{"op", "clip"}, {"min", *a}, {"max", *b}})};
  }
  if ((n.op == "Add" || n.op == "Mul") && n.inputs.size() == 2) {
    const ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
    if (n.inputs[0] == n.inputs[1]) return std::nullopt;
    if (std::optional<double> c = scalar_constant(g, other))
      return Step{Json::object({{"op", n.op == "Add" ? "add_scalar" : "multiply_scalar"}, {"value", *c}})};
    if (g.value(other).type == t) return Step{Json::object({{"op", n.op == "Add" ? "add" : "multiply"}}), other};
  }
  return std::nullopt;
}

struct Chain {
  std::vector<size_t> nodes;  // the consumers fused, in order (indices into the old graph)
  Json epilogue = Json::array();
  std::vector<ValueId> extras;
};

}  // namespace

Graph fuse_epilogues(const Graph &g) {
  std::vector<std::vector<size_t>> readers(g.values().size());
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    for (ValueId i : g.nodes()[k].inputs) {
      if (i != kNoValue) readers[static_cast<size_t>(i)].push_back(k);
    }
  }
  std::vector<bool> is_output(g.values().size(), false);
  for (ValueId o : g.outputs()) is_output[static_cast<size_t>(o)] = true;

  // Chains from every 2-D float32 Conv.
  std::map<size_t, Chain> chains;           // anchor index -> chain
  std::map<size_t, size_t> last_of_chain;   // last consumer index -> anchor index
  std::vector<bool> absorbed(g.nodes().size(), false);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    if (n.op != "Conv") continue;
    const TensorType &t = g.value(n.outputs[0]).type;
    if (t.rank() != 4 || t.dtype != ir::Float(32)) continue;
    Chain c;
    ValueId cur = n.outputs[0];
    while (readers[static_cast<size_t>(cur)].size() == 1 && !is_output[static_cast<size_t>(cur)]) {
      const size_t r = readers[static_cast<size_t>(cur)][0];
      if (absorbed[r]) break;  // another anchor's chain took it (a residual add of two convs)
      std::optional<Step> s = step_for(g, g.nodes()[r], cur);
      if (!s) break;
      c.nodes.push_back(r);
      c.epilogue.push_back(s->descriptor);
      if (s->extra != kNoValue) c.extras.push_back(s->extra);
      cur = g.nodes()[r].outputs[0];
    }
    if (c.nodes.empty()) continue;
    for (size_t r : c.nodes) absorbed[r] = true;
    last_of_chain[c.nodes.back()] = k;
    chains.emplace(k, std::move(c));
  }

  Rewriter rw(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    if (chains.count(k)) continue;  // emitted where its chain ends
    auto last = last_of_chain.find(k);
    if (last != last_of_chain.end()) {
      const Node &conv = g.nodes()[last->second];
      const Chain &c = chains.at(last->second);
      Node f;
      f.op = "FusedConv";
      f.name = conv.name;
      f.attrs = conv.attrs;
      f.attrs["epilogue"] = Attribute::of_string(c.epilogue.dump());
      f.inputs = {rw.map(conv.inputs[0]), rw.map(conv.inputs[1]),
                  conv.inputs.size() > 2 ? rw.map(conv.inputs[2]) : kNoValue};
      for (ValueId e : c.extras) f.inputs.push_back(rw.map(e));
      const ValueId out = n.outputs[0];
      rw.set(out, rw.add(f, {g.value(out).name})[0]);
      continue;
    }
    if (absorbed[k]) continue;
    rw.copy(n);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
