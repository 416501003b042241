#pragma once
// Internal to the passes: builds the rewritten graph while walking the old one in order. Inputs and
// constants are carried over at construction; each old node is either copied (inputs mapped) or
// replaced by what the pass adds, and `set` records what an old value became.
#include <algorithm>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_def.h"

namespace kiln::graph::passes {

class Rewriter {
 public:
  explicit Rewriter(const Graph &old) : old_(old), map_(old.values().size(), kNoValue) {
    out_.name = old.name;
    for (ValueId i : old.inputs()) map_[static_cast<size_t>(i)] = out_.add_input(old.value(i).name, old.value(i).type);
    for (size_t v = 0; v < old.values().size(); ++v) {
      if (old.values()[v].is_constant()) map_[v] = out_.add_constant(old.values()[v].name, old.values()[v].constant);
    }
  }

  const Graph &old() const { return old_; }
  Graph &out() { return out_; }
  ValueId map(ValueId old_id) const { return old_id == kNoValue ? kNoValue : map_[static_cast<size_t>(old_id)]; }
  void set(ValueId old_id, ValueId now) { map_[static_cast<size_t>(old_id)] = now; }
  bool is_output(ValueId old_id) const {
    for (ValueId o : old_.outputs()) {
      if (o == old_id) return true;
    }
    return false;
  }

  // The old node with its inputs mapped, its outputs keeping their names and types.
  std::vector<ValueId> copy(const Node &n) {
    Node c = n;
    for (auto &i : c.inputs) i = map(i);
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (ValueId o : n.outputs) {
      names.push_back(old_.value(o).name);
      types.push_back(old_.value(o).type);
    }
    auto outs = out_.add_node(std::move(c), names, types);
    for (size_t k = 0; k < outs.size(); ++k) set(n.outputs[k], outs[k]);
    return outs;
  }

  // A new node over values of the new graph; its types come from the op table.
  std::vector<ValueId> add(Node n, const std::vector<std::string> &names) {
    n.name = out_.unique_name(n.name.empty() ? n.op : n.name);
    n.outputs.assign(names.size(), kNoValue);
    std::vector<TensorType> types = infer_types(out_, n);
    std::vector<std::string> unique;
    for (const auto &s : names) unique.push_back(out_.unique_name(s));
    return out_.add_node(std::move(n), unique, types);
  }

  ValueId constant(const std::string &base, deploy::Tensor t) {
    return out_.add_constant(out_.unique_name(base), std::move(t));
  }

  // A 1-D int64 constant (a shape, the starts of a Slice, ...).
  ValueId int64_constant(const std::string &base, const std::vector<int64_t> &v) {
    deploy::Tensor t = deploy::Tensor::empty({static_cast<int64_t>(v.size())}, deploy::DType::of<int64_t>());
    std::copy(v.begin(), v.end(), t.data_as<int64_t>());
    return constant(base, std::move(t));
  }

  // New value `v` as shape `shape`: itself, or a Reshape view of it named `name` + "_view".
  ValueId view_as(ValueId v, const std::vector<int64_t> &shape, const std::string &name) {
    if (out_.value(v).type.shape == shape) return v;
    Node r;
    r.op = "Reshape";
    r.name = name + "_view";
    r.inputs = {v, int64_constant("shape", shape)};
    return add(std::move(r), {name + "_view"})[0];
  }

  // The new graph with the old outputs mapped, pruned of what nothing reads.
  Graph finish() {
    for (ValueId o : old_.outputs()) out_.add_output(map(o));
    return out_.prune();
  }

 private:
  const Graph &old_;
  Graph out_;
  std::vector<ValueId> map_;
};

}  // namespace kiln::graph::passes
