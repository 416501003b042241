#include "compiler/graph/graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"

namespace kiln::graph {

using ::kiln::detail::concat;

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorType::nbytes() const { return numel() * dtype.bytes(); }

bool TensorType::size_fits() const {
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) return true;
  }
  int64_t n = dtype.bytes();
  for (int64_t d : shape) {
    if (n > std::numeric_limits<int64_t>::max() / d) return false;
    n *= d;
  }
  return true;
}

std::string dtype_name(ir::DataType t) {
  if (t.is_bool()) return "bool";
  if (t.is_float()) return concat("float", t.bits());
  if (t.is_uint()) return concat("uint", t.bits());
  return concat("int", t.bits());
}

std::optional<ir::DataType> dtype_from_name(const std::string &n) {
  if (n == "float32") return ir::Float(32);
  if (n == "float16") return ir::Float(16);
  if (n == "float64") return ir::Float(64);
  if (n == "int8") return ir::Int(8);
  if (n == "int16") return ir::Int(16);
  if (n == "int32") return ir::Int(32);
  if (n == "int64") return ir::Int(64);
  if (n == "uint8") return ir::UInt(8);
  if (n == "uint16") return ir::UInt(16);
  if (n == "uint32") return ir::UInt(32);
  if (n == "uint64") return ir::UInt(64);
  if (n == "bool") return ir::Bool();
  return std::nullopt;
}

std::string TensorType::str() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << "]";
  return os.str();
}

Attribute Attribute::of_int(int64_t v) {
  Attribute a;
  a.kind = Kind::Int;
  a.i = v;
  return a;
}
Attribute Attribute::of_float(double v) {
  Attribute a;
  a.kind = Kind::Float;
  a.f = v;
  return a;
}
Attribute Attribute::of_string(std::string v) {
  Attribute a;
  a.kind = Kind::String;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::of_ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Kind::Ints;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::of_floats(std::vector<double> v) {
  Attribute a;
  a.kind = Kind::Floats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::of_strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Kind::Strings;
  a.strings = std::move(v);
  return a;
}
Attribute Attribute::of_tensor(deploy::Tensor v) {
  Attribute a;
  a.kind = Kind::Tensor;
  a.tensor = std::move(v);
  return a;
}

const char *attribute_kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Int:
      return "int";
    case Attribute::Kind::Float:
      return "float";
    case Attribute::Kind::String:
      return "string";
    case Attribute::Kind::Ints:
      return "ints";
    case Attribute::Kind::Floats:
      return "floats";
    case Attribute::Kind::Strings:
      return "strings";
    case Attribute::Kind::Tensor:
      return "tensor";
  }
  return "?";
}

namespace {
std::string format_double(double v) {
  std::ostringstream os;
  os.precision(7);
  os << v;
  return os.str();
}
}  // namespace

std::string Attribute::str() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::Int:
      os << i;
      break;
    case Kind::Float:
      os << format_double(f);
      break;
    case Kind::String:
      os << '"' << s << '"';
      break;
    case Kind::Ints:
      os << "[";
      for (size_t k = 0; k < ints.size(); ++k) os << (k ? "," : "") << ints[k];
      os << "]";
      break;
    case Kind::Floats:
      os << "[";
      for (size_t k = 0; k < floats.size(); ++k) os << (k ? "," : "") << format_double(floats[k]);
      os << "]";
      break;
    case Kind::Strings:
      os << "[";
      for (size_t k = 0; k < strings.size(); ++k) os << (k ? "," : "") << '"' << strings[k] << '"';
      os << "]";
      break;
    case Kind::Tensor: {
      TensorType t{ir::to_ir_type(tensor.dtype()), tensor.shape()};
      os << "tensor " << t.str();
      break;
    }
  }
  return os.str();
}

std::string Node::describe() const { return concat("node '", name, "' (", op, ")"); }

namespace {
const Attribute *lookup(const Node &n, const std::string &key, Attribute::Kind want) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != want) {
    // An int where a float is expected is fine (and the other way round for lists of ints).
    if (want == Attribute::Kind::Float && it->second.kind == Attribute::Kind::Int) return &it->second;
    if (want == Attribute::Kind::Floats && it->second.kind == Attribute::Kind::Ints) return &it->second;
    throw GraphError(concat(n.describe(), ": attribute '", key, "' is ", attribute_kind_name(it->second.kind),
                            ", expected ", attribute_kind_name(want)));
  }
  return &it->second;
}
}  // namespace

int64_t Node::attr_int(const std::string &key, int64_t fallback) const {
  const Attribute *a = lookup(*this, key, Attribute::Kind::Int);
  return a ? a->i : fallback;
}
double Node::attr_float(const std::string &key, double fallback) const {
  const Attribute *a = lookup(*this, key, Attribute::Kind::Float);
  if (!a) return fallback;
  return a->kind == Attribute::Kind::Int ? static_cast<double>(a->i) : a->f;
}
std::string Node::attr_string(const std::string &key, const std::string &fallback) const {
  const Attribute *a = lookup(*this, key, Attribute::Kind::String);
  return a ? a->s : fallback;
}
std::vector<int64_t> Node::attr_ints(const std::string &key, const std::vector<int64_t> &fallback) const {
  const Attribute *a = lookup(*this, key, Attribute::Kind::Ints);
  return a ? a->ints : fallback;
}
std::vector<double> Node::attr_floats(const std::string &key, const std::vector<double> &fallback) const {
  const Attribute *a = lookup(*this, key, Attribute::Kind::Floats);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::Ints) return std::vector<double>(a->ints.begin(), a->ints.end());
  return a->floats;
}

const Value &Graph::value(ValueId id) const {
  if (id < 0 || static_cast<size_t>(id) >= values_.size())
    throw GraphError(concat("graph '", name, "': no value with id ", id));
  return values_[static_cast<size_t>(id)];
}

const Node &Graph::node(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= nodes_.size())
    throw GraphError(concat("graph '", name, "': no node ", index));
  return nodes_[static_cast<size_t>(index)];
}

ValueId Graph::find(const std::string &n) const {
  auto it = by_name_.find(n);
  return it == by_name_.end() ? kNoValue : it->second;
}

ValueId Graph::add_value(Value v) {
  if (v.name.empty()) v.name = unique_name("v");
  if (by_name_.count(v.name)) throw GraphError(concat("graph '", name, "': the name '", v.name, "' is defined twice"));
  for (int64_t d : v.type.shape) {
    if (d < 0) throw GraphError(concat("value '", v.name, "' has a negative dimension: ", v.type.str()));
  }
  if (!v.type.size_fits()) throw GraphError(concat("value '", v.name, "' is too large: ", v.type.str()));
  const auto id = static_cast<ValueId>(values_.size());
  by_name_[v.name] = id;
  values_.push_back(std::move(v));
  return id;
}

ValueId Graph::add_input(const std::string &n, TensorType type) {
  Value v;
  v.name = n;
  v.type = std::move(type);
  ValueId id = add_value(std::move(v));
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(const std::string &n, deploy::Tensor data) {
  if (!data.defined()) throw GraphError(concat("constant '", n, "' has no data"));
  if (!data.is_contiguous()) throw GraphError(concat("constant '", n, "' is not contiguous"));
  Value v;
  v.name = n;
  v.type = TensorType{ir::to_ir_type(data.dtype()), data.shape()};
  v.constant = std::move(data);
  return add_value(std::move(v));
}

std::vector<ValueId> Graph::add_node(Node node, const std::vector<std::string> &output_names,
                                     const std::vector<TensorType> &output_types) {
  if (output_names.size() != output_types.size())
    throw GraphError(
        concat(node.describe(), ": ", output_names.size(), " output names for ", output_types.size(), " output types"));
  if (node.name.empty()) node.name = concat(node.op, "_", nodes_.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId in = node.inputs[i];
    if (in == kNoValue) continue;
    if (in < 0 || static_cast<size_t>(in) >= values_.size())
      throw GraphError(concat(node.describe(), ": input ", i, " is not defined before the node"));
  }
  const auto index = static_cast<int32_t>(nodes_.size());
  node.outputs.clear();
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value v;
    v.name = output_names[i];
    v.type = output_types[i];
    v.producer = index;
    v.output_index = static_cast<int32_t>(i);
    node.outputs.push_back(add_value(std::move(v)));
  }
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

void Graph::add_output(ValueId v) {
  value(v);
  outputs_.push_back(v);
}

std::string Graph::unique_name(const std::string &base) const {
  if (!by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = concat(base, "_", i);
    if (!by_name_.count(n)) return n;
  }
}

Graph Graph::prune() const {
  std::vector<bool> needed_node(nodes_.size(), false);
  std::vector<bool> needed_value(values_.size(), false);
  for (ValueId o : outputs_) needed_value[static_cast<size_t>(o)] = true;
  for (size_t k = nodes_.size(); k-- > 0;) {
    const Node &n = nodes_[k];
    bool used = false;
    for (ValueId o : n.outputs) used = used || needed_value[static_cast<size_t>(o)];
    if (!used) continue;
    needed_node[k] = true;
    for (ValueId i : n.inputs) {
      if (i != kNoValue) needed_value[static_cast<size_t>(i)] = true;
    }
  }
  Graph g;
  g.name = name;
  std::vector<ValueId> remap(values_.size(), kNoValue);
  for (ValueId i : inputs_)
    remap[static_cast<size_t>(i)] =
        g.add_input(values_[static_cast<size_t>(i)].name, values_[static_cast<size_t>(i)].type);
  for (size_t v = 0; v < values_.size(); ++v) {
    if (values_[v].is_constant() && needed_value[v]) remap[v] = g.add_constant(values_[v].name, values_[v].constant);
  }
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (!needed_node[k]) continue;
    Node n = nodes_[k];
    for (auto &i : n.inputs) {
      if (i != kNoValue) i = remap[static_cast<size_t>(i)];
    }
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (ValueId o : nodes_[k].outputs) {
      names.push_back(values_[static_cast<size_t>(o)].name);
      types.push_back(values_[static_cast<size_t>(o)].type);
    }
    auto outs = g.add_node(std::move(n), names, types);
    for (size_t j = 0; j < outs.size(); ++j) remap[static_cast<size_t>(nodes_[k].outputs[j])] = outs[j];
  }
  for (ValueId o : outputs_) g.add_output(remap[static_cast<size_t>(o)]);
  return g;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (const auto &v : values_) {
    if (v.is_constant()) n += v.type.numel();
  }
  return n;
}

int64_t Graph::constant_bytes() const {
  int64_t n = 0;
  for (const auto &v : values_) {
    if (v.is_constant()) n += v.type.nbytes();
  }
  return n;
}

std::string print(const Graph &g) {
  std::ostringstream os;
  os << "graph " << (g.name.empty() ? "<unnamed>" : g.name) << "\n";
  for (ValueId i : g.inputs()) os << "  input %" << g.value(i).name << ": " << g.value(i).type.str() << "\n";
  int64_t constants = 0;
  for (const auto &v : g.values()) constants += v.is_constant() ? 1 : 0;
  if (constants)
    os << "  " << constants << " constants, " << g.parameter_count() << " elements, " << g.constant_bytes()
       << " bytes\n";
  for (const auto &n : g.nodes()) {
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value &v = g.value(n.outputs[k]);
      os << (k ? ", " : "") << "%" << v.name << ": " << v.type.str();
    }
    os << " = " << n.op << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      os << (k ? ", " : "");
      if (n.inputs[k] == kNoValue) {
        os << "_";
        continue;
      }
      const Value &v = g.value(n.inputs[k]);
      os << (v.is_constant() ? "$" : "%") << v.name;
    }
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto &[k, a] : n.attrs) {
        os << (first ? "" : ", ") << k << "=" << a.str();
        first = false;
      }
      os << "}";
    }
    os << "  # " << n.name << "\n";
  }
  for (ValueId o : g.outputs()) os << "  output %" << g.value(o).name << ": " << g.value(o).type.str() << "\n";
  return os.str();
}

void verify(const Graph &g) {
  std::vector<bool> defined(g.values().size(), false);
  for (ValueId i : g.inputs()) defined[static_cast<size_t>(i)] = true;
  for (size_t v = 0; v < g.values().size(); ++v) {
    if (g.values()[v].is_constant()) {
      defined[v] = true;
      const Value &c = g.values()[v];
      if (c.constant.shape() != c.type.shape || ir::to_ir_type(c.constant.dtype()) != c.type.dtype)
        throw GraphError(concat("constant '", c.name, "': its data does not match its type ", c.type.str()));
    }
  }
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId in = n.inputs[i];
      if (in == kNoValue) continue;
      if (in < 0 || static_cast<size_t>(in) >= defined.size() || !defined[static_cast<size_t>(in)])
        throw GraphError(
            concat(n.describe(), ": input ", i, " is used before it is defined (a cycle or a missing value)"));
    }
    std::vector<TensorType> types = infer_types(g, n);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      const Value &v = g.value(n.outputs[o]);
      if (v.producer != static_cast<int32_t>(k))
        throw GraphError(concat(n.describe(), ": output '", v.name, "' names another producer"));
      if (v.type != types[o])
        throw GraphError(concat(n.describe(), ": output '", v.name, "' is stored as ", v.type.str(),
                                " but the op gives ", types[o].str()));
      defined[static_cast<size_t>(n.outputs[o])] = true;
    }
  }
  for (ValueId o : g.outputs()) {
    if (!defined[static_cast<size_t>(o)])
      throw GraphError(concat("graph output '", g.value(o).name, "' is never defined"));
  }
}

}  // namespace kiln::graph
