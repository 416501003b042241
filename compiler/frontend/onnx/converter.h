#pragma once
// Internal to the ONNX frontend: what an op converter sees and the converter table.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/graph/graph.h"

namespace kiln::frontend::onnx {

// The graph being built and how a converter adds to it.
class ConvertContext {
 public:
  ConvertContext(graph::Graph &g, const ImportOptions &options, int64_t opset)
      : g_(g), options_(options), opset_(opset) {}

  graph::Graph &graph() { return g_; }
  int64_t opset() const { return opset_; }

  // Input i of the ONNX node: its value, or kNoValue when absent (missing or named "").
  graph::ValueId input(const ::onnx::NodeProto &n, int i) const;
  // Every input of the node.
  std::vector<graph::ValueId> inputs(const ::onnx::NodeProto &n) const;
  // The node's attributes converted (a graph attribute is an ImportError).
  std::map<std::string, graph::Attribute> attributes(const ::onnx::NodeProto &n) const;
  // The node's output names, trailing absent ones dropped, inner absent ones given fresh names.
  std::vector<std::string> outputs(const ::onnx::NodeProto &n) const;

  // A new int64 constant.
  graph::ValueId constant_ints(const std::string &base, const std::vector<int64_t> &values, bool scalar = false);
  graph::ValueId constant_floats(const std::string &base, const std::vector<double> &values, ir::DataType dtype,
                                 bool scalar = false);
  // Binds an ONNX name to an existing value (Identity-like conversions).
  void alias(const std::string &name, graph::ValueId v);

  // Adds a node (types by the op table's inference); when every input is a constant and folding is
  // on, evaluates it and adds constants instead. Returns the output values.
  std::vector<graph::ValueId> emit(const std::string &op, const std::vector<graph::ValueId> &inputs,
                                   std::map<std::string, graph::Attribute> attrs,
                                   const std::vector<std::string> &output_names, const std::string &node_name);
  // The common case: the ONNX node as the same op with its attributes (after `edit`).
  std::vector<graph::ValueId> emit_as(const ::onnx::NodeProto &n, const std::string &op,
                                      std::vector<graph::ValueId> inputs,
                                      std::map<std::string, graph::Attribute> attrs);

  // ImportError "node 'name' (Op): what".
  [[noreturn]] void fail(const ::onnx::NodeProto &n, const std::string &what) const;
  std::string node_name(const ::onnx::NodeProto &n) const;

 private:
  graph::Graph &g_;
  const ImportOptions &options_;
  int64_t opset_;
  std::map<std::string, graph::ValueId> aliases_;
  int64_t fresh_ = 0;
};

using Converter = std::function<void(ConvertContext &cx, const ::onnx::NodeProto &n)>;

struct ConverterVersion {
  int64_t since = 1;  // the op's version this converter handles (up to the next entry)
  Converter convert;
};

// Op type -> converters by version, ascending.
const std::map<std::string, std::vector<ConverterVersion>> &converter_table();

// The converter for `op` at `opset`: the highest version <= opset, or nullptr.
const Converter *find_converter(const std::string &op, int64_t opset);

// A TensorProto's data (checked against its declared shape and type). `base_dir` is where external
// data lives ("" = none allowed).
deploy::Tensor tensor_from_proto(const ::onnx::TensorProto &t, const std::string &base_dir, const std::string &what);
// An ONNX TensorProto data type as a graph dtype name, or "" when Kiln does not support it.
std::string dtype_of_onnx(int32_t onnx_type);

}  // namespace kiln::frontend::onnx
