#pragma once
// The ONNX frontend: an ONNX model (opsets 7 to 17) into the graph IR.
//
// - Each op is converted by the converter of the highest version not above the model's opset
//   (converters.cpp), into the op table's form (compiler/graph/op_def.h).
// - Initializers and Constant nodes become constants; a node whose inputs are all constants is
//   evaluated at import (through the executor's kernels), so that shape subgraphs (Shape -> Gather
//   -> Concat -> Reshape, ConstantOfShape, Range) fold and the graph has static shapes.
// - Dynamic input dimensions are fixed by the caller (ImportOptions::input_shapes); one left
//   unknown is an ImportError naming the input and the dimension.
// - Ops without a converter: one UnsupportedOpsError listing every such op type with the model's
//   opset and its node count, before anything is built.
// The ONNX protobuf definitions are used in this folder only.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/graph/graph.h"
#include "contracts/error.h"
#include "deploy/tensor.h"

namespace kiln::frontend::onnx {

// A file that is not a valid ONNX model, or a model Kiln cannot take. The message names the file,
// the node or the value.
class ImportError : public UserError {
 public:
  using UserError::UserError;
};

struct UnsupportedOp {
  std::string domain;  // "" for the default ONNX domain
  std::string op_type;
  int64_t opset = 0;
  int64_t nodes = 0;
};

class UnsupportedOpsError : public ImportError {
 public:
  UnsupportedOpsError(const std::string &what, std::vector<UnsupportedOp> ops)
      : ImportError(what), ops_(std::move(ops)) {}
  const std::vector<UnsupportedOp> &ops() const { return ops_; }

 private:
  std::vector<UnsupportedOp> ops_;
};

// Opsets 7 to 17 are the supported range; older models import where their ops' converters apply
// (the node tests include opset 1 and 6 models).
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 17;

struct ImportOptions {
  // Shapes for graph inputs whose dimensions are symbolic or unknown (by input name).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Inputs frozen to a value: they become constants (so that a shape, an axis or a size given as an
  // input is known at compile time). Each must match the input's declared dtype and rank.
  std::map<std::string, deploy::Tensor> frozen_inputs;
  // Evaluate nodes whose inputs are all constants (needed for models with shape subgraphs).
  bool fold_constants = true;
  // The target the folding kernels are compiled for.
  std::string target = "llvm -mcpu=native";
  // Refuse a model whose constants (initializers, external data) exceed this many bytes, or a node
  // whose folded output would.
  int64_t max_constant_bytes = int64_t{16} << 30;
};

// Imports the model at `path`; external data is read relative to its folder.
graph::Graph import_model(const std::string &path, const ImportOptions &options = {});
// Imports a serialized ModelProto; `base_dir` is where external data lives ("" = none allowed).
graph::Graph import_model_bytes(std::string_view bytes, const ImportOptions &options = {},
                                const std::string &base_dir = "", const std::string &display_name = "<bytes>");

// What `kiln inspect` prints of a model that may not import: its opset, inputs as declared, the op
// types with their counts, and the unsupported ones.
struct ModelInfo {
  int64_t ir_version = 0;
  int64_t opset = 0;
  std::string producer;
  struct Io {
    std::string name;
    std::string dtype;
    std::vector<std::string> dims;  // "1", "batch", "?"
  };
  std::vector<Io> inputs, outputs;
  std::map<std::string, int64_t> op_counts;
  std::vector<UnsupportedOp> unsupported;
  int64_t initializers = 0;
  int64_t parameters = 0;  // elements of all initializers
};
ModelInfo inspect_model(const std::string &path);

// The op types (default domain) that have a converter.
std::vector<std::string> supported_ops();

// A TensorProto file (.pb), as ONNX's test data stores inputs and outputs.
deploy::Tensor read_tensor_file(const std::string &path);
// A TensorProto from its bytes.
deploy::Tensor parse_tensor(std::string_view bytes, const std::string &display_name);

}  // namespace kiln::frontend::onnx
