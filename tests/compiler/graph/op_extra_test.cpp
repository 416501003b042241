// Ops of compiler/graph/op_extra.cpp on cases the ONNX node tests leave out: scatters with
// duplicate and negative indices, Einsum with a broadcast ellipsis and an implicit output,
// quantization's round-half-to-even and saturation, and bad models failing as GraphErrors that name
// the node.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/graph/op_def.h"
#include "compiler/ir/deploy_dtype.h"

namespace kiln::graph {
namespace {

template <class T>
deploy::Tensor tensor(const std::vector<int64_t> &shape, const std::vector<T> &values) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<T>());
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> values_of(const deploy::Tensor &t) {
  const T *p = t.data_as<T>();
  return std::vector<T>(p, p + t.numel());
}

// A graph of one node whose inputs are graph inputs; runs it on `inputs` and returns its outputs.
std::vector<deploy::Tensor> run_node(const std::string &op, const std::vector<deploy::Tensor> &inputs,
                                     std::map<std::string, Attribute> attrs = {}, int outputs = 1) {
  Graph g;
  Node n;
  n.op = op;
  n.name = "n";
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const deploy::Tensor &t = inputs[i];
    n.inputs.push_back(g.add_input("in" + std::to_string(i), TensorType{ir::to_ir_type(t.dtype()), t.shape()}));
  }
  n.outputs.assign(static_cast<size_t>(outputs), kNoValue);
  std::vector<TensorType> types = infer_types(g, n);
  std::vector<std::string> names;
  for (int o = 0; o < outputs; ++o) names.push_back("out" + std::to_string(o));
  for (ValueId v : g.add_node(n, names, types)) g.add_output(v);
  driver::GraphExecutor ex(std::move(g));
  return ex.run(inputs);
}

// The GraphError message of inferring a node's types, or "" when inference succeeds.
std::string infer_error(const std::string &op, const std::vector<TensorType> &inputs,
                        std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  Node n;
  n.op = op;
  n.name = "bad";
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) n.inputs.push_back(g.add_input("in" + std::to_string(i), inputs[i]));
  n.outputs.assign(1, kNoValue);
  try {
    infer_types(g, n);
  } catch (const GraphError &e) {
    return e.what();
  }
  return "";
}

TEST(ScatterND, TheLastOfDuplicateIndicesWins) {
  // data [4], indices [[1], [-1], [1]]: element 1 gets the third update, element 3 the second.
  auto out = run_node("ScatterND", {tensor<float>({4}, {0, 0, 0, 0}), tensor<int64_t>({3, 1}, {1, -1, 1}),
                                    tensor<float>({3}, {5, 6, 7})});
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{0, 7, 0, 6}));
}

TEST(ScatterND, AddsRowsOfDuplicateIndices) {
  auto out = run_node(
      "ScatterND",
      {tensor<int32_t>({2, 2}, {1, 1, 1, 1}), tensor<int64_t>({2, 1}, {0, 0}), tensor<int32_t>({2, 2}, {2, 3, 4, 5})},
      {{"reduction", Attribute::of_string("add")}});
  EXPECT_EQ(values_of<int32_t>(out[0]), (std::vector<int32_t>{7, 9, 1, 1}));
}

TEST(ScatterElements, MultipliesAlongTheAxisWithNegativeIndices) {
  auto out = run_node("ScatterElements",
                      {tensor<float>({2, 3}, {1, 1, 1, 1, 1, 1}), tensor<int64_t>({2, 2}, {-1, 0, 2, 2}),
                       tensor<float>({2, 2}, {2, 3, 4, 5})},
                      {{"axis", Attribute::of_int(1)}, {"reduction", Attribute::of_string("mul")}});
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{3, 1, 2, 1, 1, 20}));
}

TEST(Einsum, BroadcastsTheEllipsisAndSumsRepeatedLabels) {
  // "...ij,...jk" (implicit output "...ik") with batch shapes [2, 1] and [3]: a broadcast batched
  // matrix product.
  std::vector<float> a(2 * 1 * 2 * 2), b(3 * 2 * 2);
  for (size_t k = 0; k < a.size(); ++k) a[k] = static_cast<float>(k) - 3;
  for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<float>(k % 5) + 1;
  auto out = run_node("Einsum", {tensor<float>({2, 1, 2, 2}, a), tensor<float>({3, 2, 2}, b)},
                      {{"equation", Attribute::of_string("...ij,...jk")}});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3, 2, 2}));
  std::vector<float> want;
  for (int p = 0; p < 2; ++p) {
    for (int q = 0; q < 3; ++q) {
      for (int i = 0; i < 2; ++i) {
        for (int k = 0; k < 2; ++k) {
          float s = 0;
          for (int j = 0; j < 2; ++j)
            s += a[static_cast<size_t>(p * 4 + i * 2 + j)] * b[static_cast<size_t>(q * 4 + j * 2 + k)];
          want.push_back(s);
        }
      }
    }
  }
  EXPECT_EQ(values_of<float>(out[0]), want);
}

TEST(Einsum, ARepeatedLabelIsADiagonal) {
  auto trace = run_node("Einsum", {tensor<float>({2, 2}, {1, 2, 3, 4})}, {{"equation", Attribute::of_string("ii")}});
  EXPECT_TRUE(trace[0].shape().empty());
  EXPECT_EQ(values_of<float>(trace[0]), (std::vector<float>{5}));
}

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  auto out = run_node("QuantizeLinear", {tensor<float>({7}, {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 300, -300}),
                                         tensor<float>({}, {1}), tensor<int8_t>({}, {0})});
  EXPECT_EQ(values_of<int8_t>(out[0]), (std::vector<int8_t>{0, 2, 2, 0, -2, 127, -128}));
  auto u8 = run_node("QuantizeLinear", {tensor<float>({3}, {-4, 3, 1000}), tensor<float>({}, {2})});
  EXPECT_EQ(values_of<uint8_t>(u8[0]), (std::vector<uint8_t>{0, 2, 255}));
}

TEST(DequantizeLinear, AppliesTheScaleAndZeroPointPerAxis) {
  auto out = run_node(
      "DequantizeLinear",
      {tensor<uint8_t>({2, 2}, {10, 20, 30, 40}), tensor<float>({2}, {0.5f, 2}), tensor<uint8_t>({2}, {10, 0})},
      {{"axis", Attribute::of_int(0)}});
  EXPECT_EQ(values_of<float>(out[0]), (std::vector<float>{0, 5, 60, 80}));
}

TEST(ExtraOps, BadModelsAreGraphErrorsNamingTheNode) {
  const TensorType m34{ir::Float(32), {3, 4}};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {infer_error("Einsum", {m34, TensorType{ir::Float(32), {5, 2}}}, {{"equation", Attribute::of_string("ij,jk")}}),
       "the extents 4 and 5 of label 'j' differ"},
      {infer_error("Einsum", {m34}, {{"equation", Attribute::of_string("ij->k")}}),
       "the output label 'k' is not in any input"},
      {infer_error("QuantizeLinear", {m34, TensorType{ir::Float(32), {3}}}), "the scale has 3 values for axis 1"},
      {infer_error("ScatterElements", {m34, TensorType{ir::Int(64), {3, 4}}, m34},
                   {{"reduction", Attribute::of_string("avg")}}),
       "unknown reduction 'avg'"},
      {infer_error("NegativeLogLikelihoodLoss", {m34, TensorType{ir::Int(64), {4}}}), "needs the shape int64[3]"},
      {infer_error("GatherND", {m34, TensorType{ir::Int(64), {2, 3}}}), "the last axis of indices"},
  };
  for (const auto &[msg, want] : cases) {
    EXPECT_NE(msg.find("node 'bad'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln::graph
