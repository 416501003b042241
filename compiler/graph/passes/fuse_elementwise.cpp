#include <set>

#include "compiler/graph/op_def.h"
#include "compiler/graph/op_families.h"
#include "compiler/graph/passes/fuse_ops.h"
#include "compiler/graph/passes/match_util.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "contracts/json.h"

namespace kiln::graph::passes {

namespace {

using contracts::Json;

// A scalar constant operand inlined into the subgraph rather than passed as an input.
// (Integers beyond 2^53 are not: the subgraph holds constants as doubles.)
bool inline_constant(const Graph &g, ValueId v) {
  const std::optional<double> c = scalar_constant(g, v);
  return c && (g.value(v).type.dtype.is_float() || std::abs(*c) <= 9007199254740992.0);
}

}  // namespace

bool fusable_dtype(ir::DataType t) { return !t.is_float16() && !t.is_bool(); }

bool elementwise_fusable(const Graph &g, const Node &n) {
  const int arity = detail::fused_elementwise_arity(n.op);
  if (arity < 0 || static_cast<int>(n.inputs.size()) != arity || n.outputs.size() != 1) return false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) return false;
    const ir::DataType t = g.value(n.inputs[i]).type.dtype;
    if (!(fusable_dtype(t) || (n.op == "Where" && i == 0 && t.is_bool()))) return false;
  }
  if (n.op == "Pow" && !g.value(n.inputs[0]).type.dtype.is_float()) return false;
  return fusable_dtype(g.value(n.outputs[0]).type.dtype);
}

Graph fuse_elementwise(const Graph &g) {
  const size_t count = g.nodes().size();
  auto inputs_with = [&](const std::set<size_t> &ms) {
    std::set<ValueId> ins;
    for (size_t k : ms) {
      for (ValueId v : g.nodes()[k].inputs) {
        const int32_t p = g.value(v).producer;
        if ((p >= 0 && ms.count(static_cast<size_t>(p))) || inline_constant(g, v)) continue;
        ins.insert(v);
      }
    }
    return ins.size();
  };
  // The post-dominator rule of fuse_ops.h; the last member is the root.
  auto fusable = [&](size_t k) { return elementwise_fusable(g, g.nodes()[k]); };
  const FusionGroups fg = post_dominator_groups(g, fusable, fusable, kMaxGroupNodes, [&](const std::set<size_t> &ms) {
    return inputs_with(ms) <= kMaxGroupInputs;
  });
  const std::vector<int> &group_of = fg.group_of;
  const std::vector<std::set<size_t>> &groups = fg.groups;

  Rewriter rw(g);
  for (size_t k = 0; k < count; ++k) {
    const int id = group_of[k];
    if (id < 0 || groups[static_cast<size_t>(id)].size() < 2) {
      rw.copy(g.nodes()[k]);
      continue;
    }
    const std::set<size_t> &members = groups[static_cast<size_t>(id)];
    if (k != *members.rbegin()) continue;  // emitted at the root, the last member
    GroupSubgraph sub(g, rw, "FusedElementwise", g.nodes()[k].name);
    for (size_t m : members) {
      const Node &n = g.nodes()[m];
      Json in = Json::array();
      for (ValueId v : n.inputs) {
        if (auto ref = sub.member(v)) {
          in.push_back(*ref);
        } else if (inline_constant(g, v)) {
          in.push_back(Json::object({{"c", *scalar_constant(g, v)}}));
        } else {
          in.push_back(sub.input(v));
        }
      }
      const TensorType &t = g.value(n.outputs[0]).type;
      Json desc =
          Json::object({{"op", n.op}, {"in", in}, {"shape", Json::array_of(t.shape)}, {"dtype", dtype_name(t.dtype)}});
      if (n.op == "Cast") desc.set("to", dtype_name(t.dtype));
      sub.add(m, std::move(desc));
    }
    sub.finish(k);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
