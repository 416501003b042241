// Injective groups (TVM's kInjective rule): elementwise, broadcast and injective nodes grouped by
// the post-dominator rule of fuse_ops.h, and into a reduction or a LayoutTransform to or from NCHW
// after them; a group with an injective member, a reduction or such a transform becomes one
// FusedInjective node (op_fused.cpp), whose kernel builds every member through its own op (the
// transform through layout_transform.x86's compute).
#include <map>
#include <set>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/graph/passes/fuse_ops.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "contracts/json.h"

namespace kiln::graph::passes {

namespace {

using contracts::Json;

// The injective ops whose kernel is one tensor-expression compute of one output. (Views have no
// kernel; Concat may be written in place by its producers; Split has several outputs;
// LayoutTransform is an operator template.)
bool injective_member(const std::string &op) {
  static const std::set<std::string> ops = {"Transpose", "Slice", "Pad",          "Gather",
                                            "Expand",    "Tile",  "DepthToSpace", "SpaceToDepth"};
  return ops.count(op) != 0;
}

// The reductions whose kernel is a tensor-expression compute of one output: a group's root, taking
// the elementwise and injective nodes before it.
bool reduction_root(const Graph &g, const Node &n) {
  static const std::set<std::string> ops = {"ReduceSum",       "ReduceMean",     "ReduceMax", "ReduceMin",
                                            "ReduceProd",      "ReduceL1",       "ReduceL2",  "ReduceLogSum",
                                            "ReduceLogSumExp", "ReduceSumSquare"};
  if (!ops.count(n.op) || n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] == kNoValue) return false;
  if (n.inputs.size() > 1 && n.inputs[1] != kNoValue && !g.value(n.inputs[1]).is_constant()) return false;
  for (const auto &[key, a] : n.attrs) {
    if (a.kind == Attribute::Kind::Tensor) return false;
  }
  return fusable_dtype(g.value(n.inputs[0]).type.dtype) && fusable_dtype(g.value(n.outputs[0]).type.dtype);
}

// A LayoutTransform to or from NCHW: a group's root, taking the elementwise and injective nodes
// before it (its kernel then the transposed schedule of layout_transform.x86 over their compute);
// it joins no group (inlined into a consumer, its index arithmetic would gather).
bool transform_root(const Graph &g, const Node &n) {
  if (n.op != kLayoutTransformOp || n.outputs.size() != 1 || n.inputs.size() != 1 || n.inputs[0] == kNoValue)
    return false;
  if (n.attr_int("src_block", 0) != 0 && n.attr_int("dst_block", 0) != 0) return false;
  return fusable_dtype(g.value(n.inputs[0]).type.dtype);
}

bool is_const_input(const OpDef &def, size_t i) {
  for (int c : def.const_inputs) {
    if (static_cast<size_t>(c) == i) return true;
  }
  return false;
}

// An integer constant a member reads at compile time, as the subgraph holds it.
std::optional<Json> constant_json(const Value &v) {
  if (!v.is_constant() || (v.type.dtype != ir::Int(64) && v.type.dtype != ir::Int(32))) return std::nullopt;
  Json data = Json::array();
  for (double x : tensor_values(v.constant)) data.push_back(static_cast<int64_t>(x));
  return Json::object({{"dtype", dtype_name(v.type.dtype)}, {"shape", Json::array_of(v.type.shape)}, {"data", data}});
}

bool injective_fusable(const Graph &g, const Node &n) {
  const OpDef *def = find_op(n.op);
  if (!def || !(injective_member(n.op) || def->view) || n.outputs.size() != 1 || n.inputs.empty() ||
      n.inputs[0] == kNoValue)
    return false;
  for (const auto &[key, a] : n.attrs) {
    if (a.kind == Attribute::Kind::Tensor) return false;
  }
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const Value &v = g.value(n.inputs[i]);
    if (is_const_input(*def, i)) {
      if (!constant_json(v)) return false;
    } else if (!fusable_dtype(v.type.dtype)) {
      return false;
    }
  }
  return fusable_dtype(g.value(n.outputs[0]).type.dtype);
}

}  // namespace

Graph fuse_injective(const Graph &g) {
  const size_t count = g.nodes().size();
  // A view joins a group inside it, never as its root (alone it runs no kernel).
  // A reduction starts a group and joins none.
  std::vector<bool> injective(count, false), fusable(count, false), view(count, false), root_only(count, false);
  for (size_t k = 0; k < count; ++k) {
    const Node &n = g.nodes()[k];
    // Reductions and transforms start a group and join none.
    root_only[k] = reduction_root(g, n) || transform_root(g, n);
    fusable[k] = injective_fusable(g, n) || elementwise_fusable(g, n);
    view[k] = fusable[k] && find_op(n.op)->view;
    injective[k] = fusable[k] && injective_member(n.op);
  }
  // The tensor inputs of a group: values read from outside it, except constants read at compile time.
  auto inputs_of = [&](const std::set<size_t> &ms) {
    std::set<ValueId> ins;
    for (size_t k : ms) {
      const Node &n = g.nodes()[k];
      const OpDef &def = *find_op(n.op);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        if (v == kNoValue || is_const_input(def, i)) continue;
        const int32_t p = g.value(v).producer;
        if (p >= 0 && ms.count(static_cast<size_t>(p))) continue;
        ins.insert(v);
      }
    }
    return ins;
  };
  const FusionGroups fg = post_dominator_groups(
      g, [&](size_t k) { return fusable[k]; }, [&](size_t k) { return (fusable[k] && !view[k]) || root_only[k]; },
      kMaxGroupNodes, [&](const std::set<size_t> &ms) { return inputs_of(ms).size() <= kMaxGroupInputs; });
  // Only groups of two or more nodes that are no views, one of them injective or a reduction: elementwise-only
  // groups (with views) are fuse_elementwise's, and a group of one kernel and views would save none.
  // A group ending in a LayoutTransform only of Slices and elementwise nodes: the transposed
  // schedule needs the data's positions contiguous, which a view or a Transpose inlined into it
  // breaks (its index arithmetic left to gathers: a channel shuffle and its 29c transform ran 0.014
  // ms as one kernel in ShuffleNetV2, 0.008 as two).
  std::vector<bool> composite(fg.groups.size(), false);
  for (size_t id = 0; id < fg.groups.size(); ++id) {
    size_t computes = 0;
    bool injective_or_reduction = false, positions_kept = true;
    for (size_t k : fg.groups[id]) {
      computes += view[k] ? 0 : 1;
      injective_or_reduction = injective_or_reduction || injective[k] || root_only[k];
      positions_kept = positions_kept && (!view[k] && (!injective[k] || g.nodes()[k].op == "Slice"));
    }
    const bool transform = g.nodes()[*fg.groups[id].rbegin()].op == kLayoutTransformOp;
    composite[id] = computes >= 2 && injective_or_reduction && (!transform || positions_kept);
  }

  Rewriter rw(g);
  for (size_t k = 0; k < count; ++k) {
    const int id = fg.group_of[k];
    if (id < 0 || !composite[static_cast<size_t>(id)]) {
      rw.copy(g.nodes()[k]);
      continue;
    }
    const std::set<size_t> &members = fg.groups[static_cast<size_t>(id)];
    if (k != *members.rbegin()) continue;  // emitted at the root, the last member
    GroupSubgraph sub(g, rw, "FusedInjective", g.nodes()[k].name);
    for (size_t m : members) {
      const Node &n = g.nodes()[m];
      const OpDef &def = *find_op(n.op);
      Json in = Json::array();
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const ValueId v = n.inputs[i];
        if (v == kNoValue) {
          in.push_back(Json());
        } else if (auto ref = sub.member(v)) {
          in.push_back(*ref);
        } else if (is_const_input(def, i)) {
          in.push_back(Json::object({{"k", *constant_json(g.value(v))}}));
        } else {
          in.push_back(sub.input(v));
        }
      }
      Json attrs = Json::object();
      for (const auto &[key, a] : n.attrs) attrs.set(key, *detail::injective_attribute_json(a));
      sub.add(m, Json::object({{"op", n.op}, {"attrs", attrs}, {"in", in}}));
    }
    sub.finish(k);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
