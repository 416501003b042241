#include <cmath>
#include <map>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "compiler/ir/deploy_dtype.h"

namespace kiln::graph::passes {

namespace {

deploy::Tensor float_tensor(const std::vector<int64_t> &shape, const std::vector<double> &v) {
  deploy::Tensor t = deploy::Tensor::empty(shape, deploy::DType::of<float>());
  for (size_t k = 0; k < v.size(); ++k) t.data_as<float>()[k] = static_cast<float>(v[k]);
  return t;
}

// Readers of each value of `g`.
std::vector<int> reader_counts(const Graph &g) {
  std::vector<int> c(g.values().size(), 0);
  for (const Node &n : g.nodes()) {
    for (ValueId i : n.inputs) {
      if (i != kNoValue) ++c[static_cast<size_t>(i)];
    }
  }
  for (ValueId o : g.outputs()) ++c[static_cast<size_t>(o)];
  return c;
}

}  // namespace

Graph fold_batch_norm(const Graph &g) {
  const std::vector<int> readers = reader_counts(g);
  Rewriter rw(g);
  for (const Node &n : g.nodes()) {
    if (n.op != "BatchNormalization" || n.outputs.size() != 1) {
      rw.copy(n);
      continue;
    }
    bool params_constant = true;
    for (size_t i = 1; i < 5; ++i) params_constant = params_constant && g.value(n.inputs[i]).is_constant();
    const TensorType &ty = g.value(n.outputs[0]).type;
    if (!params_constant || ty.dtype != ir::Float(32)) {
      rw.copy(n);
      continue;
    }
    const double eps = n.attr_float("epsilon", 1e-5);
    const std::vector<double> gamma = tensor_values(g.value(n.inputs[1]).constant),
                              beta = tensor_values(g.value(n.inputs[2]).constant),
                              mean = tensor_values(g.value(n.inputs[3]).constant),
                              var = tensor_values(g.value(n.inputs[4]).constant);
    const size_t c = gamma.size();
    std::vector<double> scale(c), shift(c);
    for (size_t k = 0; k < c; ++k) {
      scale[k] = gamma[k] / std::sqrt(var[k] + eps);
      shift[k] = beta[k] - mean[k] * scale[k];
    }
    // Into a Conv whose output only this node reads, with a constant weight (and bias).
    const ValueId x_old = n.inputs[0];
    const Value &xv = g.value(x_old);
    if (xv.producer >= 0 && readers[static_cast<size_t>(x_old)] == 1 && !rw.is_output(x_old)) {
      const Node &conv = g.node(xv.producer);
      const bool bias_ok =
          conv.inputs.size() < 3 || conv.inputs[2] == kNoValue || g.value(conv.inputs[2]).is_constant();
      if (conv.op == "Conv" && g.value(conv.inputs[1]).is_constant() && bias_ok) {
        // The Conv was copied already: rebuild it with the folded weight and bias.
        const Value &w = g.value(conv.inputs[1]);
        std::vector<double> wv = tensor_values(w.constant);
        const size_t per = wv.size() / c;
        for (size_t k = 0; k < wv.size(); ++k) wv[k] *= scale[k / per];
        std::vector<double> b(c, 0.0);
        if (conv.inputs.size() >= 3 && conv.inputs[2] != kNoValue) b = tensor_values(g.value(conv.inputs[2]).constant);
        for (size_t k = 0; k < c; ++k) b[k] = b[k] * scale[k] + shift[k];
        Node folded = conv;
        folded.inputs = {rw.map(conv.inputs[0]), rw.constant(w.name + "_bn", float_tensor(w.type.shape, wv)),
                         rw.constant(conv.name + "_bias_bn", float_tensor({static_cast<int64_t>(c)}, b))};
        folded.name = conv.name;
        rw.set(n.outputs[0], rw.add(folded, {g.value(n.outputs[0]).name})[0]);
        continue;
      }
    }
    // Into a Gemm, or a MatMul of two matrices, with a constant weight (and bias) whose [N, F] output
    // only this node reads: the BatchNormalization's channel is the dense layer's feature axis F.
    if (xv.producer >= 0 && readers[static_cast<size_t>(x_old)] == 1 && !rw.is_output(x_old) && ty.rank() == 2) {
      const Node &dense = g.node(xv.producer);
      const bool gemm = dense.op == "Gemm", matmul = dense.op == "MatMul";
      const bool has_bias = gemm && dense.inputs.size() >= 3 && dense.inputs[2] != kNoValue;
      auto constant_matrix = [&](ValueId v) {
        const Value &val = g.value(v);
        return val.is_constant() && val.type.rank() == 2 && val.type.dtype == ir::Float(32);
      };
      if ((gemm || (matmul && g.value(dense.inputs[0]).type.rank() == 2)) && constant_matrix(dense.inputs[1]) &&
          (!has_bias || g.value(dense.inputs[2]).is_constant())) {
        const Value &w = g.value(dense.inputs[1]);
        // y = alpha A B' + beta C, so y * scale + shift = A (alpha B' scale) + (beta C scale + shift):
        // the weight's output column f (B's row f when transB) times alpha scale[f]; alpha and beta
        // become 1.
        const bool trans_b = gemm && dense.attr_int("transB", 0) != 0;
        const double alpha = gemm ? dense.attr_float("alpha", 1.0) : 1.0,
                     beta = gemm ? dense.attr_float("beta", 1.0) : 1.0;
        std::vector<double> wv = tensor_values(w.constant);
        const int64_t rows = w.type.shape[0], cols = w.type.shape[1];
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j)
            wv[static_cast<size_t>(i * cols + j)] *= alpha * scale[static_cast<size_t>(trans_b ? i : j)];
        }
        // The bias: over the features [F], or [M, F] where C has rows.
        const int64_t m = ty.shape[0], f = ty.shape[1];
        std::vector<int64_t> c_shape;
        std::vector<double> cv;
        if (has_bias) {
          c_shape = g.value(dense.inputs[2]).type.shape;
          cv = tensor_values(g.value(dense.inputs[2]).constant);
        }
        while (c_shape.size() < 2) c_shape.insert(c_shape.begin(), 1);
        const int64_t b_rows = c_shape[0] == 1 ? 1 : m;
        std::vector<double> b(static_cast<size_t>(b_rows * f));
        for (int64_t i = 0; i < b_rows; ++i) {
          for (int64_t j = 0; j < f; ++j) {
            const double c_ij =
                cv.empty()
                    ? 0.0
                    : cv[static_cast<size_t>((c_shape[0] == 1 ? 0 : i) * c_shape[1] + (c_shape[1] == 1 ? 0 : j))];
            b[static_cast<size_t>(i * f + j)] =
                beta * c_ij * scale[static_cast<size_t>(j)] + shift[static_cast<size_t>(j)];
          }
        }
        Node folded;
        folded.op = "Gemm";
        folded.name = dense.name;
        if (trans_b) folded.attrs["transB"] = Attribute::of_int(1);
        if (gemm && dense.attr_int("transA", 0) != 0) folded.attrs["transA"] = Attribute::of_int(1);
        folded.inputs = {
            rw.map(dense.inputs[0]), rw.constant(w.name + "_bn", float_tensor(w.type.shape, wv)),
            rw.constant(dense.name + "_bias_bn",
                        float_tensor(b_rows == 1 ? std::vector<int64_t>{f} : std::vector<int64_t>{m, f}, b))};
        rw.set(n.outputs[0], rw.add(folded, {g.value(n.outputs[0]).name})[0]);
        continue;
      }
    }
    // Otherwise a scale and a shift over the channel axis.
    std::vector<int64_t> cshape{static_cast<int64_t>(c)};
    for (int k = 2; k < ty.rank(); ++k) cshape.push_back(1);
    Node mul;
    mul.op = "Mul";
    mul.name = n.name + "_scale";
    mul.inputs = {rw.map(x_old), rw.constant(n.name + "_scale", float_tensor(cshape, scale))};
    const ValueId scaled = rw.add(mul, {g.value(n.outputs[0]).name + "_scaled"})[0];
    Node add;
    add.op = "Add";
    add.name = n.name + "_shift";
    add.inputs = {scaled, rw.constant(n.name + "_shift", float_tensor(cshape, shift))};
    rw.set(n.outputs[0], rw.add(add, {g.value(n.outputs[0]).name})[0]);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
