#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/fuse_ops.h"
#include "compiler/graph/passes/match_util.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "contracts/json.h"

namespace kiln::graph::passes {

namespace {

using contracts::Json;

// A fused anchor's kernel takes its data, weight and bias, and at most this many epilogue inputs.
constexpr size_t kMaxEpilogueInputs = kMaxGroupInputs - 3;

// What one elementwise consumer becomes in the anchor's epilogue.
struct Step {
  Json descriptor;
  ValueId extra = kNoValue;  // a tensor the step reads (old graph), if any
};

// The epilogue step for node `n` reading `cur` (its only use of it), or nullopt when `n` does not
// fuse.
std::optional<Step> step_for(const Graph &g, const Node &n, ValueId cur) {
  const TensorType &t = g.value(cur).type;
  if (n.outputs.size() != 1 || g.value(n.outputs[0]).type != t) return std::nullopt;
  auto only = [&](const char *op) { return Step{Json::object({{"op", op}})}; };
  if (n.op == "Relu") return only("relu");
  if (n.op == "Sigmoid") return only("sigmoid");
  if (n.op == "Tanh") return only("tanh");
  if (n.op == "HardSwish") return only("hard_swish");
  if (n.op == "HardSigmoid")
    return Step{Json::object(
        {{"op", "hard_sigmoid"}, {"alpha", n.attr_float("alpha", 0.2)}, {"beta", n.attr_float("beta", 0.5)}})};
  if (n.op == "LeakyRelu") return Step{Json::object({{"op", "leaky_relu"}, {"alpha", n.attr_float("alpha", 0.01)}})};
  if (n.op == "Clip") {
    const ValueId lo = n.inputs.size() > 1 ? n.inputs[1] : kNoValue, hi = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    std::optional<double> a = lo == kNoValue ? std::optional<double>(-3.4e38) : scalar_constant(g, lo);
    std::optional<double> b = hi == kNoValue ? std::optional<double>(3.4e38) : scalar_constant(g, hi);
    if (!a || !b) return std::nullopt;
    return Step{Json::object({{"op", "clip"}, {"min", *a}, {"max", *b}})};
  }
  if ((n.op == "Add" || n.op == "Mul") && n.inputs.size() == 2) {
    const ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
    if (n.inputs[0] == n.inputs[1]) return std::nullopt;
    if (std::optional<double> c = scalar_constant(g, other))
      return Step{Json::object({{"op", n.op == "Add" ? "add_scalar" : "multiply_scalar"}, {"value", *c}})};
    if (g.value(other).type == t) return Step{Json::object({{"op", n.op == "Add" ? "add" : "multiply"}}), other};
  }
  return std::nullopt;
}

struct Chain {
  std::vector<size_t> nodes;  // the consumers fused, in order (indices into the old graph)
  Json epilogue = Json::array();
  std::vector<ValueId> extras;
  std::vector<bool> extra_is_bias;  // an extra read as bias[N] (its data is reshaped to [N])
  // Per extra: the broadcast shape it is passed with (ExprRegion::broadcast); empty: a bias, or a
  // tensor of the output's elements passed in the anchor's output shape.
  std::vector<std::vector<int64_t>> extra_broadcast;
};

// GELU as exported: x * 0.5 * (1 + erf(x / sqrt 2)) (the constants on either side, the 0.5 applied
// first or last, x / sqrt 2 as a division or a multiplication). The nodes it spans, in order, the
// last one's output being gelu(x); empty when `cur`'s readers are not that pattern.
std::vector<size_t> match_gelu(const Graph &g, const Uses &u, ValueId cur) {
  const auto &rd = u.readers[static_cast<size_t>(cur)];
  if (rd.size() != 2 || u.is_output[static_cast<size_t>(cur)]) return {};
  for (int first = 0; first < 2; ++first) {
    const size_t scale_k = rd[static_cast<size_t>(first)], mul_k = rd[static_cast<size_t>(1 - first)];
    const Node &sc = g.nodes()[scale_k];
    if (sc.inputs.size() != 2 || sc.inputs[0] != cur) continue;
    const std::optional<double> c = scalar_constant(g, sc.inputs[1]);
    if (!((sc.op == "Div" && near(c, std::sqrt(2.0))) || (sc.op == "Mul" && near(c, std::sqrt(0.5))))) continue;
    auto erf_k = u.only(sc.outputs[0]);
    if (!erf_k || g.nodes()[*erf_k].op != "Erf") continue;
    auto add_k = u.only(g.nodes()[*erf_k].outputs[0]);
    if (!add_k || g.nodes()[*add_k].op != "Add") continue;
    const ValueId erf_out = g.nodes()[*erf_k].outputs[0];
    if (!near(scalar_constant(g, other_operand(g.nodes()[*add_k], erf_out)), 1.0)) continue;
    const ValueId add_out = g.nodes()[*add_k].outputs[0];
    auto next = u.only(add_out);
    if (!next) continue;
    const Node &m = g.nodes()[mul_k];
    if (m.op != "Mul") continue;
    if (*next == mul_k && other_operand(m, add_out) == cur) {
      // (x * (1 + erf)) * 0.5
      auto half = u.only(m.outputs[0]);
      if (!half || g.nodes()[*half].op != "Mul" ||
          !near(scalar_constant(g, other_operand(g.nodes()[*half], m.outputs[0])), 0.5))
        continue;
      return {scale_k, *erf_k, *add_k, mul_k, *half};
    }
    // (x * 0.5) * (1 + erf)
    if (!near(scalar_constant(g, other_operand(m, cur)), 0.5)) continue;
    auto prod = u.only(m.outputs[0]);
    if (!prod || *prod != *next || other_operand(g.nodes()[*prod], m.outputs[0]) != add_out) continue;
    return {scale_k, *erf_k, *add_k, mul_k, *prod};
  }
  return {};
}

// GELU's tanh approximation as exported: x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))),
// x^3 as Pow(x, 3) or x * (x * x), the 0.5 applied first or last. The nodes it spans, in order;
// empty when `cur`'s readers are not that pattern.
std::vector<size_t> match_gelu_tanh(const Graph &g, const Uses &u, ValueId cur) {
  if (u.is_output[static_cast<size_t>(cur)]) return {};
  std::set<size_t> readers(u.readers[static_cast<size_t>(cur)].begin(), u.readers[static_cast<size_t>(cur)].end());
  auto is = [&](size_t k, const char *op) { return g.nodes()[k].op == op; };
  auto out = [&](size_t k) { return g.nodes()[k].outputs[0]; };
  // The only reader of `v` when it is `op` with a scalar constant other operand near `c` (c < 0:
  // any other operand).
  auto next = [&](ValueId v, const char *op, double c) -> std::optional<size_t> {
    auto r = u.only(v);
    if (!r || !is(*r, op)) return std::nullopt;
    const ValueId o = other_operand(g.nodes()[*r], v);
    if (o == kNoValue || (c >= 0 && !near(scalar_constant(g, o), c))) return std::nullopt;
    return r;
  };
  std::vector<size_t> nodes;
  std::optional<size_t> cube;
  for (size_t k : readers) {
    const Node &n = g.nodes()[k];
    if (is(k, "Pow") && n.inputs[0] == cur && near(scalar_constant(g, n.inputs[1]), 3.0)) {
      cube = k;
      nodes = {k};
    } else if (is(k, "Mul") && n.inputs.size() == 2 && n.inputs[0] == cur && n.inputs[1] == cur) {
      auto c3 = u.only(out(k));
      if (c3 && is(*c3, "Mul") && other_operand(g.nodes()[*c3], out(k)) == cur) {
        cube = c3;
        nodes = {k, *c3};
      }
    }
  }
  if (!cube) return {};
  auto s1 = next(out(*cube), "Mul", 0.044715);
  if (!s1) return {};
  auto inner = next(out(*s1), "Add", -1);
  if (!inner || other_operand(g.nodes()[*inner], out(*s1)) != cur) return {};
  auto s2 = next(out(*inner), "Mul", std::sqrt(2.0 / M_PI));
  auto th = s2 ? u.only(out(*s2)) : std::nullopt;
  if (!th || !is(*th, "Tanh")) return {};
  auto a1 = next(out(*th), "Add", 1.0);
  if (!a1) return {};
  nodes.insert(nodes.end(), {*s1, *inner, *s2, *th, *a1});
  // The two remaining readers of x: (x * (1 + t)) * 0.5, or (x * 0.5) * (1 + t).
  std::set<size_t> used(nodes.begin(), nodes.end());
  std::vector<size_t> rest;
  for (size_t k : readers) {
    if (!used.count(k)) rest.push_back(k);
  }
  if (rest.size() != 1 || !is(rest[0], "Mul")) return {};
  const size_t m = rest[0];
  const ValueId a1_out = out(*a1);
  if (other_operand(g.nodes()[m], cur) == a1_out && u.only(a1_out) == m) {
    auto half = next(out(m), "Mul", 0.5);
    if (!half) return {};
    nodes.insert(nodes.end(), {m, *half});
  } else if (near(scalar_constant(g, other_operand(g.nodes()[m], cur)), 0.5)) {
    auto prod = u.only(out(m));
    if (!prod || *prod != u.only(a1_out) || !is(*prod, "Mul") || other_operand(g.nodes()[*prod], out(m)) != a1_out)
      return {};
    nodes.insert(nodes.end(), {m, *prod});
  } else {
    return {};
  }
  // In graph order, so the last one is the result.
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

// Appends to chain `c` the elementwise region from `cur` (made by node `producer`) to the
// producer's immediate post-dominator as one expression step (composed with an expression step
// just before it); advances cur and producer to the region's end. False when there is none.
bool add_region(const Graph &g, Chain &c, ValueId &cur, size_t &producer, const std::vector<size_t> &ipdom,
                int channel_axis, const std::vector<int64_t> &anchor_shape, const std::vector<bool> &absorbed) {
  if (c.nodes.size() >= kMaxGroupNodes || c.extras.size() > kMaxEpilogueInputs) return false;
  std::optional<ExprRegion> region =
      elementwise_region(g, cur, ipdom[producer], channel_axis, anchor_shape, absorbed, kMaxGroupNodes - c.nodes.size(),
                         kMaxEpilogueInputs - c.extras.size());
  if (!region) return false;
  c.nodes.insert(c.nodes.end(), region->nodes.begin(), region->nodes.end());
  // An expression right after an expression: one stage.
  const bool after_expr = c.epilogue.size() > 0 && c.epilogue[c.epilogue.size() - 1]["op"].as_string() == "expr";
  std::optional<Json> composed =
      after_expr ? compose_exprs(c.epilogue[c.epilogue.size() - 1], region->descriptor) : std::nullopt;
  if (composed) {
    Json rest = Json::array();
    for (size_t i = 0; i + 1 < c.epilogue.size(); ++i) rest.push_back(c.epilogue[i]);
    rest.push_back(*composed);
    c.epilogue = rest;
  } else {
    c.epilogue.push_back(region->descriptor);
  }
  c.extras.insert(c.extras.end(), region->extras.begin(), region->extras.end());
  c.extra_is_bias.insert(c.extra_is_bias.end(), region->per_channel.begin(), region->per_channel.end());
  c.extra_broadcast.insert(c.extra_broadcast.end(), region->broadcast.begin(), region->broadcast.end());
  producer = region->nodes.back();
  cur = g.nodes()[producer].outputs[0];
  return true;
}

// The epilogue chain after an anchor's output `cur` of type `t`, computed as shape `anchor_shape`:
// what step_for accepts, GELU, a bias (a constant of N elements broadcast over the rows, N the last
// axis) and, for the matrix anchors (`matrix`), Sub and Div by a scalar constant.
Chain follow_chain(const Graph &g, const Uses &u, ValueId cur, bool matrix, const std::vector<int64_t> &anchor_shape,
                   const std::vector<bool> &absorbed, const std::vector<size_t> &ipdom, size_t producer) {
  Chain c;
  const TensorType t = g.value(cur).type;
  while (c.nodes.size() < kMaxGroupNodes) {
    if (matrix) {
      std::vector<size_t> gelu = match_gelu(g, u, cur);
      bool tanh_form = false;
      if (gelu.empty()) {
        gelu = match_gelu_tanh(g, u, cur);
        tanh_form = true;
      }
      bool taken = false;
      for (size_t r : gelu) taken = taken || absorbed[r];
      if (!gelu.empty() && !taken) {
        c.nodes.insert(c.nodes.end(), gelu.begin(), gelu.end());
        c.epilogue.push_back(Json::object({{"op", "gelu"}, {"approximate", tanh_form ? "tanh" : "none"}}));
        cur = g.nodes()[gelu.back()].outputs[0];
        producer = gelu.back();
        continue;
      }
    }
    auto r = u.only(cur);
    if (r && absorbed[*r]) break;
    if (!r || c.extras.size() >= kMaxEpilogueInputs) {
      if (!add_region(g, c, cur, producer, ipdom, t.rank() - 1, anchor_shape, absorbed)) break;
      continue;
    }
    const Node &n = g.nodes()[*r];
    std::optional<Step> s;
    if (matrix && n.outputs.size() == 1 && g.value(n.outputs[0]).type == t) {
      const ValueId other = other_operand(n, cur);
      if (other != kNoValue) {
        const Value &ov = g.value(other);
        const std::optional<double> sc = scalar_constant(g, other);
        if (n.op == "Add" && !sc && ov.is_constant() && ov.type.dtype == t.dtype && ov.type.rank() >= 1 &&
            ov.type.shape.back() == t.shape.back() && ov.type.numel() == t.shape.back()) {
          s = Step{Json::object({{"op", "bias_add"}}), other};
          c.extra_is_bias.push_back(true);
          c.extra_broadcast.emplace_back();
        } else if (sc && n.inputs[0] == cur && (n.op == "Sub" || n.op == "Div") && !(n.op == "Div" && *sc == 0.0)) {
          s = Step{Json::object({{"op", n.op == "Sub" ? "subtract_scalar" : "divide_scalar"}, {"value", *sc}})};
        }
      }
    }
    if (!s) {
      s = step_for(g, n, cur);
      if (s && s->extra != kNoValue) {
        c.extra_is_bias.push_back(false);
        c.extra_broadcast.emplace_back();
      }
    }
    if (!s) {
      if (!add_region(g, c, cur, producer, ipdom, t.rank() - 1, anchor_shape, absorbed)) break;
      continue;
    }
    c.nodes.push_back(*r);
    c.epilogue.push_back(s->descriptor);
    if (s->extra != kNoValue) c.extras.push_back(s->extra);
    cur = n.outputs[0];
    producer = *r;
  }
  return c;
}

int64_t product(const std::vector<int64_t> &v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

// A matrix anchor: a MatMul (or Gemm) that becomes FusedDense or FusedMatMul.
struct MatrixAnchor {
  bool dense = false;
  ValueId a = kNoValue;      // the activations (old graph)
  ValueId b = kNoValue;      // FusedMatMul's b (old graph), before any absorbed Transpose
  deploy::Tensor weight;     // FusedDense's weight [N, K]
  ValueId bias = kNoValue;   // Gemm's bias constant
  bool transpose_b = false;  // FusedMatMul: b is [.., N, K] (an absorbed Transpose)
  std::optional<size_t> transpose_node;
  int64_t batch = 1, b_batch = 1, m = 0, k = 0, n = 0;
};

// A float32 [K, N] (or, transposed, [N, K]) constant as [N, K].
deploy::Tensor weight_nk(const deploy::Tensor &w, bool is_kn) {
  const int64_t r = w.shape()[0], c = w.shape()[1];
  if (!is_kn) return w;
  deploy::Tensor t = deploy::Tensor::empty({c, r}, w.dtype());
  const float *src = w.data_as<float>();
  float *dst = t.data_as<float>();
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) dst[j * r + i] = src[i * c + j];
  }
  return t;
}

std::optional<MatrixAnchor> matrix_anchor(const Graph &g, const Uses &u, const Node &n) {
  const TensorType &out = g.value(n.outputs[0]).type;
  if (out.dtype != ir::Float(32)) return std::nullopt;
  MatrixAnchor m;
  if (n.op == "Gemm") {
    const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
    if (ta || n.attr_float("alpha", 1.0) != 1.0 || n.attr_float("beta", 1.0) != 1.0) return std::nullopt;
    const Value &w = g.value(n.inputs[1]);
    if (!w.is_constant() || w.type.dtype != ir::Float(32)) return std::nullopt;
    const ValueId c = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    if (c != kNoValue && !(g.value(c).is_constant() && g.value(c).type.numel() == out.shape[1] &&
                           g.value(c).type.shape.back() == out.shape[1]))
      return std::nullopt;
    m.dense = true;
    m.a = n.inputs[0];
    m.weight = weight_nk(w.constant, !tb);
    m.bias = c;
    m.m = out.shape[0];
    m.n = out.shape[1];
    m.k = g.value(n.inputs[0]).type.shape[1];
    return m;
  }
  if (n.op != "MatMul") return std::nullopt;
  const TensorType &a = g.value(n.inputs[0]).type, &b = g.value(n.inputs[1]).type;
  if (a.rank() < 2 || b.rank() < 2 || a.dtype != ir::Float(32) || b.dtype != ir::Float(32)) return std::nullopt;
  m.a = n.inputs[0];
  m.k = a.shape.back();
  m.n = b.shape.back();
  const Value &bv = g.value(n.inputs[1]);
  if (b.rank() == 2 && bv.is_constant()) {
    m.dense = true;
    m.weight = weight_nk(bv.constant, true);
    m.m = product(a.shape, 0, a.shape.size() - 1);
    return m;
  }
  // Batched: b's batch axes are a's or all 1 (then b is shared); rank 2 b is shared too.
  if (a.rank() < 3 || b.rank() > a.rank()) return std::nullopt;
  const std::vector<int64_t> ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  m.batch = product(ab, 0, ab.size());
  m.b_batch = product(bb, 0, bb.size());
  if (!(bb == ab || m.b_batch == 1)) return std::nullopt;
  m.m = a.shape[a.shape.size() - 2];
  m.b = n.inputs[1];
  // b = Transpose(y) swapping the last two axes, read only here: y is b transposed.
  const Value &bval = g.value(n.inputs[1]);
  if (bval.producer >= 0 && u.only(n.inputs[1])) {
    const Node &tr = g.nodes()[static_cast<size_t>(bval.producer)];
    std::vector<int64_t> perm = tr.attr_ints("perm");
    std::vector<int64_t> swap;
    for (int64_t i = 0; i < b.rank(); ++i) swap.push_back(i);
    if (b.rank() >= 2) std::swap(swap[swap.size() - 1], swap[swap.size() - 2]);
    if (tr.op == "Transpose" && perm == swap) {
      m.transpose_b = true;
      m.transpose_node = static_cast<size_t>(bval.producer);
      m.b = tr.inputs[0];
    }
  }
  return m;
}

// Emits the fused node of matrix anchor `m` (old node `anchor`) with chain `c`, ending at old value
// `out`.
void emit_matrix(Rewriter &rw, const Graph &g, const Node &anchor, const MatrixAnchor &m, const Chain &c, ValueId out) {
  const std::string &name = anchor.name;
  Node f;
  f.name = name;
  f.attrs["epilogue"] = Attribute::of_string(c.epilogue.dump());
  std::vector<int64_t> flat;
  if (m.dense) {
    f.op = "FusedDense";
    flat = {m.m, m.n};
    ValueId bias = kNoValue;
    if (m.bias != kNoValue) {
      deploy::Tensor b = g.value(m.bias).constant.view(0, {m.n});
      bias = rw.constant(name + "_bias", b);
    }
    f.inputs = {rw.view_as(rw.map(m.a), {m.m, m.k}, name + "_in"), rw.constant(name + "_weight", m.weight), bias};
  } else {
    f.op = "FusedMatMul";
    flat = {m.batch, m.m, m.n};
    const std::vector<int64_t> bshape =
        m.transpose_b ? std::vector<int64_t>{m.b_batch, m.n, m.k} : std::vector<int64_t>{m.b_batch, m.k, m.n};
    f.attrs["transpose_b"] = Attribute::of_int(m.transpose_b ? 1 : 0);
    f.inputs = {rw.view_as(rw.map(m.a), {m.batch, m.m, m.k}, name + "_a"),
                rw.view_as(rw.map(m.b), bshape, name + "_b")};
  }
  for (size_t e = 0; e < c.extras.size(); ++e) {
    if (c.extra_is_bias[e]) {
      f.inputs.push_back(rw.constant(name + "_bias", g.value(c.extras[e]).constant.view(0, {m.n})));
    } else {
      const std::vector<int64_t> &b = c.extra_broadcast[e];
      f.inputs.push_back(rw.view_as(rw.map(c.extras[e]), b.empty() ? flat : b, name + "_extra"));
    }
  }
  const TensorType &ot = g.value(out).type;
  const bool reshaped = ot.shape != flat;
  const ValueId y = rw.add(f, {reshaped ? name + "_flat" : g.value(out).name})[0];
  if (!reshaped) {
    rw.set(out, y);
    return;
  }
  Node r;
  r.op = "Reshape";
  r.name = name + "_out";
  r.inputs = {y, rw.int64_constant("shape", ot.shape)};
  rw.set(out, rw.add(r, {g.value(out).name})[0]);
}

}  // namespace

Graph fuse_epilogues(const Graph &g) {
  const Uses u(g);
  const std::vector<size_t> ipdom = immediate_post_dominators(g);
  const auto &readers = u.readers;
  const auto &is_output = u.is_output;

  // Chains from every 2-D float32 Conv, and from the matrix anchors (MatMul, Gemm).
  std::map<size_t, Chain> chains;           // anchor index -> chain
  std::map<size_t, MatrixAnchor> matrices;  // anchor index -> its matrix form
  std::map<size_t, size_t> last_of_chain;   // last node index (consumer, or the anchor itself) -> anchor index
  std::vector<bool> absorbed(g.nodes().size(), false);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    if (absorbed[k]) continue;
    if (std::optional<MatrixAnchor> m = matrix_anchor(g, u, n)) {
      if (m->transpose_node && absorbed[*m->transpose_node]) m->transpose_node.reset();
      const std::vector<int64_t> flat =
          m->dense ? std::vector<int64_t>{m->m, m->n} : std::vector<int64_t>{m->batch, m->m, m->n};
      Chain c = follow_chain(g, u, n.outputs[0], true, flat, absorbed, ipdom, k);
      for (size_t r : c.nodes) absorbed[r] = true;
      if (m->transpose_node) absorbed[*m->transpose_node] = true;
      last_of_chain[c.nodes.empty() ? k : c.nodes.back()] = k;
      chains.emplace(k, std::move(c));
      matrices.emplace(k, *m);
      continue;
    }
    if (n.op != "Conv") continue;
    const TensorType &t = g.value(n.outputs[0]).type;
    if (t.rank() != 4 || t.dtype != ir::Float(32)) continue;
    Chain c;
    ValueId cur = n.outputs[0];
    size_t producer = k;
    while (!is_output[static_cast<size_t>(cur)] && c.nodes.size() < kMaxGroupNodes) {
      // A value read once by a named epilogue step: that step.
      if (readers[static_cast<size_t>(cur)].size() == 1) {
        const size_t r = readers[static_cast<size_t>(cur)][0];
        if (absorbed[r]) break;  // another anchor's chain took it (a residual add of two convs)
        std::optional<Step> s = step_for(g, g.nodes()[r], cur);
        if (s && c.extras.size() + (s->extra != kNoValue ? 1 : 0) <= kMaxEpilogueInputs) {
          c.nodes.push_back(r);
          c.epilogue.push_back(s->descriptor);
          if (s->extra != kNoValue) {
            c.extras.push_back(s->extra);
            c.extra_is_bias.push_back(false);
            c.extra_broadcast.emplace_back();
          }
          cur = g.nodes()[r].outputs[0];
          producer = r;
          continue;
        }
      }
      // Otherwise every elementwise node up to the producer's immediate post-dominator (a diamond
      // such as x -> {a, b} -> add, or an op without a named step) as one expression step.
      if (!add_region(g, c, cur, producer, ipdom, 1, t.shape, absorbed)) break;
    }
    if (c.nodes.empty()) continue;
    for (size_t r : c.nodes) absorbed[r] = true;
    last_of_chain[c.nodes.back()] = k;
    chains.emplace(k, std::move(c));
  }

  Rewriter rw(g);
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node &n = g.nodes()[k];
    auto last = last_of_chain.find(k);
    if (last != last_of_chain.end()) {
      const Node &anchor = g.nodes()[last->second];
      const Chain &c = chains.at(last->second);
      const ValueId out = n.outputs[0];
      auto mat = matrices.find(last->second);
      if (mat != matrices.end()) {
        emit_matrix(rw, g, anchor, mat->second, c, out);
        continue;
      }
      Node f;
      f.op = "FusedConv";
      f.name = anchor.name;
      f.attrs = anchor.attrs;
      f.attrs["epilogue"] = Attribute::of_string(c.epilogue.dump());
      f.inputs = {rw.map(anchor.inputs[0]), rw.map(anchor.inputs[1]),
                  anchor.inputs.size() > 2 ? rw.map(anchor.inputs[2]) : kNoValue};
      const TensorType &at = g.value(anchor.outputs[0]).type;
      for (size_t e = 0; e < c.extras.size(); ++e) {
        // A per-channel constant of an expression step is passed as [channels], a broadcast tensor
        // in its broadcast shape, any other in the output's shape.
        const std::vector<int64_t> &b = c.extra_broadcast[e];
        f.inputs.push_back(
            c.extra_is_bias[e]
                ? rw.constant(anchor.name + "_channel", g.value(c.extras[e]).constant.view(0, {at.shape[1]}))
                : rw.view_as(rw.map(c.extras[e]), b.empty() ? at.shape : b, anchor.name + "_extra"));
      }
      rw.set(out, rw.add(f, {g.value(out).name})[0]);
      continue;
    }
    if (chains.count(k)) continue;  // emitted where its chain ends
    if (absorbed[k]) continue;
    rw.copy(n);
  }
  return rw.finish();
}

}  // namespace kiln::graph::passes
