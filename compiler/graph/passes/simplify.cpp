#include <algorithm>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/fuse_ops.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"

namespace kiln::graph::passes {

namespace {

// Whether value v (of the new graph) is a constant whose every element equals x.
bool constant_all(const Graph &g, ValueId v, double x) {
  const Value &val = g.value(v);
  if (!val.is_constant() || val.type.dtype.is_float16()) return false;
  for (double d : tensor_values(val.constant)) {
    if (d != x) return false;
  }
  return true;
}

bool is_reshape_like(const std::string &op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

std::vector<int64_t> perm_of(const Node &n, int64_t rank) {
  std::vector<int64_t> p = n.attr_ints("perm");
  if (p.empty()) {
    for (int64_t k = rank - 1; k >= 0; --k) p.push_back(k);
  }
  for (auto &x : p) {
    if (x < 0) x += rank;
  }
  return p;
}

}  // namespace

Graph simplify(const Graph &g) {
  const std::vector<std::vector<size_t>> readers = value_readers(g);
  Rewriter rw(g);
  Graph &out = rw.out();
  // The node (of the new graph) producing each new value, to look through chains.
  for (const Node &n : g.nodes()) {
    // A node whose output is a graph output keeps it (the output keeps its name).
    bool feeds_output = false;
    for (ValueId o : n.outputs) feeds_output = feeds_output || rw.is_output(o);
    if (feeds_output) {
      rw.copy(n);
      continue;
    }
    const ValueId x = n.inputs.empty() ? kNoValue : rw.map(n.inputs[0]);
    const TensorType &ty = g.value(n.outputs[0]).type;
    // Ops that pass their input through. A Dropout whose mask is read stays (its mask is all true).
    const bool unread_mask =
        n.outputs.size() == 1 || (n.outputs.size() == 2 && readers[static_cast<size_t>(n.outputs[1])].empty());
    if ((n.op == "Identity" || (n.op == "Dropout" && unread_mask) ||
         (n.op == "Cast" && out.value(x).type.dtype == ty.dtype)) &&
        out.value(x).type == ty) {
      rw.set(n.outputs[0], x);
      continue;
    }
    // x + 0, x - 0, x * 1, x / 1 without a change of shape or dtype.
    if ((n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") && n.inputs.size() == 2) {
      const ValueId a = rw.map(n.inputs[0]), b = rw.map(n.inputs[1]);
      const double unit = (n.op == "Add" || n.op == "Sub") ? 0.0 : 1.0;
      if (out.value(a).type == ty && constant_all(out, b, unit)) {
        rw.set(n.outputs[0], a);
        continue;
      }
      if ((n.op == "Add" || n.op == "Mul") && out.value(b).type == ty && constant_all(out, a, unit)) {
        rw.set(n.outputs[0], b);
        continue;
      }
    }
    if (is_reshape_like(n.op)) {
      // To the same shape: nothing.
      if (out.value(x).type == ty) {
        rw.set(n.outputs[0], x);
        continue;
      }
      // A chain of reshapes: one Reshape of the first input to the final shape.
      const Value &xv = out.value(x);
      if (xv.producer >= 0 && is_reshape_like(out.node(xv.producer).op)) {
        const ValueId src = out.node(xv.producer).inputs[0];
        Node r;
        r.op = "Reshape";
        r.name = n.name;
        r.inputs = {src, rw.constant(n.name + "_shape", [&] {
                      deploy::Tensor t =
                          deploy::Tensor::empty({static_cast<int64_t>(ty.shape.size())}, deploy::DType::of<int64_t>());
                      for (size_t k = 0; k < ty.shape.size(); ++k) t.data_as<int64_t>()[k] = ty.shape[k];
                      return t;
                    }())};
        rw.set(n.outputs[0], rw.add(r, {g.value(n.outputs[0]).name})[0]);
        continue;
      }
    }
    if (n.op == "Transpose") {
      const Value &xv = out.value(x);
      if (xv.producer >= 0 && out.node(xv.producer).op == "Transpose") {
        const Node &inner = out.node(xv.producer);
        const int64_t rank = xv.type.rank();
        const std::vector<int64_t> p1 = perm_of(inner, rank), p2 = perm_of(n, rank);
        std::vector<int64_t> combined(static_cast<size_t>(rank));
        for (size_t k = 0; k < combined.size(); ++k) combined[k] = p1[static_cast<size_t>(p2[k])];
        const ValueId src = inner.inputs[0];
        bool identity = true;
        for (size_t k = 0; k < combined.size(); ++k) identity = identity && combined[k] == static_cast<int64_t>(k);
        if (identity) {
          rw.set(n.outputs[0], src);
          continue;
        }
        Node t;
        t.op = "Transpose";
        t.name = n.name;
        t.inputs = {src};
        t.attrs["perm"] = Attribute::of_ints(combined);
        rw.set(n.outputs[0], rw.add(t, {g.value(n.outputs[0]).name})[0]);
        continue;
      }
    }
    rw.copy(n);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
