#pragma once
// The graph IR: a model as a dataflow graph of operator nodes over tensor values with static
// shapes. Frontends (compiler/frontend/onnx) build it; the executor (compiler/driver) runs it node by
// node; the graph compiler's passes rewrite it.
//
// - A Value is a tensor: its type (dtype and static shape), the node and output that produce it,
//   or a graph input, or a constant (weights) whose data is held once and shared by every user.
// - A Node is one operator: its type (an op of the op table, compiler/graph/op_def.h), the values it
//   reads (an absent optional input is kNoValue) and writes, and typed attributes.
// - Nodes are kept in topological order: add_node() refuses an input that is not yet defined, so a
//   graph built through this interface is acyclic by construction; verify() checks it again.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/type.h"
#include "contracts/error.h"
#include "deploy/tensor.h"

namespace kiln::graph {

// A malformed graph or model: an undefined input, a type or shape mismatch, a bad attribute. The
// message names the node (its name and op type) or the value.
class GraphError : public UserError {
 public:
  using UserError::UserError;
};

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;

// dtype and static shape of a tensor. A scalar has rank 0 and one element.
struct TensorType {
  ir::DataType dtype = ir::Float(32);
  std::vector<int64_t> shape;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  int64_t nbytes() const;
  // Whether nbytes() fits in an int64_t (for shapes of any origin; negative dimensions do not fit).
  bool size_fits() const;
  // "float32[1,3,224,224]", "int64[]" for a scalar.
  std::string str() const;
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

// "float32", "int64", "bool", "float16".
std::string dtype_name(ir::DataType t);
// The dtype of such a name, or nullopt.
std::optional<ir::DataType> dtype_from_name(const std::string &name);

struct Value {
  std::string name;
  TensorType type;
  int32_t producer = -1;  // node index, or -1 for a graph input or a constant
  int32_t output_index = 0;
  // The data of a constant (row-major, contiguous); undefined for other values.
  deploy::Tensor constant;

  bool is_constant() const { return constant.defined(); }
};

struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats, Strings, Tensor };
  Kind kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  deploy::Tensor tensor;

  static Attribute of_int(int64_t v);
  static Attribute of_float(double v);
  static Attribute of_string(std::string v);
  static Attribute of_ints(std::vector<int64_t> v);
  static Attribute of_floats(std::vector<double> v);
  static Attribute of_strings(std::vector<std::string> v);
  static Attribute of_tensor(deploy::Tensor v);
  // "3", "0.5", "\"nearest\"", "[1,2]", "tensor float32[4]".
  std::string str() const;
};
const char *attribute_kind_name(Attribute::Kind k);

struct Node {
  std::string op;    // the op type, e.g. "Conv"
  std::string name;  // unique within the graph
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::map<std::string, Attribute> attrs;

  bool has_attr(const std::string &key) const { return attrs.count(key) != 0; }
  // Typed attribute access; a present attribute of another kind is a GraphError naming the node.
  int64_t attr_int(const std::string &key, int64_t fallback) const;
  double attr_float(const std::string &key, double fallback) const;
  std::string attr_string(const std::string &key, const std::string &fallback) const;
  std::vector<int64_t> attr_ints(const std::string &key, const std::vector<int64_t> &fallback = {}) const;
  std::vector<double> attr_floats(const std::string &key, const std::vector<double> &fallback = {}) const;
  // "node 'conv1' (Conv)": how messages name a node.
  std::string describe() const;
};

class Graph {
 public:
  std::string name;

  const std::vector<Value> &values() const { return values_; }
  const std::vector<Node> &nodes() const { return nodes_; }
  const std::vector<ValueId> &inputs() const { return inputs_; }
  const std::vector<ValueId> &outputs() const { return outputs_; }
  const Value &value(ValueId id) const;
  const Node &node(int32_t index) const;
  // The value named `name`, or kNoValue.
  ValueId find(const std::string &name) const;

  // A graph input. Names are unique over all values; a name given twice is a GraphError.
  ValueId add_input(const std::string &name, TensorType type);
  // A constant whose data is `data` (a contiguous tensor; shared, not copied).
  ValueId add_constant(const std::string &name, deploy::Tensor data);
  // Appends a node whose outputs get the given names and types; its inputs must already be defined.
  std::vector<ValueId> add_node(Node node, const std::vector<std::string> &output_names,
                                const std::vector<TensorType> &output_types);
  void add_output(ValueId v);

  // A name not used by any value yet, built from `base`.
  std::string unique_name(const std::string &base) const;

  // The same graph with only the nodes some output needs, and only the constants they read.
  Graph prune() const;

  // Parameters: elements of all constants; constant bytes.
  int64_t parameter_count() const;
  int64_t constant_bytes() const;

 private:
  ValueId add_value(Value v);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::map<std::string, ValueId> by_name_;
};

// One line per input, constant summary, node and output:
//   %conv1_out: float32[1,64,112,112] = Conv(%x, %w1) {kernel_shape=[7,7], strides=[2,2]}  # conv1
std::string print(const Graph &g);

// Checks that every node is an op of the op table with an allowed number of inputs and outputs,
// reads only values defined before it, and that the stored types of its outputs are what the op's
// shape inference gives. Throws GraphError naming the first node that is wrong.
void verify(const Graph &g);

}  // namespace kiln::graph
