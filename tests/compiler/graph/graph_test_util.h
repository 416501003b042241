#pragma once
// Helpers of the graph pass tests: random and small constant tensors, building a graph node by node,
// counting ops, and comparing two graphs' outputs through the executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/graph/op_def.h"

namespace kiln::graph::test {

inline deploy::Tensor random_tensor(const std::vector<int64_t> &shape, uint64_t seed, float lo = -1, float hi = 1) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<float>());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = d(rng);
  return t;
}

inline deploy::Tensor ints(const std::vector<int64_t> &v) {
  deploy::Tensor t = deploy::Tensor::empty({static_cast<int64_t>(v.size())}, deploy::DType::of<int64_t>());
  std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

inline deploy::Tensor scalar(float v) {
  deploy::Tensor t = deploy::Tensor::empty({}, deploy::DType::of<float>());
  *t.data_as<float>() = v;
  return t;
}

// Appends a node with inferred types; returns its first output.
inline ValueId add(Graph &g, const std::string &op, std::vector<ValueId> inputs,
                   std::map<std::string, Attribute> attrs = {}, const std::string &out = "") {
  Node n;
  n.op = op;
  n.name = g.unique_name(op);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.outputs = {kNoValue};
  auto types = infer_types(g, n);
  return g.add_node(n, {g.unique_name(out.empty() ? op + "_out" : out)}, types)[0];
}

inline int count(const Graph &g, const std::string &op) {
  int c = 0;
  for (const auto &n : g.nodes()) c += n.op == op ? 1 : 0;
  return c;
}

// Max |a - b| / max(1, max |b|) over every output, on the same random inputs.
inline double max_difference(const Graph &a, const Graph &b, uint64_t seed = 7) {
  std::vector<deploy::Tensor> in;
  for (ValueId i : a.inputs()) in.push_back(random_tensor(a.value(i).type.shape, seed++));
  driver::GraphExecutor ea(a), eb(b);
  auto oa = ea.run(in), ob = eb.run(in);
  EXPECT_EQ(oa.size(), ob.size());
  double worst = 0;
  for (size_t k = 0; k < oa.size() && k < ob.size(); ++k) {
    EXPECT_EQ(oa[k].shape(), ob[k].shape());
    double scale = 1;
    for (int64_t i = 0; i < ob[k].numel(); ++i) scale = std::max(scale, std::fabs(double(ob[k].data_as<float>()[i])));
    for (int64_t i = 0; i < oa[k].numel(); ++i)
      worst = std::max(worst, std::fabs(double(oa[k].data_as<float>()[i]) - ob[k].data_as<float>()[i]) / scale);
  }
  return worst;
}

}  // namespace kiln::graph::test
