#include <vector>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"

namespace kiln::graph::passes {

namespace {

// Whether a ConvNCHWc's epilogue reads no extra tensor (a residual).
bool epilogue_without_extras(const Node &n) {
  contracts::Json j;
  try {
    j = contracts::Json::parse(n.attr_string("epilogue", "[]"));
  } catch (const std::exception &) {
    return false;
  }
  return j.is_array() && detail::epilogue_inputs(j) == 0;
}

bool all_equal(const std::vector<int64_t> &v, int64_t x) {
  for (int64_t e : v) {
    if (e != x) return false;
  }
  return true;
}

// Whether `n` is a 1x1 ConvNCHWc (stride 1, no padding) whose epilogue reads no extra tensor.
bool is_expansion(const Graph &g, const Node &n) {
  if (n.op != "ConvNCHWc" || n.attr_int("depthwise", 0) != 0 || n.inputs.size() > 3 || n.outputs.size() != 1)
    return false;
  const TensorType &w = g.value(n.inputs[1]).type;
  return w.rank() == 6 && w.shape[2] == 1 && w.shape[3] == 1 && all_equal(n.attr_ints("strides", {1, 1}), 1) &&
         all_equal(n.attr_ints("pads", {0, 0, 0, 0}), 0) && epilogue_without_extras(n);
}

bool is_depthwise(const Node &n) {
  return n.op == "ConvNCHWc" && n.attr_int("depthwise", 0) != 0 && n.inputs.size() <= 3 && n.outputs.size() == 1 &&
         epilogue_without_extras(n);
}

}  // namespace

Graph fuse_expand_depthwise(const Graph &g, int64_t min_expanded_bytes) {
  // Readers of each value (a node reading a value twice counts twice).
  std::vector<int> readers(g.values().size(), 0);
  std::vector<int32_t> reader(g.values().size(), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].inputs) {
      if (v == kNoValue) continue;
      ++readers[static_cast<size_t>(v)];
      reader[static_cast<size_t>(v)] = static_cast<int32_t>(i);
    }
  }
  Rewriter rw(g);
  // For each depthwise node index, the expansion node it absorbs.
  std::vector<int32_t> absorbs(g.nodes().size(), -1);
  std::vector<bool> absorbed(g.nodes().size(), false);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node &n = g.nodes()[i];
    if (!is_expansion(g, n)) continue;
    const ValueId mid = n.outputs[0];
    const size_t m = static_cast<size_t>(mid);
    if (readers[m] != 1 || rw.is_output(mid)) continue;
    const Node &d = g.nodes()[static_cast<size_t>(reader[m])];
    if (!is_depthwise(d) || d.inputs[0] != mid) continue;
    if (g.value(mid).type.nbytes() < min_expanded_bytes) continue;
    absorbs[static_cast<size_t>(reader[m])] = static_cast<int32_t>(i);
    absorbed[i] = true;
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node &n = g.nodes()[i];
    if (absorbed[i]) continue;
    if (absorbs[i] < 0) {
      rw.copy(n);
      continue;
    }
    const Node &e = g.nodes()[static_cast<size_t>(absorbs[i])];
    Node f;
    f.op = "ExpandDepthwiseNCHWc";
    f.name = e.name + "+" + n.name;
    f.attrs["strides"] = Attribute::of_ints(n.attr_ints("strides", {1, 1}));
    f.attrs["dilations"] = Attribute::of_ints(n.attr_ints("dilations", {1, 1}));
    f.attrs["pads"] = Attribute::of_ints(n.attr_ints("pads", {0, 0, 0, 0}));
    f.attrs["ic_bn"] = Attribute::of_int(e.attr_int("ic_bn", 0));
    f.attrs["oc_bn"] = Attribute::of_int(e.attr_int("oc_bn", 0));
    f.attrs["expand_epilogue"] = Attribute::of_string(e.attr_string("epilogue", "[]"));
    f.attrs["epilogue"] = Attribute::of_string(n.attr_string("epilogue", "[]"));
    const bool b1 = e.inputs.size() > 2 && e.inputs[2] != kNoValue, b2 = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    f.attrs["expand_bias"] = Attribute::of_int(b1 ? 1 : 0);
    f.attrs["bias"] = Attribute::of_int(b2 ? 1 : 0);
    f.inputs = {rw.map(e.inputs[0]), rw.map(e.inputs[1]), rw.map(n.inputs[1])};
    if (b1) f.inputs.push_back(rw.map(e.inputs[2]));
    if (b2) f.inputs.push_back(rw.map(n.inputs[2]));
    const std::vector<ValueId> outs = rw.add(std::move(f), {g.value(n.outputs[0]).name});
    rw.set(n.outputs[0], outs[0]);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
