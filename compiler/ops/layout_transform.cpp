// layout_transform.x86: a 4-D tensor from NCHW (block 0) or NCHW[src]c to NCHW[dst]c or NCHW (the
// graph compiler's LayoutTransform). Channel c of NCHW is element [n, c / x, h, w, c % x] of
// NCHW[x]c.
// Schedule: (batch, channel block, row) fused and parallel; each row's columns (and block) run as
// inner loops, so the channel arithmetic happens once per row. Between blocks where one divides
// the other, the copy along the block is contiguous on both sides and vectorized; with unroll_w, the
// column loop is unrolled when short.
#include <algorithm>

#include "compiler/ir/op.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

namespace {

using autotune::Config;
using autotune::ConfigSpace;
using contracts::Json;
using namespace detail;
using namespace ir;

Expr c32(int64_t v) { return Expr(static_cast<int>(v)); }

struct Transform {
  TensorArg data;
  int64_t src = 0, dst = 0;
  int64_t N = 0, C = 0, H = 0, W = 0;
  std::vector<int64_t> out;
};

Transform parse(const std::string &tmpl, const Json &args) {
  check_keys(tmpl, args, {"data", "src_block", "dst_block"});
  Transform t;
  t.data = tensor_arg(tmpl, args, "data", -1);
  t.src = int_arg(tmpl, args, "src_block", 0);
  t.dst = int_arg(tmpl, args, "dst_block", 0);
  if (t.src < 0 || t.dst < 0) bad_args(tmpl, "blocks must not be negative");
  const auto &s = t.data.shape;
  if (s.size() != (t.src == 0 ? 4u : 5u) || (t.src != 0 && s[4] != t.src))
    bad_args(tmpl,
             t.src == 0 ? "data must be NCHW (rank 4) for src_block 0" : "data must be NCHW[src_block]c (rank 5)");
  t.N = s[0];
  t.C = t.src == 0 ? s[1] : s[1] * s[4];
  t.H = s[2];
  t.W = s[3];
  if (t.dst != 0 && t.C % t.dst != 0) bad_args(tmpl, "dst_block must divide the channels");
  t.out =
      t.dst == 0 ? std::vector<int64_t>{t.N, t.C, t.H, t.W} : std::vector<int64_t>{t.N, t.C / t.dst, t.H, t.W, t.dst};
  return t;
}

Compute transform_compute(const Transform &t) {
  Compute r;
  te::Tensor x = te::placeholder(t.data.shape_exprs(), t.data.dtype, "data");
  r.inputs = {x};
  std::vector<Expr> shape;
  for (int64_t e : t.out) shape.push_back(c32(e));
  const int64_t src = t.src, dst = t.dst;
  te::Tensor out =
      te::compute(shape, te::FCompute([=](const std::vector<Var> &i) -> Expr {
                    if (dst == 0) return x(i[0], floordiv(i[1], c32(src)), i[2], i[3], floormod(i[1], c32(src)));
                    if (src == 0) return x(i[0], i[1] * c32(dst) + i[4], i[2], i[3]);
                    // Between blocks, the index along the block stays affine where one block divides the other.
                    if (src % dst == 0) {
                      const int64_t r = src / dst;
                      return x(i[0], floordiv(i[1], c32(r)), i[2], i[3], floormod(i[1], c32(r)) * c32(dst) + i[4]);
                    }
                    if (dst % src == 0) {
                      const int64_t r = dst / src;
                      return x(i[0], i[1] * c32(r) + floordiv(i[4], c32(src)), i[2], i[3], floormod(i[4], c32(src)));
                    }
                    Expr c = i[1] * c32(dst) + i[4];
                    return x(i[0], floordiv(c, c32(src)), i[2], i[3], floormod(c, c32(src)));
                  }),
                  "layout_transform");
  r.outputs = {out};
  r.parts["anchor"] = out;
  return r;
}

void schedule_transform(te::Schedule &s, const Compute &c, const Config &cfg, const Transform &t, const Target &tg) {
  te::Stage O = s[c.outputs[0]];
  const te::IterVar w = O.axis(3);
  te::IterVar block;
  if (t.dst != 0) block = O.axis(4);
  te::IterVar par;
  O.fuse({O.axis(0), O.axis(1), O.axis(2)}, &par);
  O.parallel(par);
  const bool unroll = cfg.choice_bool("unroll_w") && t.W <= 16;
  if (t.dst == 0) {
    if (unroll) O.unroll(w);
    return;
  }
  if (t.src == 0) {
    O.reorder({par, block, w});  // the rows of the NCHW input are read contiguously
    if (unroll) O.unroll(w);
    return;
  }
  const int64_t lanes = tg.lanes(t.data.dtype);
  if (t.dst % t.src == 0) {
    te::IterVar outer, inner;
    O.split(block, c32(t.src), &outer, &inner);
    if (t.src % lanes == 0 || t.src < lanes) O.vectorize(inner);
  } else if (t.src % t.dst == 0) {
    O.vectorize(block);
  }
  if (unroll) O.unroll(w);
}

}  // namespace

void register_layout_templates(Registry &r) {
  Template t;
  t.name = "layout_transform.x86";
  t.version = 1;
  t.summary = "a 4-D tensor between NCHW and the blocked NCHW[x]c layouts";
  t.arguments = {tensor_spec("data", -1, "NCHW (rank 4) for src_block 0, else NCHW[src_block]c (rank 5)"),
                 {"src_block", "int", "0", "the block of the data's layout; 0: NCHW"},
                 {"dst_block", "int", "0", "the block of the output's layout; 0: NCHW; divides the channels"}};
  t.example = Json::object(
      {{"data", Json::object({{"shape", Json::array_of(std::vector<int64_t>{1, 16, 5, 5})}})}, {"dst_block", 8}});
  const std::string name = t.name;
  t.canonicalize = [name](const Json &a) {
    Transform x = parse(name, a);
    return Json::object({{"data", tensor_json(x.data)}, {"src_block", x.src}, {"dst_block", x.dst}});
  };
  t.flop = [](const Json &) { return 0.0; };
  t.define_space = [name](ConfigSpace &s, const Json &a, const Target &) {
    parse(name, a);
    s.define_bool("unroll_w");
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const Target &) {
    return s.from_values({{"unroll_w", Json(1)}});
  };
  t.compute = [name](const Json &a, const Config &) { return transform_compute(parse(name, a)); };
  t.schedule = [name](te::Schedule &s, const Compute &c, const Config &cfg, const Target &tg) {
    // The arguments are not kept in the compute; its input's shape gives them back.
    const te::Tensor &in = c.inputs[0];
    std::vector<int64_t> shape;
    for (const auto &e : in.shape()) shape.push_back(as_const_int(e).value_or(1));
    std::vector<int64_t> out;
    for (const auto &e : c.outputs[0].shape()) out.push_back(as_const_int(e).value_or(1));
    Transform x;
    x.src = shape.size() == 5 ? shape[4] : 0;
    x.dst = out.size() == 5 ? out[4] : 0;
    x.W = shape[3];
    x.data.dtype = in.dtype();
    schedule_transform(s, c, cfg, x, tg);
  };
  r.add(std::move(t));
}

}  // namespace kiln::ops
