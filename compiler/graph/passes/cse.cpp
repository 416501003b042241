#include <map>
#include <sstream>
#include <string>

#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "compiler/ir/deploy_dtype.h"
#include "contracts/sha256.h"

namespace kiln::graph::passes {

namespace {

std::string data_key(const deploy::Tensor &t) {
  std::ostringstream os;
  os << t.dtype().to_string() << "[";
  for (int64_t d : t.shape()) os << d << ",";
  os << "]" << contracts::sha256_hex(std::string_view(static_cast<const char *>(t.data()), t.nbytes()));
  return os.str();
}

}  // namespace

Graph eliminate_common_subexpressions(const Graph &g) {
  // Constants with equal data first: every reader of a duplicate reads the first one.
  Graph deduped;
  deduped.name = g.name;
  std::vector<ValueId> remap(g.values().size(), kNoValue);
  for (ValueId i : g.inputs()) remap[static_cast<size_t>(i)] = deduped.add_input(g.value(i).name, g.value(i).type);
  std::map<std::string, ValueId> constants;
  for (size_t v = 0; v < g.values().size(); ++v) {
    const Value &val = g.values()[v];
    if (!val.is_constant()) continue;
    const std::string key = data_key(val.constant);
    auto it = constants.find(key);
    if (it != constants.end()) {
      remap[v] = it->second;
      continue;
    }
    remap[v] = deduped.add_constant(val.name, val.constant);
    constants.emplace(key, remap[v]);
  }
  // Then nodes: the same op, attributes and (already deduplicated) inputs give the same outputs.
  std::map<std::string, std::vector<ValueId>> seen;
  for (const Node &n : g.nodes()) {
    std::ostringstream key;
    key << n.op << "|";
    for (const auto &[k, a] : n.attrs) {
      key << k << "=" << a.str();
      if (a.kind == Attribute::Kind::Tensor) key << "#" << data_key(a.tensor);
      key << ";";
    }
    key << "|";
    for (ValueId i : n.inputs) key << (i == kNoValue ? kNoValue : remap[static_cast<size_t>(i)]) << ",";
    key << "|" << n.outputs.size();
    bool is_output = false;
    for (ValueId o : n.outputs) {
      for (ValueId go : g.outputs()) is_output = is_output || go == o;
    }
    auto it = seen.find(key.str());
    if (it != seen.end() && !is_output) {
      for (size_t k = 0; k < n.outputs.size(); ++k) remap[static_cast<size_t>(n.outputs[k])] = it->second[k];
      continue;
    }
    Node c = n;
    for (auto &i : c.inputs) i = i == kNoValue ? kNoValue : remap[static_cast<size_t>(i)];
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (ValueId o : n.outputs) {
      names.push_back(g.value(o).name);
      types.push_back(g.value(o).type);
    }
    auto outs = deduped.add_node(std::move(c), names, types);
    for (size_t k = 0; k < outs.size(); ++k) remap[static_cast<size_t>(n.outputs[k])] = outs[k];
    if (it == seen.end()) seen.emplace(key.str(), outs);
  }
  for (ValueId o : g.outputs()) deduped.add_output(remap[static_cast<size_t>(o)]);
  return deduped.prune();
}

}  // namespace kiln::graph::passes
