#include <optional>
#include <vector>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/match_util.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"

namespace kiln::graph::passes {

namespace {

// The spatial pads a zero constant Pad of a rank-4 tensor adds to H and W ([h_begin, w_begin,
// h_end, w_end]), or nullopt when it pads N or C, pads by anything but zeros, or crops.
std::optional<std::vector<int64_t>> zero_spatial_pads(const Graph &g, const Node &pad) {
  if (pad.op != "Pad" || pad.attr_string("mode", "constant") != "constant") return std::nullopt;
  if (pad.inputs.size() > 3 && pad.inputs[3] != kNoValue) return std::nullopt;  // explicit axes
  if (pad.inputs.size() > 2 && pad.inputs[2] != kNoValue) {
    std::optional<double> v = scalar_constant(g, pad.inputs[2]);
    if (!v || *v != 0.0) return std::nullopt;
  }
  const Value &pv = g.value(pad.inputs[1]);
  if (!pv.is_constant() || g.value(pad.inputs[0]).type.rank() != 4) return std::nullopt;
  const std::vector<double> p = tensor_values(pv.constant);
  if (p.size() != 8 || p[0] != 0 || p[1] != 0 || p[4] != 0 || p[5] != 0) return std::nullopt;
  for (double x : p) {
    if (x < 0) return std::nullopt;
  }
  return std::vector<int64_t>{static_cast<int64_t>(p[2]), static_cast<int64_t>(p[3]), static_cast<int64_t>(p[6]),
                              static_cast<int64_t>(p[7])};
}

}  // namespace

Graph inline_injective_producers(const Graph &g) {
  const Uses u(g);
  Rewriter rw(g);
  for (const auto &n : g.nodes()) {
    if (n.op == "Conv" && n.inputs.size() >= 2 && n.attr_string("auto_pad", "NOTSET") == "NOTSET") {
      const ValueId x = n.inputs[0];
      const int32_t p = g.value(x).producer;
      // A Pad read only by this Conv: its zeros become the conv's padding and the Pad goes.
      if (p >= 0 && u.only(x)) {
        const Node &pad = g.nodes()[static_cast<size_t>(p)];
        if (std::optional<std::vector<int64_t>> extra = zero_spatial_pads(g, pad)) {
          std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
          if (pads.size() == 4) {
            for (size_t i = 0; i < 4; ++i) pads[i] += (*extra)[i];
            Node c = n;
            for (auto &i : c.inputs) i = rw.map(i);
            c.inputs[0] = rw.map(pad.inputs[0]);
            c.attrs["pads"] = Attribute::of_ints(pads);
            rw.set(n.outputs[0], rw.add(c, {g.value(n.outputs[0]).name})[0]);
            continue;
          }
        }
      }
    }
    rw.copy(n);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
