#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "compiler/graph/op_def.h"
#include "compiler/graph/passes/passes.h"
#include "compiler/graph/passes/rewriter.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"
#include "compiler/ops/tuning_task.h"
#include "contracts/json.h"

namespace kiln::graph::passes {

namespace {

using contracts::Json;
using ::kiln::detail::concat;

// A layout of a 4-D tensor: 0 for NCHW, x for NCHW[x]c.
using Block = int64_t;

std::string layout_name(Block b) { return b == 0 ? "nchw" : concat("nchw", b, "c"); }

// NCHW data of `shape` (4-D, any dtype) re-laid out as NCHW[block]c.
deploy::Tensor to_blocked(const deploy::Tensor &t, const std::vector<int64_t> &shape, Block block) {
  const int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  deploy::Tensor out = deploy::Tensor::empty({N, C / block, H, W, block}, t.dtype());
  const size_t es = t.dtype().bytes();
  const auto *src = static_cast<const char *>(t.data());
  auto *dst = static_cast<char *>(out.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t hw = 0; hw < H * W; ++hw) {
        const int64_t s = (n * C + c) * H * W + hw;
        const int64_t d = (((n * (C / block) + c / block) * H * W) + hw) * block + c % block;
        std::memcpy(dst + static_cast<size_t>(d) * es, src + static_cast<size_t>(s) * es, es);
      }
  return out;
}

// An OIHW float32 weight packed as the NCHWc templates read it: [OC/ob, C/ib, KH, KW, ib, ob], or
// for a depthwise one ([C, 1, KH, KW]) [C/cb, 1, KH, KW, 1, cb].
deploy::Tensor pack_weight(const deploy::Tensor &w, int64_t ib, int64_t ob, bool depthwise) {
  const auto &s = w.shape();
  const int64_t O = s[0], I = s[1], KH = s[2], KW = s[3];
  const float *src = w.data_as<float>();
  if (depthwise) {
    deploy::Tensor out = deploy::Tensor::empty({O / ob, 1, KH, KW, 1, ob}, w.dtype());
    float *dst = out.data_as<float>();
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < KH * KW; ++k) dst[((o / ob) * KH * KW + k) * ob + o % ob] = src[o * KH * KW + k];
    return out;
  }
  deploy::Tensor out = deploy::Tensor::empty({O / ob, I / ib, KH, KW, ib, ob}, w.dtype());
  float *dst = out.data_as<float>();
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t k = 0; k < KH * KW; ++k)
        dst[((((o / ob) * (I / ib) + i / ib) * KH * KW + k) * ib + i % ib) * ob + o % ob] =
            src[(o * I + i) * KH * KW + k];
  return out;
}

// `t` with its first axis zero-padded to `extent`.
deploy::Tensor pad_first_axis(const deploy::Tensor &t, int64_t extent) {
  std::vector<int64_t> shape = t.shape();
  shape[0] = extent;
  deploy::Tensor out = deploy::Tensor::empty(shape, t.dtype());
  std::memset(out.data(), 0, out.nbytes());
  std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

// `t` (OIHW) with its second axis zero-padded to `extent`.
deploy::Tensor pad_second_axis(const deploy::Tensor &t, int64_t extent) {
  const std::vector<int64_t> &s = t.shape();
  const int64_t inner = s[2] * s[3];
  deploy::Tensor out = deploy::Tensor::empty({s[0], extent, s[2], s[3]}, t.dtype());
  std::memset(out.data(), 0, out.nbytes());
  for (int64_t o = 0; o < s[0]; ++o)
    std::memcpy(out.data_as<float>() + o * extent * inner, t.data_as<float>() + o * s[1] * inner,
                static_cast<size_t>(s[1] * inner) * sizeof(float));
  return out;
}

// Whether epilogue `e` (a list) gives a finite value for every finite one: named steps that
// neither divide by the value nor take its logarithm, and no extra inputs. The padded channels of a
// convolution (zero weight and bias) then hold finite values, which a convolution that reads them
// with zero weights ignores exactly.
bool finite_epilogue(const Json &e) {
  static const std::set<std::string> ops = {"relu",
                                            "clip",
                                            "leaky_relu",
                                            "hard_sigmoid",
                                            "hard_swish",
                                            "sigmoid",
                                            "tanh",
                                            "silu",
                                            "gelu",
                                            "scale",
                                            "add_scalar",
                                            "subtract_scalar",
                                            "multiply_scalar",
                                            "divide_scalar",
                                            "maximum_scalar",
                                            "minimum_scalar"};
  if (!e.is_array()) return false;
  for (size_t j = 0; j < e.size(); ++j) {
    const Json *op = e[j].is_object() ? e[j].find("op") : nullptr;
    if (!op || !op->is_string() || !ops.count(op->as_string())) return false;
  }
  return true;
}

struct ConvBlocks {
  Block ic_bn = 0, oc_bn = 0;
};

using ops::vector_block;
using ops::widest_vector_block;

// The block sizes of a ConvNCHWc node, chosen for the graph so that consecutive layers agree: the
// input block is `in` (its producer's output block; 0: NCHW) where it divides the channels, else
// the template's default; a depthwise conv's output block is its input block; another conv's is
// `out` (the block of a residual it adds; 0: none) where it is legal, else the template's default,
// else the widest vector block. `probe` is the node over values of `g` with blocks of 1: its kernel
// with the blocks made knobs gives the template's defaults. The blocks without a tuning log, or for a
// conv whose task the log has no record of (LayoutPass::tuned_blocks chooses them otherwise); the
// node's workload then fixes them.
ConvBlocks conv_blocks(const Graph &g, const Node &probe, const ops::Target &target, Block in, Block out) {
  const Kernel k = find_op(probe.op)->kernel(OpContext(g, probe));
  const ops::Task task = ops::without_fixed_blocks(ops::Task(k.template_name, k.template_args, target));
  const autotune::Config d = task.default_config();
  const int64_t lanes = target.lanes(ir::Float(32));
  const int64_t C = g.value(probe.inputs[0]).type.shape[1];
  const int64_t OC = probe.attr_int("depthwise", 0) != 0 ? C : g.value(probe.inputs[1]).type.shape[0];
  auto legal = [&](Block b, int64_t channels) { return b > 0 && channels % b == 0 && vector_block(b, lanes); };
  if (probe.attr_int("depthwise", 0) != 0) {
    if (legal(in, C)) return {in, in};
    const Block c = d.split("tile_c").back();
    return legal(c, C) ? ConvBlocks{c, c} : ConvBlocks{widest_vector_block(C, lanes), widest_vector_block(C, lanes)};
  }
  ConvBlocks b;
  b.ic_bn = in > 0 && C % in == 0 ? in : d.split("tile_ic").back();
  b.oc_bn = d.split("tile_oc").back();
  if (legal(out, OC)) {
    b.oc_bn = out;
  } else if (!legal(b.oc_bn, OC)) {
    b.oc_bn = widest_vector_block(OC, lanes);
  }
  return b;
}

const std::set<std::string> &unary_ops() {
  static const std::set<std::string> ops = {"Relu",     "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu",
                                            "Clip",     "Abs",     "Neg",  "Exp",       "Elu",         "Selu",
                                            "Softplus", "Sqrt",    "Erf",  "Identity",  "Floor",       "Ceil"};
  return ops;
}

const std::set<std::string> &binary_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div"};
  return ops;
}

// The estimated throughput of a LayoutTransform from block `src` to block `dst` (0: NCHW), in bytes
// of the tensor per second. Between blocks where one divides the other, layout_transform.x86 at 1
// thread on this project's AVX-512 machine moved a tensor of 802 KB (ResNet-18's first stage, 32c ->
// 16c) at 37 GB/s and one of 401 KB (16c -> 32c) at 51 GB/s with the data in cache (bench/ops
// reorder cases, oneDNN's reorder 0.9-1.1x as fast): 30 GB/s leaves room for a tensor not in cache.
// From or to NCHW the code generator transposes each vector of positions of a block with shuffles:
// 47-60 GB/s for blocks of 16 and 32 in cache (1.1-4x oneDNN's reorder), and in ShuffleNetV2 17-19
// GB/s into blocks of 29 (a chain of shuffles per vector: no butterfly for a block that is no power
// of two) and 34 GB/s for its 602 KB input into blocks of 3: 30 and 15 GB/s. Between blocks where
// neither divides the other, the copy along the block is neither contiguous nor vectorized: in
// MobileNetV2 on the Zen 5 machine 16c -> 24c moved 1.8 MB at 6 GB/s and 16c -> 3c 188 KB at 3.6
// GB/s, which a tuned layout that estimated them at 30 GB/s paid for (docs/graph.md).
double transform_bytes_per_second(Block src, Block dst) {
  if (src == 0 || dst == 0) {
    const Block b = src + dst;
    return (b & (b - 1)) == 0 ? 30e9 : 15e9;
  }
  if (src % dst == 0 || dst % src == 0) return 30e9;
  return 5e9;
}

// How a FusedConv's epilogue input reaches its blocked form: in the output's layout, as it is
// (per-channel), or as a rank-5 view of its NCHW data (a broadcast one with one channel).
enum class ExtraKind { kBlocked, kPlain, kView };

// FusedConv epilogue `epilogue` over output `out` (NCHW) for the blocked output NCHW[oc]c: the same
// list with each broadcast input's kind [n, c, h, w] in the blocked output's terms, [n, 1, h, w, 1]
// for c = 1 and [n, C/oc, h, w, oc] for c = C; the extra inputs' types and kinds in `types` and
// `kinds` (when given). For the probe of conv_blocks, whose kernel takes the template's own blocks
// (oc 1 here), a broadcast input with every channel is given as a full one.
Json blocked_epilogue(const Json &epilogue, const TensorType &out, Block oc, std::vector<TensorType> *types = nullptr,
                      std::vector<ExtraKind> *kinds = nullptr, bool probe = false) {
  const TensorType blocked{out.dtype, {out.shape[0], out.shape[1] / oc, out.shape[2], out.shape[3], oc}};
  auto note = [&](const TensorType &t, ExtraKind k) {
    if (types) types->push_back(t);
    if (kinds) kinds->push_back(k);
  };
  Json list = Json::array();
  for (size_t j = 0; j < epilogue.size(); ++j) {
    Json d = epilogue[j];
    const std::string op = d.get_or("op", Json("")).as_string();
    if (op == "add" || op == "multiply") note(blocked, ExtraKind::kBlocked);
    if (op == "expr") {
      Json in = Json::array();
      const Json kinds_in = d.get_or("inputs", Json::array());
      for (const Json &k : kinds_in.as_array()) {
        const Json *dims = k.is_object() ? k.find("broadcast") : nullptr;
        if (!dims) {
          const bool full = k.is_string() && k.as_string() == "full";
          note(full ? blocked : TensorType{out.dtype, {out.shape[1]}}, full ? ExtraKind::kBlocked : ExtraKind::kPlain);
          in.push_back(k);
          continue;
        }
        std::vector<int64_t> s = dims->as_int_vector();
        KILN_CHECK(s.size() == 4 && (s[1] == 1 || s[1] == out.shape[1]), "a broadcast input ", dims->dump(),
                   " of a convolution's output ", out.str());
        const bool one = s[1] == 1;
        if (probe && !one) {
          note(blocked, ExtraKind::kBlocked);
          in.push_back(Json("full"));
          continue;
        }
        s = one ? std::vector<int64_t>{s[0], 1, s[2], s[3], 1} : std::vector<int64_t>{s[0], s[1] / oc, s[2], s[3], oc};
        note(TensorType{out.dtype, s}, one ? ExtraKind::kView : ExtraKind::kBlocked);
        in.push_back(ops::epilogue::broadcast_input(s));
      }
      d = Json::object({{"expr", d["expr"]}, {"inputs", in}, {"op", "expr"}});
    }
    list.push_back(d);
  }
  return list;
}

class LayoutPass {
 public:
  LayoutPass(const Graph &g, const ops::Target &target, const ops::ConfigLookup *configs)
      : g_(g),
        rw_(g),
        target_(target),
        configs_(configs),
        root_(g.values().size()),
        old_block_(g.values().size(), 0),
        primary_(g.values().size(), {kNoValue, 0}) {
    for (size_t v = 0; v < g.values().size(); ++v) {
      root_[v] = static_cast<ValueId>(v);
      primary_[v] = {rw_.map(static_cast<ValueId>(v)), 0};
    }
  }

  Graph run() {
    read_by_.assign(g_.values().size(), {});
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      for (ValueId v : g_.nodes()[i].inputs) {
        if (v != kNoValue) read_by_[static_cast<size_t>(v)].push_back(static_cast<int32_t>(i));
      }
    }
    for (ValueId o : g_.outputs()) read_by_[static_cast<size_t>(o)].push_back(-1);  // read outside
    for (const Node &n : g_.nodes()) {
      if (n.op == kLayoutTransformOp && from_transform(n)) continue;
      bool plain = true;
      for (ValueId i : n.inputs) plain = plain && (i == kNoValue || old_block_[static_cast<size_t>(i)] == 0);
      if (plain && (conv(n) || unary(n) || binary(n) || pool(n) || concat_channels(n))) continue;
      copy(n);
    }
    for (ValueId o : g_.outputs()) rw_.set(o, in_layout(o, old_block_[static_cast<size_t>(o)]));
    return rw_.finish();
  }

 private:
  // A padded convolution's output in the new graph (padded_global_pool).
  struct Padded {
    ValueId v = kNoValue;
    Block block = 0;
    int64_t channels = 0;  // before the padding
    bool finite = false;   // the padded channels hold finite values (finite_epilogue)
  };
  // A convolution reading a padded convolution's output: the padded blocked value, its block and
  // channels, and the convolution's weight (and a depthwise one's bias) zero-padded to them.
  struct PaddedInput {
    ValueId v = kNoValue;
    Block block = 0;
    int64_t channels = 0;
    TensorType x, w;
    deploy::Tensor weight, bias;
  };
  struct Placed {
    ValueId v;
    Block block;
  };

  const Value &old(ValueId v) const { return g_.value(v); }
  Block block_of(ValueId old_v) const { return primary_[static_cast<size_t>(root_[static_cast<size_t>(old_v)])].block; }
  bool is_nchw4(const TensorType &t) const { return t.rank() == 4; }

  // Old value `v` (NCHW in the old graph) in layout `b` in the new graph: its own value, or a
  // transform of it made once per layout; constants are re-laid out at compile time. Transforms are
  // always made from the value as produced, so two never follow each other.
  ValueId in_layout(ValueId v, Block b) {
    if (v == kNoValue) return kNoValue;
    const ValueId r = root_[static_cast<size_t>(v)];
    const Placed p = primary_[static_cast<size_t>(r)];
    if (p.block == b) return p.v;
    auto it = memo_.find({r, b});
    if (it != memo_.end()) return it->second;
    const Value &rv = old(r);
    ValueId now;
    if (rv.is_constant() && p.block == 0) {
      now = rw_.constant(rv.name + "_" + layout_name(b), to_blocked(rv.constant, rv.type.shape, b));
    } else {
      Node t;
      t.op = kLayoutTransformOp;
      t.name = rv.name + "_to_" + layout_name(b);
      t.inputs = {p.v};
      t.attrs["src_block"] = Attribute::of_int(p.block);
      t.attrs["dst_block"] = Attribute::of_int(b);
      // Back in NCHW, a tensor takes its own name (graph outputs keep theirs).
      now = rw_.add(std::move(t), {b == 0 ? rv.name : rv.name + "_" + layout_name(b)})[0];
    }
    memo_[{r, b}] = now;
    return now;
  }

  // Emits `n` (over new values) with outputs named after the old ones; the old outputs become its
  // outputs in layout `b`.
  void emit(Node n, const Node &of, Block b) {
    std::vector<std::string> names;
    for (ValueId o : of.outputs) names.push_back(b == 0 ? old(o).name : old(o).name + "_" + layout_name(b));
    const std::vector<ValueId> outs = rw_.add(std::move(n), names);
    for (size_t k = 0; k < outs.size(); ++k) primary_[static_cast<size_t>(of.outputs[k])] = {outs[k], b};
  }

  // A LayoutTransform of the input graph: its output is its input's data in another layout, so it
  // composes with the transforms this pass makes (or cancels).
  bool from_transform(const Node &n) {
    const ValueId in = n.inputs[0];
    if (n.attr_int("src_block", 0) != old_block_[static_cast<size_t>(in)]) return false;
    const size_t o = static_cast<size_t>(n.outputs[0]);
    root_[o] = root_[static_cast<size_t>(in)];
    old_block_[o] = n.attr_int("dst_block", 0);
    return true;
  }

  void copy(const Node &n) {
    Node c = n;
    for (auto &i : c.inputs) i = i == kNoValue ? kNoValue : in_layout(i, old_block_[static_cast<size_t>(i)]);
    emit(std::move(c), n, 0);
  }

  bool conv(const Node &n) {
    if (n.op != "Conv" && n.op != "FusedConv") return false;
    if (n.inputs.size() < 2 || n.outputs.size() != 1) return false;
    const Value &x = old(n.inputs[0]), &w = old(n.inputs[1]);
    const TensorType &out = old(n.outputs[0]).type;
    if (x.type.rank() != 4 || x.type.dtype != ir::Float(32) || !w.is_constant() || w.type.rank() != 4 ||
        w.type.dtype != ir::Float(32) || out.rank() != 4 || out.dtype != ir::Float(32))
      return false;
    const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") return false;
    const int64_t group = n.attr_int("group", 1);
    const int64_t C = x.type.shape[1], OC = w.type.shape[0];
    bool depthwise = false;
    if (group != 1) {
      if (!(group == C && OC == C && w.type.shape[1] == 1)) return false;
      depthwise = true;
    }
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    Json epilogue = Json::array();
    if (n.op == "FusedConv") {
      try {
        epilogue = Json::parse(n.attr_string("epilogue", "[]"));
      } catch (const std::exception &) {
        return false;
      }
      if (!epilogue.is_array()) return false;
      for (size_t j = 0; j < epilogue.size(); ++j) {
        const std::string op = epilogue[j].get_or("op", Json("")).as_string();
        if (op == "prelu" || op == "bias_add") return false;
      }
      for (size_t i = 3; i < n.inputs.size(); ++i) {
        if (n.inputs[i] == kNoValue) return false;
      }
    } else if (n.inputs.size() > 3) {
      return false;
    }
    const std::optional<PaddedInput> pin = padded_input(n, depthwise, epilogue);
    Node c;
    c.op = "ConvNCHWc";
    c.name = n.name;
    c.attrs["strides"] = Attribute::of_ints(n.attr_ints("strides", {1, 1}));
    c.attrs["dilations"] = Attribute::of_ints(n.attr_ints("dilations", {1, 1}));
    c.attrs["pads"] =
        Attribute::of_ints(auto_pad == "VALID" ? std::vector<int64_t>{0, 0, 0, 0} : n.attr_ints("pads", {0, 0, 0, 0}));
    c.attrs["epilogue"] = Attribute::of_string(epilogue.dump());
    c.attrs["depthwise"] = Attribute::of_int(depthwise ? 1 : 0);
    if (pin && padded_input_conv(n, c, *pin, depthwise, epilogue)) return true;
    ConvBlocks b;
    try {
      b = blocks(c, x.type, w.type, has_bias ? n.inputs[2] : kNoValue, n, out);
    } catch (const UserError &) {
      return false;  // a workload the NCHWc templates refuse stays NCHW
    }
    if (b.ic_bn <= 0 || b.oc_bn <= 0 || C % b.ic_bn != 0 || OC % b.oc_bn != 0) return false;
    // The output block is the vector of the blocked templates: a block of whole vectors or a part of
    // one. Any other (24 channels with 16 lanes) runs far slower than the NCHW template, so such a
    // conv stays NCHW.
    const int64_t lanes = target_.lanes(ir::Float(32));
    if (b.oc_bn % lanes != 0 && lanes % b.oc_bn != 0) return false;
    if (!depthwise && b.oc_bn < lanes && padded_conv(n, c, b, lanes)) return true;
    c.attrs["ic_bn"] = Attribute::of_int(b.ic_bn);
    c.attrs["oc_bn"] = Attribute::of_int(b.oc_bn);
    c.inputs = {in_layout(n.inputs[0], b.ic_bn),
                rw_.constant(w.name + "_packed", pack_weight(w.constant, b.ic_bn, b.oc_bn, depthwise)),
                has_bias ? in_layout(n.inputs[2], 0) : kNoValue};
    std::vector<ValueId> extras = blocked_extras(n, epilogue, out, b.oc_bn);
    c.inputs.insert(c.inputs.end(), extras.begin(), extras.end());
    c.attrs["epilogue"] = Attribute::of_string(blocked_epilogue(epilogue, out, b.oc_bn).dump());
    emit(std::move(c), n, b.oc_bn);
    const TensorType &now = rw_.out().value(primary_[static_cast<size_t>(n.outputs[0])].v).type;
    KILN_CHECK(
        now.shape == std::vector<int64_t>({out.shape[0], out.shape[1] / b.oc_bn, out.shape[2], out.shape[3], b.oc_bn}),
        n.describe(), ": the blocked convolution gives ", now.str(), " for ", out.str());
    return true;
  }

  // The epilogue inputs of FusedConv `n` (output `out`) for its blocked form with output block `oc`
  // (blocked_epilogue): a tensor of the output's type in the output's layout, a per-channel one as it
  // is, a broadcast one with one channel as a view of its NCHW data, one with every channel in the
  // output's layout.
  std::vector<ValueId> blocked_extras(const Node &n, const Json &epilogue, const TensorType &out, Block oc) {
    std::vector<TensorType> types;
    std::vector<ExtraKind> kinds;
    blocked_epilogue(epilogue, out, oc, &types, &kinds);
    std::vector<ValueId> extras;
    for (size_t e = 0; e < kinds.size(); ++e) {
      const ValueId v = n.inputs[3 + e];
      if (kinds[e] == ExtraKind::kView) {
        extras.push_back(rw_.view_as(in_layout(v, 0), types[e].shape, old(v).name + "_5d"));
      } else {
        extras.push_back(in_layout(v, kinds[e] == ExtraKind::kPlain ? 0 : oc));
        KILN_CHECK(rw_.out().value(extras.back()).type == types[e], n.describe(), ": extra input ", e, " is ",
                   rw_.out().value(extras.back()).type.str(), ", not ", types[e].str());
      }
    }
    return extras;
  }

  // A conv whose output channels have no block of whole vectors (SqueezeNet's classifier: 1000
  // channels, 8 a block with 16 lanes) runs with whole vectors on output channels padded to a
  // multiple of the vector: its weight and bias are zero-padded at compile time, and the padded
  // channels are dropped on the way back to NCHW (a LayoutTransform, then a Slice of the channels),
  // which its consumers read. Only where the padding adds at most an eighth of the work, the conv
  // adds no residual (its layout would be padded too) and the bias is a constant. `b` is the
  // unpadded conv's blocks, `c` its node with every attribute but the blocks set.
  bool padded_conv(const Node &n, Node c, const ConvBlocks &b, int64_t lanes, const PaddedInput *pin = nullptr) {
    const Value &w = old(n.inputs[1]);
    const TensorType &x_type = pin ? pin->x : old(n.inputs[0]).type, &w_type = pin ? pin->w : w.type;
    const deploy::Tensor &weight = pin ? pin->weight : w.constant;
    const TensorType &out = old(n.outputs[0]).type;
    const int64_t OC = w.type.shape[0];
    if (n.inputs.size() > 3 || OC % lanes == 0) return false;
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    if (has_bias && (!old(n.inputs[2]).is_constant() || old(n.inputs[2]).type.shape != std::vector<int64_t>{OC}))
      return false;
    // Padded to a multiple of two vectors where that stays within the eighth, so that the template
    // can take its usual block of two vectors (one vector is load-bound: SqueezeNet's classifier,
    // 1.21 ms on 1008 channels in blocks of 16, 1.03 ms on 1024 in blocks of 32 with AVX-512),
    // else of one.
    int64_t padded = 0;
    ConvBlocks pb;
    for (int64_t multiple : {2 * lanes, lanes}) {
      const int64_t p = (OC + multiple - 1) / multiple * multiple;
      if ((p - OC) * 8 > OC) continue;
      TensorType pw = w_type, pout = out;
      pw.shape[0] = p;
      pout.shape[1] = p;
      try {
        pb = blocks(c, x_type, pw, kNoValue, n, pout, pin ? pin->block : -1);
      } catch (const UserError &) {
        continue;
      }
      if (pb.ic_bn == b.ic_bn && pb.oc_bn > 0 && p % pb.oc_bn == 0 && pb.oc_bn % lanes == 0) {
        padded = p;
        break;
      }
    }
    if (padded == 0) return false;
    c.attrs["ic_bn"] = Attribute::of_int(pb.ic_bn);
    c.attrs["oc_bn"] = Attribute::of_int(pb.oc_bn);
    const std::string name = old(n.outputs[0]).name;
    c.inputs = {
        pin ? pin->v : in_layout(n.inputs[0], pb.ic_bn),
        rw_.constant(w.name + "_padded_packed", pack_weight(pad_first_axis(weight, padded), pb.ic_bn, pb.oc_bn, false)),
        has_bias ? rw_.constant(old(n.inputs[2]).name + "_padded", pad_first_axis(old(n.inputs[2]).constant, padded))
                 : kNoValue};
    const bool finite = finite_epilogue(Json::parse(c.attr_string("epilogue", "[]")));
    const ValueId y = rw_.add(std::move(c), {name + "_padded_" + layout_name(pb.oc_bn)})[0];
    padded_[n.outputs[0]] = {y, pb.oc_bn, OC, finite};
    drop_padding(n, padded_[n.outputs[0]], "convolution");
    return true;
  }

  // For conv `n` (no residual) whose data is the output of a padded convolution with finite
  // padded channels: that padded blocked value, with the conv's weight zero-padded over the input
  // channels (a depthwise conv's weight and bias over its channels, since its output is padded too).
  std::optional<PaddedInput> padded_input(const Node &n, bool depthwise, const Json &epilogue) {
    auto it = padded_.find(root_[static_cast<size_t>(n.inputs[0])]);
    if (it == padded_.end() || !it->second.finite || n.inputs.size() > 3) return std::nullopt;
    const Padded &p = it->second;
    const TensorType &pt = rw_.out().value(p.v).type;
    PaddedInput in;
    in.v = p.v;
    in.block = p.block;
    in.channels = pt.shape[1] * pt.shape[4];
    in.x = old(n.inputs[0]).type;
    in.x.shape[1] = in.channels;
    const Value &w = old(n.inputs[1]);
    in.w = w.type;
    if (depthwise) {
      const bool has_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
      if (has_bias && !old(n.inputs[2]).is_constant()) return std::nullopt;
      if (!finite_epilogue(epilogue)) return std::nullopt;
      in.w.shape[0] = in.channels;
      in.weight = pad_first_axis(w.constant, in.channels);
      if (has_bias) in.bias = pad_first_axis(old(n.inputs[2]).constant, in.channels);
    } else {
      in.w.shape[1] = in.channels;
      in.weight = pad_second_axis(w.constant, in.channels);
    }
    return in;
  }

  // Conv `n` (node `c` with every attribute but the blocks) over the padded value `in`: a depthwise
  // conv computes the padded channels too (its output padded in its input's block), any other
  // conv reads them with zero weights. False when its blocks cannot take the padded value's block
  // (then it reads the NCHW slice as any conv does).
  bool padded_input_conv(const Node &n, Node c, const PaddedInput &in, bool depthwise, const Json &epilogue) {
    TensorType out = old(n.outputs[0]).type;
    if (depthwise) out.shape[1] = in.channels;
    const bool has_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    ConvBlocks b;
    try {
      b = blocks(c, in.x, in.w, depthwise ? kNoValue : (has_bias ? n.inputs[2] : kNoValue), n, out, in.block);
    } catch (const UserError &) {
      return false;
    }
    const int64_t lanes = target_.lanes(ir::Float(32));
    if (depthwise) b = {in.block, in.block};
    if (b.ic_bn != in.block || b.oc_bn <= 0 || out.shape[1] % b.oc_bn != 0 || !vector_block(b.oc_bn, lanes))
      return false;
    if (!depthwise && b.oc_bn < lanes) return padded_conv(n, c, b, lanes, &in);
    c.attrs["ic_bn"] = Attribute::of_int(b.ic_bn);
    c.attrs["oc_bn"] = Attribute::of_int(b.oc_bn);
    const Value &w = old(n.inputs[1]);
    c.inputs = {in.v, rw_.constant(w.name + "_padded_packed", pack_weight(in.weight, b.ic_bn, b.oc_bn, depthwise)),
                kNoValue};
    if (has_bias)
      c.inputs[2] = depthwise ? rw_.constant(old(n.inputs[2]).name + "_padded", in.bias) : in_layout(n.inputs[2], 0);
    if (!depthwise) {
      emit(std::move(c), n, b.oc_bn);
      return true;
    }
    const std::string name = old(n.outputs[0]).name;
    const ValueId y = rw_.add(std::move(c), {name + "_padded_" + layout_name(b.oc_bn)})[0];
    padded_[n.outputs[0]] = {y, b.oc_bn, old(n.outputs[0]).type.shape[1], finite_epilogue(epilogue)};
    drop_padding(n, padded_[n.outputs[0]], "depthwise convolution");
    return true;
  }

  // `n`'s output in NCHW from the padded blocked value `p` of it: the transform back, then a Slice
  // of its first `p.channels` channels.
  void drop_padding(const Node &n, const Padded &p, const char *what) {
    const TensorType &out = old(n.outputs[0]).type;
    const std::string name = old(n.outputs[0]).name;
    Node t;
    t.op = kLayoutTransformOp;
    t.name = name + "_padded_to_nchw";
    t.inputs = {p.v};
    t.attrs["src_block"] = Attribute::of_int(p.block);
    t.attrs["dst_block"] = Attribute::of_int(0);
    const ValueId full = rw_.add(std::move(t), {name + "_padded"})[0];
    Node s;
    s.op = "Slice";
    s.name = name + "_drop_padding";
    s.inputs = {full, rw_.int64_constant(name + "_starts", {0}), rw_.int64_constant(name + "_ends", {p.channels}),
                rw_.int64_constant(name + "_axes", {1})};
    const ValueId sliced = rw_.add(std::move(s), {name})[0];
    KILN_CHECK(rw_.out().value(sliced).type == out, n.describe(), ": the padded ", what, " gives ",
               rw_.out().value(sliced).type.str(), " for ", out.str());
    primary_[static_cast<size_t>(n.outputs[0])] = {sliced, 0};
  }

  // A global pool of a padded convolution's output pools the padded blocked tensor and drops the
  // padding after it, so that the transform back and the slice move one value per channel instead
  // of the whole map (the conv's own transform and slice are then dead, unless something else reads
  // them).
  bool padded_global_pool(const Node &n, const Padded &p) {
    const std::string name = old(n.outputs[0]).name;
    Node c;
    c.op = "PoolNCHWc";
    c.name = n.name;
    c.attrs["mode"] = Attribute::of_string(n.op == "GlobalMaxPool" ? "max" : "avg");
    c.attrs["global"] = Attribute::of_int(1);
    c.inputs = {p.v};
    const ValueId y = rw_.add(std::move(c), {name + "_padded_" + layout_name(p.block)})[0];
    drop_padding(n, {y, p.block, p.channels}, "global pool");
    return true;
  }

  // The blocks of node `c` (its attributes set but the blocks), found on a probe graph holding the
  // node with blocks of 1.
  // `in` (>= 0): the data's block, where it is not the old data value's (a padded value).
  ConvBlocks blocks(Node c, const TensorType &x, const TensorType &w, ValueId bias, const Node &n,
                    const TensorType &out, Block in = -1) {
    Graph probe;
    const bool dw = c.attr_int("depthwise", 0) != 0;
    const std::vector<int64_t> &xs = x.shape, &ws = w.shape;
    c.attrs["ic_bn"] = Attribute::of_int(1);
    c.attrs["oc_bn"] = Attribute::of_int(1);
    c.inputs = {probe.add_input("x", {x.dtype, {xs[0], xs[1], xs[2], xs[3], 1}}),
                probe.add_input("w", {w.dtype, dw ? std::vector<int64_t>{ws[0], 1, ws[2], ws[3], 1, 1}
                                                  : std::vector<int64_t>{ws[0], ws[1], ws[2], ws[3], 1, 1}}),
                bias == kNoValue ? kNoValue : probe.add_input("b", old(bias).type)};
    std::vector<TensorType> extra_types;
    c.attrs["epilogue"] = Attribute::of_string(
        blocked_epilogue(Json::parse(c.attr_string("epilogue", "[]")), out, 1, &extra_types, nullptr, true).dump());
    for (size_t e = 0; e < extra_types.size(); ++e) c.inputs.push_back(probe.add_input(concat("e", e), extra_types[e]));
    c.outputs = {kNoValue};
    const std::vector<TensorType> types = infer_types(probe, c);
    c.outputs = probe.add_node(c, {"y"}, types);
    Block residual = 0;
    for (size_t i = 3; i < n.inputs.size() && residual == 0; ++i) residual = block_of(n.inputs[i]);
    const ConvBlocks d =
        conv_blocks(probe, probe.nodes().back(), target_, in >= 0 ? in : block_of(n.inputs[0]), residual);
    // An expansion and the depthwise conv after it may become one kernel (fuse_expand_depthwise)
    // whose task fixes the blocks they have without the log, so they keep those, and so does the
    // output block of a conv whose output such an expansion reads (among other readers).
    if (!configs_ || expansion(n) || (n.attr_int("group", 1) != 1 && expansion(producer(n.inputs[0])))) return d;
    bool feeds_expansion = false;
    for (int32_t r : read_by_[static_cast<size_t>(n.outputs[0])])
      feeds_expansion = feeds_expansion || (r >= 0 && expansion(&g_.nodes()[static_cast<size_t>(r)]));
    if (std::optional<ConvBlocks> t = tuned_blocks(probe, probe.nodes().back(), n, feeds_expansion ? d.oc_bn : 0, d))
      return *t;
    return d;
  }

  // The old node that writes `v`, or null for an input or a constant.
  const Node *producer(ValueId v) const {
    if (v == kNoValue) return nullptr;
    const int32_t p = old(v).producer;
    return p < 0 ? nullptr : &g_.nodes()[static_cast<size_t>(p)];
  }

  // Whether old node `n` is an expansion fuse_expand_depthwise may fuse: a 1x1 Conv or FusedConv
  // (groups 1, stride 1, no padding, no residual) whose output one depthwise conv alone reads.
  bool expansion(const Node *n) const {
    if (!n || (n->op != "Conv" && n->op != "FusedConv") || n->inputs.size() > 3 || n->outputs.size() != 1 ||
        n->attr_int("group", 1) != 1)
      return false;
    const TensorType &w = old(n->inputs[1]).type;
    if (w.rank() != 4 || w.shape[2] != 1 || w.shape[3] != 1) return false;
    for (int64_t s : n->attr_ints("strides", {1, 1}))
      if (s != 1) return false;
    for (int64_t p : n->attr_ints("pads", {0, 0, 0, 0}))
      if (p != 0) return false;
    const std::vector<int32_t> &r = read_by_[static_cast<size_t>(n->outputs[0])];
    if (r.size() != 1 || r[0] < 0) return false;
    const Node &d = g_.nodes()[static_cast<size_t>(r[0])];
    return (d.op == "Conv" || d.op == "FusedConv") && d.inputs[0] == n->outputs[0] && d.attr_int("group", 1) != 1 &&
           d.attr_int("group", 1) == old(d.outputs[0]).type.shape[1];
  }
  bool expansion(const Node &n) const { return expansion(&n); }

  // With a tuning log: the blocks of the measured config of the conv's tuning task (its workload with
  // the blocks as knobs, ops::tuning_task) that costs least, a config costing its measured time plus
  // the estimated time of the transforms it needs: its data in its input block (nothing when the
  // data is in that block already, has a transform to it already, or is a constant) and a residual
  // it adds in its output block. Configs whose output block is neither whole vectors nor part of
  // one are skipped. A greedy choice in graph order: a conv weighs the transforms into it, not those
  // its output block makes for the layers after it. The blocks `d` it has without the log are kept
  // where a record with them (else the record of the task's default config, measured with the
  // template's own blocks) costs not clearly more than the cheapest (ops::clearly_faster). nullopt
  // when the log has no usable record. `probe` is the node over values of a probe graph with blocks
  // of 1, `n` the old node; `oc_only` (0: any) the one output block allowed.
  std::optional<ConvBlocks> tuned_blocks(const Graph &probe, const Node &pn, const Node &n, Block oc_only,
                                         const ConvBlocks &d) {
    const Kernel k = find_op(pn.op)->kernel(OpContext(probe, pn));
    const ops::Task task = ops::tuning_task(ops::Task(k.template_name, k.template_args, target_));
    const bool dw = pn.attr_int("depthwise", 0) != 0;
    const int64_t lanes = target_.lanes(ir::Float(32));
    std::optional<ConvBlocks> best;
    double best_cost = 0;
    std::optional<double> d_cost;        // the cheapest record with the blocks d
    std::optional<double> default_cost;  // the record of the task's default config
    const int64_t default_index = task.default_config().index();
    std::vector<ExtraKind> extra_kinds;  // the epilogue inputs that come in the output's layout
    if (n.op == "FusedConv")
      blocked_epilogue(Json::parse(n.attr_string("epilogue", "[]")), old(n.outputs[0]).type, 1, nullptr, &extra_kinds);
    for (const ops::TunedConfig &r : configs_->top(task.workload(), target_.str(), ops::kBlockCandidates)) {
      ConvBlocks b;
      try {
        const autotune::Config cfg = task.space().from_record(r.config);
        b.ic_bn = cfg.split(dw ? "tile_c" : "tile_ic").back();
        b.oc_bn = cfg.split(dw ? "tile_c" : "tile_oc").back();
        if (cfg.index() == default_index && (!default_cost || r.mean_s < *default_cost)) default_cost = r.mean_s;
      } catch (const UserError &) {
        continue;  // a record of another version of the space
      }
      if (!vector_block(b.oc_bn, lanes) || (oc_only != 0 && b.oc_bn != oc_only)) continue;
      double cost = r.mean_s + transform_s(n.inputs[0], b.ic_bn);
      for (size_t e = 0; e < extra_kinds.size(); ++e)
        if (extra_kinds[e] == ExtraKind::kBlocked) cost += transform_s(n.inputs[3 + e], b.oc_bn);
      if (!best || cost < best_cost) {
        best = b;
        best_cost = cost;
      }
      if (b.ic_bn == d.ic_bn && b.oc_bn == d.oc_bn && (!d_cost || cost < *d_cost)) d_cost = cost;
    }
    // Blocks d the log has no record of (the producer's input block, say, where the template's
    // default is another) run the default config with them, which the default's record stands for.
    if (!d_cost) d_cost = default_cost;
    if (best && d_cost && !ops::clearly_faster(best_cost, *d_cost)) return d;
    return best;
  }

  // The estimated time of having old value `v` in layout `b` (transform_bytes_per_second): nothing
  // when it is in that layout, has a transform to it already, or is a constant.
  double transform_s(ValueId v, Block b) const {
    if (v == kNoValue) return 0;
    const ValueId r = root_[static_cast<size_t>(v)];
    const Block from = primary_[static_cast<size_t>(r)].block;
    if (from == b || memo_.count({r, b}) || old(r).is_constant()) return 0;
    const TensorType &t = old(r).type;
    return static_cast<double>(t.numel() * static_cast<int64_t>(t.dtype.bytes())) / transform_bytes_per_second(from, b);
  }

  bool unary(const Node &n) {
    if (!unary_ops().count(n.op) || n.inputs.empty() || n.outputs.size() != 1) return false;
    const Block b = block_of(n.inputs[0]);
    if (b == 0 || old(n.outputs[0]).type != old(n.inputs[0]).type) return false;
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != kNoValue && (!old(n.inputs[i]).is_constant() || old(n.inputs[i]).type.numel() != 1))
        return false;
    }
    Node c = n;
    c.inputs[0] = in_layout(n.inputs[0], b);
    for (size_t i = 1; i < n.inputs.size(); ++i) c.inputs[i] = in_layout(n.inputs[i], 0);
    emit(std::move(c), n, b);
    return true;
  }

  // A constant operand of a binary op with output `out` (NCHW), broadcast to it, in layout `b`:
  // one with a channel extent of 1 gets a block axis of 1; a per-channel one is re-laid out.
  std::optional<ValueId> broadcast_constant(ValueId v, const TensorType &out, Block b) {
    const Value &cv = old(v);
    if (cv.type.rank() > 4) return std::nullopt;
    std::vector<int64_t> s(static_cast<size_t>(4 - cv.type.rank()), 1);
    s.insert(s.end(), cv.type.shape.begin(), cv.type.shape.end());
    for (size_t a = 0; a < 4; ++a) {
      if (s[a] != 1 && s[a] != out.shape[a]) return std::nullopt;
    }
    if (s[1] == 1) {
      deploy::Tensor t = cv.constant.view(0, {s[0], 1, s[2], s[3], 1});
      return rw_.constant(cv.name + "_" + layout_name(b), t);
    }
    if (s[1] % b != 0) return std::nullopt;
    return rw_.constant(cv.name + "_" + layout_name(b), to_blocked(cv.constant, s, b));
  }

  bool binary(const Node &n) {
    if (!binary_ops().count(n.op) || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
    const TensorType &out = old(n.outputs[0]).type;
    if (out.rank() != 4) return false;
    Block b = 0;
    for (ValueId i : n.inputs) {
      if (!old(i).is_constant() && block_of(i) != 0) {
        b = block_of(i);
        break;
      }
    }
    if (b == 0 || out.shape[1] % b != 0) return false;
    std::vector<ValueId> ins;
    for (ValueId i : n.inputs) {
      if (old(i).is_constant()) {
        std::optional<ValueId> c = broadcast_constant(i, out, b);
        if (!c) return false;
        ins.push_back(*c);
      } else {
        if (old(i).type != out) return false;
        ins.push_back(kNoValue);
      }
    }
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k] == kNoValue) ins[k] = in_layout(n.inputs[k], b);
    }
    Node c = n;
    c.inputs = ins;
    emit(std::move(c), n, b);
    return true;
  }

  bool pool(const Node &n) {
    const bool global = n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
    if (!global && n.op != "MaxPool" && n.op != "AveragePool") return false;
    if (n.outputs.size() != 1 || n.inputs.size() != 1) return false;
    const TensorType &x = old(n.inputs[0]).type, &out = old(n.outputs[0]).type;
    if (global && x.rank() == 4 && x.dtype == ir::Float(32)) {
      auto it = padded_.find(root_[static_cast<size_t>(n.inputs[0])]);
      if (it != padded_.end()) return padded_global_pool(n, it->second);
    }
    const Block b = block_of(n.inputs[0]);
    if (b == 0 || x.rank() != 4 || x.dtype != ir::Float(32)) return false;
    Node c;
    c.op = "PoolNCHWc";
    c.name = n.name;
    c.attrs["mode"] = Attribute::of_string(n.op == "MaxPool" || n.op == "GlobalMaxPool" ? "max" : "avg");
    if (global) {
      c.attrs["global"] = Attribute::of_int(1);
    } else {
      if (n.attr_string("auto_pad", "NOTSET") != "NOTSET" || n.attr_int("storage_order", 0) != 0) return false;
      const std::vector<int64_t> k = n.attr_ints("kernel_shape");
      const std::vector<int64_t> d = n.attr_ints("dilations", {1, 1}), p = n.attr_ints("pads", {0, 0, 0, 0});
      if (k.size() != 2 || d.size() != 2 || p.size() != 4) return false;
      // The template's padding stays inside the window.
      for (size_t a = 0; a < 4; ++a) {
        if (p[a] >= (k[a % 2] - 1) * d[a % 2] + 1) return false;
      }
      c.attrs["kernel_shape"] = Attribute::of_ints(k);
      c.attrs["strides"] = Attribute::of_ints(n.attr_ints("strides", {1, 1}));
      c.attrs["dilations"] = Attribute::of_ints(d);
      c.attrs["pads"] = Attribute::of_ints(p);
      c.attrs["ceil_mode"] = Attribute::of_int(n.attr_int("ceil_mode", 0));
      c.attrs["count_include_pad"] = Attribute::of_int(n.attr_int("count_include_pad", 0));
    }
    c.inputs = {in_layout(n.inputs[0], b)};
    emit(std::move(c), n, b);
    const TensorType &now = rw_.out().value(primary_[static_cast<size_t>(n.outputs[0])].v).type;
    KILN_CHECK(now.shape == std::vector<int64_t>({out.shape[0], out.shape[1] / b, out.shape[2], out.shape[3], b}),
               n.describe(), ": the blocked pool gives ", now.str(), " for ", out.str());
    return true;
  }

  bool concat_channels(const Node &n) {
    if (n.op != "Concat" || n.outputs.size() != 1) return false;
    const TensorType &out = old(n.outputs[0]).type;
    if (out.rank() != 4) return false;
    const int64_t axis = n.attr_int("axis", 0);
    if (axis != 1 && axis != -3) return false;
    Block b = 0;
    for (ValueId i : n.inputs) {
      if (i != kNoValue && !old(i).is_constant() && block_of(i) != 0) {
        b = block_of(i);
        break;
      }
    }
    if (b == 0) return false;
    for (ValueId i : n.inputs) {
      if (i == kNoValue || old(i).type.rank() != 4 || old(i).type.shape[1] % b != 0) return false;
    }
    Node c = n;
    c.attrs["axis"] = Attribute::of_int(1);
    for (auto &i : c.inputs) i = in_layout(i, b);
    emit(std::move(c), n, b);
    return true;
  }

  const Graph &g_;
  Rewriter rw_;
  const ops::Target &target_;
  const ops::ConfigLookup *configs_;
  // Per old value: the old value whose data it is (itself, or the source of a LayoutTransform of the
  // input graph), and its layout in the old graph.
  std::vector<ValueId> root_;
  std::vector<Block> old_block_;
  // Per old value (a root): its value in the new graph as produced, and that value's layout.
  std::vector<Placed> primary_;
  std::map<std::pair<ValueId, Block>, ValueId> memo_;
  // Per old value written by a padded convolution: its padded blocked value.
  std::map<ValueId, Padded> padded_;
  // Per old value: the nodes that read it, once per input (-1: it is a graph output).
  std::vector<std::vector<int32_t>> read_by_;
};

}  // namespace

Graph alter_layout(const Graph &g, const ops::Target &target, const ops::ConfigLookup *configs) {
  return LayoutPass(g, target, configs).run();
}

}  // namespace kiln::graph::passes
