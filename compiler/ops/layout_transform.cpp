// layout_transform.x86: a 4-D tensor from NCHW (block 0) or NCHW[src]c to NCHW[dst]c or NCHW (the
// graph compiler's LayoutTransform). Channel c of NCHW is element [n, c / x, h, w, c % x] of
// NCHW[x]c.
// Schedule, to or from NCHW with `transpose` (the default): the positions (rows x columns) in
// vectors, the block's channels unrolled inside, so that the code generator turns the block's
// strided loads (or stores) of one vector of positions into contiguous ones and a transpose by
// shuffles (schedule_transposed). Otherwise, and between blocked layouts: (batch, channel block,
// row) fused and parallel; each row's columns (and block) run as inner loops, so the channel
// arithmetic happens once per row. Between blocks where one divides the other, the copy along the
// block is contiguous on both sides and vectorized; with unroll_w, the column loop is unrolled when
// short.
#include <algorithm>

#include "compiler/ir/op.h"
#include "compiler/ops/generic_schedule.h"
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

te::Tensor transform_tensor(const te::Tensor &x, int64_t src, int64_t dst) {
  std::vector<int64_t> in;
  for (const auto &e : x.shape()) in.push_back(as_const_int(e).value_or(1));
  const int64_t C = src == 0 ? in[1] : in[1] * in[4];
  const std::vector<int64_t> out =
      dst == 0 ? std::vector<int64_t>{in[0], C, in[2], in[3]} : std::vector<int64_t>{in[0], C / dst, in[2], in[3], dst};
  std::vector<Expr> shape;
  for (int64_t e : out) shape.push_back(c32(e));
  return te::compute(shape, te::FCompute([=](const std::vector<Var> &i) -> Expr {
                       if (dst == 0) return x(i[0], floordiv(i[1], c32(src)), i[2], i[3], floormod(i[1], c32(src)));
                       if (src == 0) return x(i[0], i[1] * c32(dst) + i[4], i[2], i[3]);
                       // Between blocks, the index along the block stays affine where one block divides the other.
                       if (src % dst == 0) {
                         const int64_t r = src / dst;
                         return x(i[0], floordiv(i[1], c32(r)), i[2], i[3], floormod(i[1], c32(r)) * c32(dst) + i[4]);
                       }
                       if (dst % src == 0) {
                         const int64_t r = dst / src;
                         return x(i[0], i[1] * c32(r) + floordiv(i[4], c32(src)), i[2], i[3],
                                  floormod(i[4], c32(src)));
                       }
                       Expr c = i[1] * c32(dst) + i[4];
                       return x(i[0], floordiv(c, c32(src)), i[2], i[3], floormod(c, c32(src)));
                     }),
                     "layout_transform");
}

Compute transform_compute(const Transform &t) {
  Compute r;
  te::Tensor x = te::placeholder(t.data.shape_exprs(), t.data.dtype, "data");
  r.inputs = {x};
  te::Tensor out = transform_tensor(x, t.src, t.dst);
  r.outputs = {out};
  r.parts["anchor"] = out;
  return r;
}

// To or from NCHW, transposed: each (batch, channel block) is a [rows x columns][block] tile on the
// blocked side and [block][rows x columns] on the NCHW side. The output's positions (rows and
// columns fused) are split by a vector of lanes and, inside, the channels of the block unrolled, each
// a vector along the positions: contiguous on the NCHW side, of stride `block` on the other, so
// the block's loads (or stores) of one vector of positions read (or write) one contiguous span,
// which the code generator transposes with shuffles. (Batch, block, vector of positions) fused and
// parallel.
void schedule_transposed(te::Schedule &s, const te::Tensor &out, const Transform &t, const Target &tg) {
  te::Stage O = s[out];
  const int64_t lanes = tg.lanes(t.data.dtype);
  te::IterVar cb, j;
  if (t.dst == 0) {
    O.split(O.axis(1), c32(t.src), &cb, &j);
  } else {
    cb = O.axis(1);
    j = O.axis(4);
  }
  te::IterVar hw, o, i, par;
  O.fuse({O.axis(2), O.axis(3)}, &hw);
  O.split(hw, c32(lanes), &o, &i);
  O.reorder({O.axis(0), cb, o, j, i});
  // The vectors of positions stay a loop of their own under the parallel loop, so that the lowering
  // peels a partial last vector off (the others then unpredicated); with few channel blocks, the
  // positions are cut into up to 8 parallel ranges as well.
  const int64_t blocks = t.N * (t.C / (t.dst == 0 ? t.src : t.dst));
  const int64_t vectors = (t.H * t.W + lanes - 1) / lanes;
  if (blocks < 8 && vectors >= 16) {
    te::IterVar oo, oi;
    O.split(o, c32((vectors + 7) / 8), &oo, &oi);
    O.fuse({O.axis(0), cb, oo}, &par);
  } else {
    O.fuse({O.axis(0), cb}, &par);
  }
  O.parallel(par);
  O.unroll(j);
  O.vectorize(i);
}

void schedule_transform(te::Schedule &s, const Compute &c, const Config &cfg, const Transform &t, const Target &tg) {
  if ((t.src == 0 || t.dst == 0) && cfg.choice_bool("transpose")) return schedule_transposed(s, c.outputs[0], t, tg);
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
    if (t.dst / t.src <= 4) O.unroll(outer);  // the source blocks of one output block in one iteration
  } else if (t.src % t.dst == 0) {
    O.vectorize(block);
  }
  if (unroll) O.unroll(w);
}

// The blocks and sizes of a transform from the shapes of its input and output.
Transform from_shapes(const te::Tensor &in, const te::Tensor &out) {
  std::vector<int64_t> shape, o;
  for (const auto &e : in.shape()) shape.push_back(as_const_int(e).value_or(1));
  for (const auto &e : out.shape()) o.push_back(as_const_int(e).value_or(1));
  Transform x;
  x.src = shape.size() == 5 ? shape[4] : 0;
  x.dst = o.size() == 5 ? o[4] : 0;
  x.N = shape[0];
  x.C = x.src == 0 ? shape[1] : shape[1] * shape[4];
  x.H = shape[2];
  x.W = shape[3];
  x.data.dtype = in.dtype();
  return x;
}

}  // namespace

te::Tensor layout_transform(const te::Tensor &x, int64_t src_block, int64_t dst_block) {
  const size_t rank = x.shape().size();
  if (rank != (src_block == 0 ? 4u : 5u) || (src_block != 0 && as_const_int(x.shape()[4]).value_or(0) != src_block))
    throw UserError("layout_transform: the data's rank or block does not match src_block");
  const int64_t c = src_block == 0 ? as_const_int(x.shape()[1]).value_or(0)
                                   : as_const_int(x.shape()[1]).value_or(0) * src_block;
  if (src_block < 0 || dst_block < 0 || (dst_block != 0 && c % dst_block != 0))
    throw UserError("layout_transform: dst_block must divide the channels");
  return transform_tensor(x, src_block, dst_block);
}

void schedule_layout_transform(te::Schedule &s, const te::Tensor &out, const Target &target) {
  inline_intermediate_stages(s);
  const auto *op = dynamic_cast<const te::ComputeOpNode *>(out.op().get());
  if (!op) throw InternalError("schedule_layout_transform: the output is not a compute");
  const std::vector<te::Tensor> in = op->input_tensors();
  if (in.size() != 1) throw InternalError("schedule_layout_transform: the output reads more than one tensor");
  const Transform t = from_shapes(in[0], out);
  if (t.src != 0 && t.dst != 0) throw InternalError("schedule_layout_transform: a transform between blocked layouts");
  schedule_transposed(s, out, t, target);
}

void register_layout_templates(Registry &r) {
  Template t;
  t.name = "layout_transform.x86";
  t.version = 2;
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
    const Transform x = parse(name, a);
    s.define_bool("unroll_w");
    if (x.src == 0 || x.dst == 0) s.define_bool("transpose");
  };
  t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &) {
    const Transform x = parse(name, a);
    if (x.src == 0 || x.dst == 0) return s.from_values({{"unroll_w", Json(1)}, {"transpose", Json(1)}});
    return s.from_values({{"unroll_w", Json(1)}});
  };
  t.compute = [name](const Json &a, const Config &) { return transform_compute(parse(name, a)); };
  t.schedule = [name](te::Schedule &s, const Compute &c, const Config &cfg, const Target &tg) {
    // The arguments are not kept in the compute; its input's shape gives them back.
    schedule_transform(s, c, cfg, from_shapes(c.inputs[0], c.outputs[0]), tg);
  };
  r.add(std::move(t));
}

}  // namespace kiln::ops
