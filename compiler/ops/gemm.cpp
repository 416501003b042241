// Matrix-multiply templates for x86 (AutoTVM's dense_pack / dense_nopack style):
//   dense_pack.x86    data[M,K] x weight[N,K]^T; the weight is packed to [ceil(N/bn), K, bn] with
//                     bn the innermost tile_x factor, so the inner loop loads bn contiguous
//                     weights; when bn does not divide N (tile_x offers whole vectors when N is
//                     not a multiple of the vector width) the last block is padded and the
//                     products are accumulated over the padded columns, of which the output keeps
//                     the first N; with "prepacked": true the weight input already has the packed
//                     layout (its shape then depends on the config, like the NCHWc layouts); with
//                     "bn" too the block is fixed by the workload (the graph packs the weight
//                     once, so no tuned config may change it): tile_x offers only innermost
//                     factors of bn;
//   dense_nopack.x86  data[M,K] x weight[N,K]^T; the reduction is split by a vector factor into
//                     partial sums computed lane-wise, then summed;
//   matmul.x86        a[M,K] x b[K,N] (b's rows are already contiguous along N);
//   batch_matmul.x86  a[B,M,K] x b[B or 1, N, K]^T (packed per batch) or b[B or 1, K, N].
// Integer inputs (int8/uint8) accumulate in int32 unless out_dtype says otherwise.
//
// Schedule (tiled for registers and cache): the output loops are split tile_y = (yt, yo, yi) and
// tile_x = (xt, xo, xi), ordered (xt, yt, yo, xo, yi, xi); (batch, xt, yt) fused and parallel;
// the accumulating stage is computed at the fused (yo, xo) loop: for each k block, a yi x xi
// register tile, xi vectorized, rows and the inner k loop unrolled; the output stage applies the
// epilogue on the tile, xi vectorized.
#include <algorithm>

#include "compiler/ir/op.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

namespace {

using autotune::Config;
using autotune::ConfigSpace;
using autotune::SplitPolicy;
using contracts::Json;
using namespace detail;
using namespace ir;

enum class Form { Dense, Matmul, BatchMatmul };

struct Gemm {
  std::string tmpl;
  Form form = Form::Dense;
  bool batch = false;
  bool transpose_b = true;  // b is [.., N, K]
  bool prepacked = false;   // dense_pack: the weight comes packed as [N/bn, K, bn]
  int64_t bn = 0;           // dense_pack with prepacked: the fixed block (0: tile_x's)
  int64_t B = 1, BB = 1, M = 0, N = 0, K = 0;
  TensorArg a, b;
  DataType out;
  Json epilogue;
};

const char *a_key(Form f) { return f == Form::Dense ? "data" : "a"; }
const char *b_key(Form f) { return f == Form::Dense ? "weight" : "b"; }

Gemm parse(const std::string &tmpl, Form form, const Json &args) {
  Gemm g;
  g.tmpl = tmpl;
  g.form = form;
  g.batch = form == Form::BatchMatmul;
  if (g.batch) {
    check_keys(tmpl, args, {"a", "b", "transpose_b", "out_dtype", "epilogue"});
  } else {
    if (tmpl == "dense_pack.x86") {
      check_keys(tmpl, args, {a_key(form), b_key(form), "out_dtype", "epilogue", "prepacked", "bn"});
    } else {
      check_keys(tmpl, args, {a_key(form), b_key(form), "out_dtype", "epilogue"});
    }
  }
  const int rank = g.batch ? 3 : 2;
  g.a = tensor_arg(tmpl, args, a_key(form), rank);
  g.b = tensor_arg(tmpl, args, b_key(form), rank);
  g.transpose_b = form == Form::Dense || (g.batch && bool_arg(tmpl, args, "transpose_b", true));
  const int o = g.batch ? 1 : 0;
  if (g.batch) {
    g.B = g.a.shape[0];
    g.BB = g.b.shape[0];
    if (g.BB != g.B && g.BB != 1) bad_args(tmpl, "the batch of b must be that of a or 1");
  }
  g.M = g.a.shape[static_cast<size_t>(o)];
  g.K = g.a.shape[static_cast<size_t>(o + 1)];
  const int64_t bk = g.b.shape[static_cast<size_t>(g.transpose_b ? o + 1 : o)];
  g.N = g.b.shape[static_cast<size_t>(g.transpose_b ? o : o + 1)];
  if (bk != g.K) {
    bad_args(tmpl, "reduction lengths differ: " + std::to_string(g.K) + " in " + a_key(form) + ", " +
                       std::to_string(bk) + " in " + b_key(form));
  }
  if (g.a.dtype.is_float() != g.b.dtype.is_float()) bad_args(tmpl, "mixing float and integer inputs");
  g.prepacked = bool_arg(tmpl, args, "prepacked", false);
  if (g.prepacked && tmpl != "dense_pack.x86") bad_args(tmpl, "only dense_pack takes a prepacked weight");
  g.bn = int_arg(tmpl, args, "bn", 0);
  if (g.bn != 0 && !g.prepacked) bad_args(tmpl, "bn fixes the block of a prepacked weight");
  if (g.bn != 0 && (g.bn < 1 || g.bn > g.N))
    bad_args(tmpl, "bn must be in [1, N = " + std::to_string(g.N) + "], got " + std::to_string(g.bn));
  g.out = dtype_arg(tmpl, args, "out_dtype", default_accumulator(g.a.dtype));
  if (g.out.is_float() != g.a.dtype.is_float())
    bad_args(tmpl, "out_dtype must be float for float inputs, int for ints");
  g.epilogue = canonical_epilogue(args.get_or("epilogue", Json::array()), g.out, "workload " + tmpl);
  return g;
}

Json canonical(const Gemm &g) {
  Json j = Json::object({{a_key(g.form), tensor_json(g.a)},
                         {b_key(g.form), tensor_json(g.b)},
                         {"out_dtype", g.out.to_string()},
                         {"epilogue", g.epilogue}});
  if (g.batch) j.set("transpose_b", g.transpose_b);
  if (g.prepacked) j.set("prepacked", true);
  if (g.bn > 0) j.set("bn", g.bn);
  return j;
}

double flop(const Gemm &g) {
  double out = static_cast<double>(g.B) * static_cast<double>(g.M) * static_cast<double>(g.N);
  return 2.0 * out * static_cast<double>(g.K) + epilogue_flop(g.epilogue, out);
}

// The compute. pack_bn > 0 packs b (which must be [.., N, K]) to [.., N/bn, K, bn].
Compute gemm_compute(const Gemm &g, int64_t pack_bn) {
  Compute c;
  te::Tensor A = te::placeholder(g.a.shape_exprs(), g.a.dtype, a_key(g.form));
  const bool batch = g.batch;
  const bool bcast_b = g.BB != g.B;
  te::Tensor Bt, P;
  // The packed weight has whole blocks of bn: when bn does not divide N the last block is padded
  // (with zeros when the kernel packs; a prepacked weight's padding is never read into a stored
  // output).
  const int64_t blocks = pack_bn > 0 ? ceil_div(g.N, pack_bn) : 0;
  if (g.prepacked) {
    // The graph packs constant weights once; the kernel reads them in the packed layout (and a
    // tuning run measures the kernel without the packing, as AutoTVM does).
    Bt = te::placeholder({Expr(static_cast<int>(blocks)), Expr(static_cast<int>(g.K)), Expr(static_cast<int>(pack_bn))},
                         g.b.dtype, b_key(g.form));
    P = Bt;
  } else {
    Bt = te::placeholder(g.b.shape_exprs(), g.b.dtype, b_key(g.form));
  }
  c.inputs = {A, Bt};
  if (pack_bn > 0 && !g.prepacked) {
    const int bn = static_cast<int>(pack_bn);
    std::vector<Expr> shape;
    if (batch) shape.emplace_back(static_cast<int>(g.BB));
    shape.insert(shape.end(), {Expr(static_cast<int>(blocks)), Expr(static_cast<int>(g.K)), Expr(bn)});
    const bool padded = g.N % pack_bn != 0;
    const int n_extent = static_cast<int>(g.N);
    P = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) {
                      Expr n = batch ? i[1] * bn + i[3] : i[0] * bn + i[2];
                      Expr v = batch ? Bt(i[0], n, i[2]) : Bt(n, i[1]);
                      return padded ? if_then_else(n < n_extent, v, make_zero(v.type())) : v;
                    }),
                    std::string(b_key(g.form)) + ".pack", "pack");
    c.parts["pack"] = P;
  }
  const DataType out = g.out;
  const bool tb = g.transpose_b;
  te::IterVar k = te::reduce_axis(static_cast<int>(g.K), "k");
  std::vector<Expr> shape;
  if (batch) shape.emplace_back(static_cast<int>(g.B));
  shape.insert(shape.end(), {Expr(static_cast<int>(g.M)), Expr(static_cast<int>(g.N))});
  const int bn = static_cast<int>(pack_bn);
  // With padded weight blocks the products are computed over the padded columns too, into a
  // [.., M, blocks * bn] anchor, so that the accumulation needs no bounds checks; the [.., M, N]
  // result (then the epilogue) reads its first N columns.
  const bool padded = pack_bn > 0 && g.N % pack_bn != 0;
  std::vector<Expr> anchor_shape = shape;
  if (padded) anchor_shape.back() = Expr(static_cast<int>(blocks * pack_bn));
  te::Tensor C = te::compute(
      anchor_shape, te::FCompute([=](const std::vector<Var> &i) {
        Expr bb = batch ? (bcast_b ? Expr(0) : Expr(i[0])) : Expr();
        Expr m = i[batch ? 1 : 0], n = i[batch ? 2 : 1];
        Expr av = batch ? A(i[0], m, k->var) : A(m, k->var);
        Expr bv;
        if (P.defined()) {
          bv = batch ? P(bb, floordiv(n, bn), k->var, floormod(n, bn)) : P(floordiv(n, bn), k->var, floormod(n, bn));
        } else if (tb) {
          bv = batch ? Bt(bb, n, k->var) : Bt(n, k->var);
        } else {
          bv = batch ? Bt(bb, k->var, n) : Bt(k->var, n);
        }
        return te::sum(cast(out, av) * cast(out, bv), {k});
      }),
      std::string(g.form == Form::Dense ? "dense" : "matmul") + (padded ? ".padded" : ""), "gemm");
  c.parts["anchor"] = C;
  if (padded) {
    te::Tensor padded_c = C;
    C = te::compute(shape, te::FCompute([=](const std::vector<Var> &i) { return padded_c(exprs(i)); }),
                    g.form == Form::Dense ? "dense" : "matmul", "elemwise");
    c.parts["unpad"] = C;
  }
  ChannelMap ch{g.N, [batch](const std::vector<Var> &i) { return Expr(i[batch ? 2 : 1]); }};
  c.epilogue = build_epilogue(C, g.epilogue, ch, &c.inputs);
  c.outputs = {c.epilogue.empty() ? C : c.epilogue.back()};
  return c;
}

// --- the packed / direct schedule (dense_pack, matmul, batch_matmul) ---

// AutoTVM's dense_pack knobs, and two constraints that keep sampled configs where a register tile
// can work. tile_x holds the divisors of N; when the weight is packed (so its blocks can be padded)
// and N is not a multiple of the vector width, it also holds power-of-two sizes whose padding of
// N is less than one innermost tile, so that the vectorized tile can be whole vectors.
void define_tiled_space(ConfigSpace &s, const Gemm &g, bool packs, const Target &t) {
  const int64_t lanes = t.lanes(g.out);
  s.define_split("tile_y", g.M, 3);
  if (g.bn > 0) {
    // The block is fixed: whole blocks of bn, the last padded when bn does not divide N.
    const int64_t n = g.N, bn = g.bn;
    s.define_split("tile_x", n, 3, SplitPolicy::verbose(),
                   [n, bn](const std::vector<int64_t> &x) { return x[2] == bn && x[0] * x[1] * x[2] - n < x[2]; });
  } else if (packs && g.N % lanes != 0) {
    const int64_t n = g.N;
    s.define_split("tile_x", n, 3, SplitPolicy::verbose(),
                   [n](const std::vector<int64_t> &x) { return x[0] * x[1] * x[2] - n < x[2]; });
  } else {
    s.define_split("tile_x", g.N, 3);
  }
  s.define_split("tile_k", g.K, 2);
  s.define_split("tile_inner", g.M, 2, SplitPolicy::factors(16));
  // The vectorized x tile is a multiple of the widest power-of-two share of the vector that some
  // tile_x value has (the whole vector whenever one exists).
  int64_t share = 1;
  for (const Json &x : s.knob("tile_x").entities) {
    const int64_t xi = x.as_int_vector().back();
    for (int64_t q = lanes; q > share; q /= 2) {
      if (xi % q == 0) {
        share = q;
        break;
      }
    }
  }
  s.add_constraint("vector_tile_multiple_of_" + std::to_string(share), {"tile_x"},
                   [share](const Config &c) { return c.split("tile_x").back() % share == 0; });
  // The register tile: the rows accumulated together (tile_inner's rows when it splits them, which
  // it must do evenly, else all of tile_y's) times the vectors of tile_x, plus one weight vector
  // per column vector and a broadcast, within the vector registers.
  const int64_t regs = t.vector_registers();
  s.add_constraint("register_tile_within_" + std::to_string(regs) + "_registers", {"tile_y", "tile_x", "tile_inner"},
                   [lanes, regs](const Config &c) {
                     const int64_t ty = c.split("tile_y").back(), inner = c.split("tile_inner").back();
                     if (inner > 1 && ty % inner != 0) return false;
                     const int64_t rows = inner > 1 ? inner : ty;
                     const int64_t nv = ceil_div(c.split("tile_x").back(), lanes);
                     return rows * nv + nv + 1 <= regs;
                   });
}

// AutoTVM's fallback for dense_pack, with the vector width of the target.
Config default_tiled(const ConfigSpace &s, const Gemm &g, bool packs, const Target &t) {
  const int64_t vec = t.lanes(g.out);
  // The innermost x tile is vectorized: two vectors when N is a multiple of the vector or the
  // packed weight can be padded; otherwise the widest divisor of N up to two vectors that is a
  // multiple of as large a power-of-two share of the vector as possible (1000 -> 8, not 25).
  int64_t x_ii = g.bn;
  if (x_ii == 0 && packs && g.N % vec != 0) {
    x_ii = 1;
    while (x_ii * 2 <= std::min<int64_t>(g.N, vec * 2)) x_ii *= 2;
  }
  for (int64_t q = vec; q >= 1 && x_ii == 0; q /= 2) {
    for (int64_t d = vec * 2; d >= q; --d) {
      if (g.N % d == 0 && d % q == 0) {
        x_ii = d;
        break;
      }
    }
  }
  if (x_ii == 0) x_ii = largest_divisor_at_most(g.N, vec * 2);
  // Whole x tiles (the last one padded when x_ii does not divide N), grouped by powers of two;
  // the weight panels of a group (x_ii columns by K each) are read again for every block of rows,
  // so a group stays within 512 KiB (a quarter of a 2 MiB L2; K = 2048 measured best that way).
  const int64_t panel = x_ii * g.K * static_cast<int64_t>(g.b.dtype.bytes());
  int64_t nn = ceil_div(g.N, x_ii), x_oi = 1;
  while (nn / x_oi > 4 && (nn / x_oi) % 2 == 0 && 2 * x_oi * panel <= (int64_t{512} << 10)) x_oi *= 2;
  // Rows of accumulators: up to 8, as many as the vector registers hold next to the weights.
  const int64_t nv = ceil_div(x_ii, vec);
  int64_t y_ii = 8;
  while (y_ii > 1 && (g.M % y_ii != 0 || y_ii * nv + nv + 1 > t.vector_registers())) y_ii /= 2;
  int64_t mm = g.M / y_ii, y_oi = 1;
  while (mm / y_oi > 4 && (mm / y_oi) % 2 == 0) y_oi *= 2;
  int64_t k_i = largest_divisor_at_most(g.K, 4);
  return s.from_values({{"tile_y", Json::array_of(std::vector<int64_t>{mm / y_oi, y_oi, y_ii})},
                        {"tile_x", Json::array_of(std::vector<int64_t>{nn / x_oi, x_oi, x_ii})},
                        {"tile_k", Json::array_of(std::vector<int64_t>{g.K / k_i, k_i})},
                        {"tile_inner", Json::array_of(std::vector<int64_t>{g.M / y_ii, y_ii})}});
}

// The output stage and the stage accumulating into the register tile. With padded weight blocks
// the accumulation is the padded anchor itself and the first-N-columns stage is inlined into the
// epilogue (or is the output).
OutputAndAcc tiled_stages(te::Schedule &s, const Compute &c) {
  if (!c.has_part("unpad")) return prepare_anchor(s, c);
  inline_epilogue(s, c);
  if (c.epilogue.empty()) return {c.part("unpad"), c.part("anchor")};
  s[c.part("unpad")].compute_inline();
  return {c.epilogue.back(), c.part("anchor")};
}

void schedule_tiled(te::Schedule &s, const Compute &c, const Config &cfg, bool batch) {
  auto [out, acc] = tiled_stages(s, c);
  const size_t o = batch ? 1 : 0;
  te::Stage O = s[out];
  const auto ty = cfg.split("tile_y"), tx = cfg.split("tile_x"), tk = cfg.split("tile_k");
  auto ys = autotune::apply_split(O, O.axis(o), ty);
  auto xs = autotune::apply_split(O, O.axis(o + 1), tx);
  std::vector<IterVar> outer;
  if (batch) outer.push_back(O.axis(0));
  outer.push_back(xs[0]);
  outer.push_back(ys[0]);
  std::vector<IterVar> order = outer;
  order.insert(order.end(), {ys[1], xs[1], ys[2], xs[2]});
  O.reorder(order);
  IterVar xyt, xyo;
  O.fuse(outer, &xyt);
  O.parallel(xyt);
  O.fuse(ys[1], xs[1], &xyo);
  if (ty[2] <= 32) O.unroll(ys[2]);
  O.vectorize(xs[2]);

  te::Stage A = s[acc];
  A.compute_at(O, xyo);
  IterVar ay = A.axis(o), ax = A.axis(o + 1);
  auto ks = autotune::apply_split(A, A.reduce_axis(0), tk);
  const int64_t inner = cfg.split("tile_inner").back();
  // Unrolling the inner reduction loop across the register tile, as long as the code stays small.
  const int64_t rows = inner > 1 ? ceil_div(ty[2], inner) * inner : ty[2];
  const bool unroll_k = tk[1] * rows <= 128;
  if (inner > 1) {
    IterVar yo, yi;
    A.split(ay, static_cast<int>(inner), &yo, &yi);
    A.reorder({ks[0], yo, ks[1], yi, ax});
    if (ty[2] <= 64) A.unroll(yo);
    if (unroll_k) A.unroll(ks[1]);
    A.unroll(yi);
  } else {
    A.reorder({ks[0], ks[1], ay, ax});
    if (unroll_k) A.unroll(ks[1]);
    if (ty[2] <= 64) A.unroll(ay);
  }
  A.vectorize(ax);

  if (c.has_part("pack")) {
    te::Stage P = s[c.part("pack")];
    IterVar f;
    if (batch) {
      P.fuse(P.axis(0), P.axis(1), &f);
    } else {
      f = P.axis(0);
    }
    P.parallel(f);
    P.vectorize(P.axis(batch ? 3 : 2));
  }
}

// --- dense_nopack ---

Compute nopack_compute(const Gemm &g, int64_t vec) {
  Compute c;
  te::Tensor X = te::placeholder(g.a.shape_exprs(), g.a.dtype, "data");
  te::Tensor W = te::placeholder(g.b.shape_exprs(), g.b.dtype, "weight");
  c.inputs = {X, W};
  const DataType out = g.out;
  const int v = static_cast<int>(vec);
  te::IterVar ko = te::reduce_axis(static_cast<int>(g.K / vec), "k.outer");
  te::Tensor CC = te::compute(
      {Expr(static_cast<int>(g.M)), Expr(static_cast<int>(g.N)), Expr(v)},
      [=](Var m, Var n, Var l) {
        return te::sum(cast(out, X(m, ko->var * v + l)) * cast(out, W(n, ko->var * v + l)), {ko});
      },
      "dense.partial", "gemm");
  te::IterVar kv = te::reduce_axis(v, "k.inner");
  te::Tensor C = te::compute(
      {Expr(static_cast<int>(g.M)), Expr(static_cast<int>(g.N))},
      [=](Var m, Var n) { return te::sum(CC(m, n, kv->var), {kv}); }, "dense", "gemm");
  c.parts["partial"] = CC;
  c.parts["anchor"] = C;
  ChannelMap ch{g.N, [](const std::vector<Var> &i) { return Expr(i[1]); }};
  c.epilogue = build_epilogue(C, g.epilogue, ch, &c.inputs);
  c.outputs = {c.epilogue.empty() ? C : c.epilogue.back()};
  return c;
}

void schedule_nopack(te::Schedule &s, const Compute &c, const Config &cfg) {
  auto [out, acc] = prepare_anchor(s, c);
  te::Stage O = s[out];
  auto ys = autotune::apply_split(O, O.axis(0), cfg.split("tile_y"));
  auto xs = autotune::apply_split(O, O.axis(1), cfg.split("tile_x"));
  O.reorder({ys[0], xs[0], ys[1], xs[1]});
  IterVar xyo;
  O.fuse(ys[0], xs[0], &xyo);
  O.parallel(xyo);
  te::Stage A = s[acc];
  A.compute_at(O, xyo);
  A.unroll(A.reduce_axis(0));
  te::Stage P = s[c.part("partial")];
  P.compute_at(O, xyo);
  IterVar yz;
  P.fuse(P.axis(0), P.axis(1), &yz);
  P.reorder({P.reduce_axis(0), yz, P.axis(2)});
  if (cfg.split("tile_y")[1] * cfg.split("tile_x")[1] <= 64) P.unroll(yz);
  P.vectorize(P.axis(2));
}

// --- registration ---

Json matrix(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

std::vector<ArgumentSpec> gemm_arguments(const std::string &name, Form form) {
  std::vector<ArgumentSpec> args;
  switch (form) {
    case Form::Dense:
      args = {tensor_spec("data", 2, "the input [M, K]"), tensor_spec("weight", 2, "the weights [N, K]")};
      break;
    case Form::Matmul:
      args = {tensor_spec("a", 2, "[M, K]"), tensor_spec("b", 2, "[K, N]")};
      break;
    case Form::BatchMatmul:
      args = {tensor_spec("a", 3, "[B, M, K]"),
              tensor_spec("b", 3, "[B or 1, N, K] with transpose_b, else [B or 1, K, N]"),
              {"transpose_b", "bool", "true", "b is [.., N, K] (packed by the kernel) rather than [.., K, N]"}};
      break;
  }
  args.push_back(out_dtype_spec());
  args.push_back(epilogue_spec());
  if (name == "dense_pack.x86") {
    args.push_back({"prepacked", "bool", "false",
                    "the kernel's weight input comes packed as [ceil(N/bn), K, bn], bn the innermost tile_x factor"});
    args.push_back({"bn", "int", "0",
                    "with prepacked: the block bn, fixed (tile_x's innermost factor is bn); 0: tile_x chooses it"});
  }
  return args;
}

Json gemm_example(Form form) {
  switch (form) {
    case Form::Dense:
      return Json::object({{"data", matrix({16, 64})}, {"weight", matrix({32, 64})}});
    case Form::Matmul:
      return Json::object({{"a", matrix({16, 64})}, {"b", matrix({64, 32})}});
    case Form::BatchMatmul:
      break;
  }
  return Json::object({{"a", matrix({2, 16, 64})}, {"b", matrix({2, 32, 64})}});
}

Template tiled_template(const std::string &name, Form form, int64_t pack, const std::string &summary) {
  Template t;
  t.name = name;
  t.version = 1;
  t.summary = summary;
  t.arguments = gemm_arguments(name, form);
  t.example = gemm_example(form);
  t.canonicalize = [name, form](const Json &a) { return canonical(parse(name, form, a)); };
  t.flop = [name, form](const Json &a) { return flop(parse(name, form, a)); };
  t.define_space = [name, form, pack](ConfigSpace &s, const Json &a, const Target &tg) {
    Gemm g = parse(name, form, a);
    define_tiled_space(s, g, pack && g.transpose_b, tg);
  };
  t.default_config = [name, form, pack](const ConfigSpace &s, const Json &a, const Target &tg) {
    Gemm g = parse(name, form, a);
    return default_tiled(s, g, pack && g.transpose_b, tg);
  };
  t.compute = [name, form, pack](const Json &a, const Config &cfg) {
    Gemm g = parse(name, form, a);
    const bool do_pack = pack && g.transpose_b;
    return gemm_compute(g, do_pack ? cfg.split("tile_x").back() : 0);
  };
  t.schedule = [form](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    schedule_tiled(s, c, cfg, form == Form::BatchMatmul);
  };
  return t;
}

}  // namespace

void register_gemm_templates(Registry &r) {
  r.add(tiled_template("dense_pack.x86", Form::Dense, 1, "dense with packed weights (data[M,K], weight[N,K])"));
  r.add(tiled_template("matmul.x86", Form::Matmul, 0, "matrix multiply a[M,K] x b[K,N]"));
  r.add(tiled_template("batch_matmul.x86", Form::BatchMatmul, 1,
                       "batched matrix multiply a[B,M,K] x b[B|1,N,K]^T (packed) or b[B|1,K,N]"));

  Template t;
  t.name = "dense_nopack.x86";
  t.version = 1;
  t.summary = "dense without packing: lane-wise partial sums over K (data[M,K], weight[N,K])";
  t.arguments = gemm_arguments(t.name, Form::Dense);
  t.example = gemm_example(Form::Dense);
  const std::string name = t.name;
  t.canonicalize = [name](const Json &a) { return canonical(parse(name, Form::Dense, a)); };
  t.flop = [name](const Json &a) { return flop(parse(name, Form::Dense, a)); };
  t.define_space = [name](ConfigSpace &s, const Json &a, const Target &) {
    Gemm g = parse(name, Form::Dense, a);
    s.define_split("tile_y", g.M, 2);
    s.define_split("tile_x", g.N, 2);
    s.define_split("tile_k", g.K, 2);
  };
  t.default_config = [name](const ConfigSpace &s, const Json &a, const Target &tg) {
    Gemm g = parse(name, Form::Dense, a);
    int64_t kb = largest_divisor_at_most(g.K, tg.lanes(g.out) * 2);
    int64_t yb = largest_divisor_at_most(g.M, 4), xb = largest_divisor_at_most(g.N, 4);
    return s.from_values({{"tile_y", Json::array_of(std::vector<int64_t>{g.M / yb, yb})},
                          {"tile_x", Json::array_of(std::vector<int64_t>{g.N / xb, xb})},
                          {"tile_k", Json::array_of(std::vector<int64_t>{g.K / kb, kb})}});
  };
  t.compute = [name](const Json &a, const Config &cfg) {
    return nopack_compute(parse(name, Form::Dense, a), cfg.split("tile_k").back());
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) { schedule_nopack(s, c, cfg); };
  r.add(std::move(t));
}

}  // namespace kiln::ops
