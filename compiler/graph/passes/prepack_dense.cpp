#include <cstring>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "compiler/ops/registry.h"

namespace kiln::graph::passes {

namespace {

// A float32 weight [N, K] packed as dense_pack.x86 reads a prepacked one: [ceil(N/bn), K, bn], the
// columns past N zero.
deploy::Tensor pack_dense_weight(const deploy::Tensor &w, int64_t bn) {
  const int64_t N = w.shape()[0], K = w.shape()[1], blocks = (N + bn - 1) / bn;
  deploy::Tensor out = deploy::Tensor::empty({blocks, K, bn}, w.dtype());
  std::memset(out.data(), 0, out.nbytes());
  const float *src = w.data_as<float>();
  float *dst = out.data_as<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) dst[((n / bn) * K + k) * bn + n % bn] = src[n * K + k];
  return out;
}

}  // namespace

Graph prepack_dense(const Graph &g, const ops::Target &target) {
  Rewriter rw(g);
  for (const Node &n : g.nodes()) {
    const bool packs = n.op == "FusedDense" && n.attr_int("bn", 0) == 0 && g.value(n.inputs[1]).is_constant();
    if (!packs) {
      rw.copy(n);
      continue;
    }
    // The block: the template's own choice for this dense with a prepacked weight.
    const Kernel k = find_op(n.op)->kernel(OpContext(g, n));
    contracts::Json args = k.template_args;
    args.set("prepacked", true);
    const int64_t bn = ops::Task(k.template_name, args, target).default_config().split("tile_x").back();
    const Value &w = g.value(n.inputs[1]);
    Node c = n;
    c.attrs["bn"] = Attribute::of_int(bn);
    c.attrs["n"] = Attribute::of_int(w.type.shape[0]);
    // The node copied with its weight mapped to the packed constant (other readers of the weight
    // keep the unpacked one).
    const ValueId unpacked = rw.map(n.inputs[1]);
    rw.set(n.inputs[1], rw.constant(w.name + ".packed", pack_dense_weight(w.constant, bn)));
    rw.copy(c);
    rw.set(n.inputs[1], unpacked);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
