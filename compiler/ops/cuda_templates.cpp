// Templates for CUDA targets (`cuda -arch=sm_XX`): the computes, arguments and FLOP counts of the
// x86 templates of the same operators, with GPU schedules (blocks, threads, shared-memory staging)
// and config spaces whose constraints keep every launch within the target's limits.
#include <algorithm>
#include <cctype>
#include <functional>

#include "compiler/ops/registry.h"
#include "compiler/ops/templates.h"

namespace kiln::ops {

using autotune::Config;
using autotune::ConfigSpace;
using contracts::Json;
using ir::IterVar;
using namespace detail;

namespace {

// The limits of a block that every CUDA template's space keeps to: sm_70 and newer allow 1024
// threads and, without opting in to more, 48 KiB of static shared memory.
constexpr int64_t kMaxThreadsPerBlock = 1024;
// A CUDA block has at most 64 threads in z (1024 in x and in y, which kMaxThreadsPerBlock bounds).
constexpr int64_t kMaxThreadsInZ = 64;
constexpr int64_t kMaxSharedBytes = 48 * 1024;
// Virtual threads a block runs one after the other in each thread (their registers add up).
constexpr int64_t kMaxVirtualThreads = 16;
// The accumulators one thread holds, its register tiles of every virtual thread together: a CUDA
// thread has 255 registers. Larger tiles spill to local memory and compile for long (on an H200,
// NVRTC took over 10 s on such dense configs, and a tile of 1 MiB could not be written at all).
constexpr int64_t kMaxRegisterTile = 256;

// A CUDA template with the arguments, compute and FLOP count of the template `base` (registered
// before it) and its own summary; the space, default config and schedule are left to the caller.
Template derived(const Registry &r, const std::string &base, const std::string &name, const std::string &summary) {
  std::shared_ptr<const Template> b = r.get(base);
  Template t;
  t.name = name;
  t.version = 1;
  t.summary = summary;
  t.arguments = b->arguments;
  t.example = b->example;
  t.canonicalize = b->canonicalize;
  t.flop = b->flop;
  t.compute = b->compute;
  return t;
}

// A default split of `n` in four (blocks, virtual threads, threads, per thread): at most `inner`
// per thread and `threads` threads, one virtual thread, the rest blocks; factors of n.
Json default_split4(int64_t n, int64_t threads, int64_t inner) {
  const int64_t i = largest_divisor_at_most(n, inner);
  const int64_t th = largest_divisor_at_most(n / i, threads);
  return Json::array_of(std::vector<int64_t>{n / i / th, 1, th, i});
}

// Splits `axis` of `stage` by a four-way split (blocks, virtual threads, threads, per thread).
void apply_split4(te::Stage &stage, const IterVar &axis, const std::vector<int64_t> &f, IterVar *block,
                  IterVar *vthread, IterVar *thread, IterVar *inner) {
  IterVar tmp, rest;
  stage.split(axis, f[1] * f[2] * f[3], block, &tmp);
  stage.split(tmp, f[2] * f[3], vthread, &rest);
  stage.split(rest, f[3], thread, inner);
}

// The output tiling the NCHW convolutions share (direct and implicit GEMM): the epilogue inlined,
// the anchor accumulated in local memory, the output's channels, rows and columns each split
// into blocks, virtual threads, threads and a per-thread tile (tile_f, tile_y, tile_x), batch and
// channel blocks on grid z, and the accumulation computed at the thread.
struct ConvTiling {
  te::Tensor acc;  // the accumulator (the anchor, in local memory)
  te::Stage sa;    // its stage
};
ConvTiling tile_conv_output(te::Schedule &s, const Compute &c, const Config &cfg) {
  inline_epilogue(s, c);
  te::Tensor out = c.outputs[0];
  te::Tensor acc = c.part("anchor");
  if (c.epilogue.empty()) {
    acc = s.cache_write(out, "local");
  } else {
    s[acc].set_scope("local");
  }
  const auto tf = cfg.split("tile_f"), ty = cfg.split("tile_y"), tx = cfg.split("tile_x");
  te::Stage so = s[out];
  IterVar bf, vf, thf, fi, by, vy, thy, yi, bx, vx, thx, xi;
  apply_split4(so, so.axis(1), tf, &bf, &vf, &thf, &fi);
  apply_split4(so, so.axis(2), ty, &by, &vy, &thy, &yi);
  apply_split4(so, so.axis(3), tx, &bx, &vx, &thx, &xi);
  so.reorder({so.axis(0), bf, by, bx, vf, vy, vx, thf, thy, thx, fi, yi, xi});
  IterVar bz, v, v2;
  so.fuse(so.axis(0), bf, &bz);
  so.bind(bz, "blockIdx.z");
  so.bind(by, "blockIdx.y");
  so.bind(bx, "blockIdx.x");
  so.fuse(vf, vy, &v2);
  so.fuse(v2, vx, &v);  // one vthread loop: a binding may not nest in another of its tag
  so.bind(v, "vthread");
  so.bind(thf, "threadIdx.z");
  so.bind(thy, "threadIdx.y");
  so.bind(thx, "threadIdx.x");

  te::Stage sa = s[acc];
  sa.compute_at(so, thx);
  return {acc, sa};
}

// Stages `in`, as `acc` reads it, in shared memory at `axis` of `at` (a reduction step): the copy's
// axes fused and split over the block's threads, `threads` giving each thread tag and its extent,
// innermost first; with `vector` > 1 (which divides the tile) each thread copies that many
// consecutive elements as one vector.
void stage_in_shared(te::Schedule &s, const te::Tensor &in, const te::Tensor &acc, te::Stage &at, const IterVar &axis,
                     const std::vector<std::pair<std::string, int64_t>> &threads, bool double_buffer = false,
                     int64_t vector = 1) {
  te::Tensor shared = s.cache_read(in, "shared", {acc.op()});
  te::Stage st = s[shared];
  st.compute_at(at, axis);
  if (double_buffer) st.double_buffer();
  std::vector<IterVar> axes;
  for (size_t i = 0; i < shared.shape().size(); ++i) axes.push_back(st.axis(i));
  IterVar rest;
  st.fuse(axes, &rest);
  if (vector > 1) {  // `vector` consecutive elements per thread, copied as one vector
    IterVar outer, inner;
    st.split(rest, vector, &outer, &inner);
    st.vectorize(inner);
    rest = outer;
  }
  for (const auto &[tag, extent] : threads) {
    IterVar outer, inner;
    st.split(rest, extent, &outer, &inner);
    st.bind(inner, tag);
    rest = outer;
  }
}

int64_t numel(const te::Tensor &t) {
  int64_t n = 1;
  for (const auto &d : t.shape()) n *= *ir::as_const_int(d);
  return n;
}

// ------------------------------------------------------------------ one thread per output
// The output's axes fused and split into blocks of `num_thread` threads; every other stage is
// inlined (injective stages: padding, epilogues) or, for a reduction, computed by the thread that
// needs it, in local memory. A schedule for every operator, and the one for the injective ones.

void define_thread_per_output(ConfigSpace &s, int64_t outputs) {
  std::vector<int64_t> threads;
  for (int64_t v : {32, 64, 128, 256, 512, 1024}) {
    if (v <= std::max<int64_t>(32, outputs) && v <= kMaxThreadsPerBlock) threads.push_back(v);
  }
  s.define_choice("num_thread", threads);
}

Config default_thread_per_output(const ConfigSpace &s) {
  const auto &k = s.knob("num_thread");
  const Json v = k.find(Json(int64_t{256})) >= 0 ? Json(int64_t{256}) : k.entities.back();
  return s.from_values({{"num_thread", v}});
}

void schedule_thread_per_output(te::Schedule &s, const Compute &c, const Config &cfg) {
  const te::Tensor &out = c.outputs.at(0);
  te::Stage so = s[out];
  std::vector<IterVar> axes;
  for (size_t i = 0; i < out.shape().size(); ++i) axes.push_back(so.axis(i));
  IterVar fused = axes[0], bx, tx;
  if (axes.size() > 1) so.fuse(axes, &fused);
  so.split(fused, cfg.choice_int("num_thread"), &bx, &tx);
  so.bind(bx, "blockIdx.x");
  so.bind(tx, "threadIdx.x");
  std::vector<te::Operation> others;
  for (const auto &st : s.stages()) {
    if (st->op != out.op() && dynamic_cast<const te::ComputeOpNode *>(st->op.get())) others.push_back(st->op);
  }
  for (const te::Operation &op : others) {
    te::Stage st = s[op];
    if (static_cast<const te::ComputeOpNode *>(op.get())->is_reduction()) {
      st.set_scope("local");
      st.compute_at(so, tx);
    } else {
      st.compute_inline();
    }
  }
}

// `name` (NAME.cuda) with the compute of NAME.x86 and the schedule above.
void register_thread_per_output(Registry &r, const std::string &op, const std::string &summary) {
  Template t = derived(r, op + ".x86", op + ".cuda", summary);
  auto base = r.get(op + ".x86");
  t.define_space = [base](ConfigSpace &s, const Json &a, const Target &) {
    define_thread_per_output(s, numel(base->compute(a, Config()).outputs[0]));
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const Target &) { return default_thread_per_output(s); };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    schedule_thread_per_output(s, c, cfg);
  };
  r.add(std::move(t));
}

// ------------------------------------------------------------------ matmul, dense, batch_matmul
// C[.., M, N] = A[.., M, K] x B: a block computes a tile of C (one batch of it: blockIdx.z) as
// vy x vx virtual-thread tiles, in each of which a thread computes a register tile of yi x xi
// outputs accumulated in local memory; tiles of A and B over ko are staged through shared memory
// by all threads of the block. B is read as the x86 template's compute reads it: b[K, N], or for
// dense and batch_matmul the weight packed in blocks of xi columns, whose packing is inlined into
// the shared-memory staging (no packed copy is made).

// Registers `name` with the compute of `base` (matmul.x86, dense_pack.x86 or batch_matmul.x86,
// whose packing factor is the last factor of tile_x) and the schedule above.
void register_gemm(Registry &r, const std::string &base_name, const std::string &name, const std::string &summary) {
  Template t = derived(r, base_name, name, summary);
  t.version = 3;  // 2: double_buffer and auto_unroll_max_step; 3: vectorize and unroll_explicit
  auto base = r.get(base_name);
  struct Dims {
    int64_t M, N, K, bytes;
  };
  // The unpacked compute gives the shapes (the packing factor does not change them).
  auto dims = [base](const Json &a) {
    ConfigSpace unpacked("shapes", 1);
    unpacked.define_split("tile_x", 1, 1);
    Compute c = base->compute(a, unpacked.from_values({{"tile_x", Json::array_of(std::vector<int64_t>{1})}}));
    const te::Tensor &A = c.inputs[0];
    const auto &out = c.outputs[0].shape();
    const size_t rank = out.size();
    return Dims{*ir::as_const_int(out[rank - 2]), *ir::as_const_int(out[rank - 1]), *ir::as_const_int(A.shape().back()),
                A.dtype().bytes()};
  };
  t.define_space = [dims](ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    s.define_split("tile_y", d.M, 4);  // blocks, virtual threads, threads, per thread
    s.define_split("tile_x", d.N, 4);
    s.define_split("tile_k", d.K, 2);  // stages, per stage
    s.define_bool("unroll_k");
    s.define_bool("double_buffer");
    // Loops of each reduction step up to this many steps in all are unrolled (0: none).
    s.define_choice("auto_unroll_max_step", std::vector<int64_t>{0, 16, 64, 512});
    // Elements each thread copies as one vector into shared memory: a divisor of the reduction
    // step, which divides both tiles.
    s.define_choice("vectorize", std::vector<int64_t>{1, 2, 4});
    // 1: unroll_k does not unroll the reduction step in the IR but leaves it, and the register
    // tile's loops (of the step and of its initialization), as loops under `#pragma unroll` for
    // the CUDA compiler to unroll; the compiler then also decides the rest
    // (auto_unroll_max_step 0).
    s.define_bool("unroll_explicit");
    s.add_constraint("unroll_explicit_alone", {"auto_unroll_max_step", "unroll_explicit"}, [](const Config &c) {
      return !c.choice_bool("unroll_explicit") || c.choice_int("auto_unroll_max_step") == 0;
    });
    s.add_constraint("vectorize_divides_step", {"tile_k", "vectorize"},
                     [](const Config &c) { return c.split("tile_k")[1] % c.choice_int("vectorize") == 0; });
    s.add_product_limit("threads_per_block", {{"tile_y", 2}, {"tile_x", 2}}, 1, kMaxThreadsPerBlock);
    s.add_product_limit("virtual_threads", {{"tile_y", 1}, {"tile_x", 1}}, 1, kMaxVirtualThreads);
    s.add_product_limit("register_tile", {{"tile_y", 1}, {"tile_y", 3}, {"tile_x", 1}, {"tile_x", 3}}, 1,
                        kMaxRegisterTile);
    s.add_constraint("shared_memory", {"tile_y", "tile_x", "tile_k", "double_buffer"}, [d](const Config &c) {
      const auto y = c.split("tile_y"), x = c.split("tile_x"), k = c.split("tile_k");
      const int64_t copies = c.choice_bool("double_buffer") ? 2 : 1;
      // A tile per virtual thread (the kernel gives each its own copy), two when double-buffered.
      return copies * y[1] * x[1] * (y[2] * y[3] + x[2] * x[3]) * k[1] * d.bytes <= kMaxSharedBytes;
    });
  };
  t.default_config = [dims](const ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    const int64_t kb = largest_divisor_at_most(d.K, 8);
    return s.from_values({{"tile_y", default_split4(d.M, 8, 4)},
                          {"tile_x", default_split4(d.N, 16, 4)},
                          {"tile_k", Json::array_of(std::vector<int64_t>{d.K / kb, kb})},
                          {"unroll_k", Json(int64_t{1})}});
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    inline_epilogue(s, c);
    te::Tensor out = c.outputs[0];
    te::Tensor acc = c.part("anchor");
    if (c.epilogue.empty() && !c.has_part("unpad")) {
      acc = s.cache_write(out, "local");
    } else {
      s[acc].set_scope("local");
    }
    if (c.has_part("unpad")) s[c.part("unpad")].compute_inline();
    const bool batch = out.shape().size() == 3;
    const int m_axis = batch ? 1 : 0;
    const auto ty = cfg.split("tile_y"), tx = cfg.split("tile_x"), tk = cfg.split("tile_k");
    te::Stage so = s[out];
    IterVar by, vy, yt, yi, bx, vx, xt, xi;
    apply_split4(so, so.axis(m_axis), ty, &by, &vy, &yt, &yi);
    apply_split4(so, so.axis(m_axis + 1), tx, &bx, &vx, &xt, &xi);
    std::vector<IterVar> order = {by, bx, vy, vx, yt, xt, yi, xi};
    if (batch) {
      order.insert(order.begin(), so.axis(0));
      so.bind(so.axis(0), "blockIdx.z");
    }
    so.reorder(order);
    so.bind(by, "blockIdx.y");
    so.bind(bx, "blockIdx.x");
    IterVar v;  // one vthread loop: a binding may not nest in another of its tag
    so.fuse(vy, vx, &v);
    so.bind(v, "vthread");
    so.bind(yt, "threadIdx.y");
    so.bind(xt, "threadIdx.x");

    te::Stage sa = s[acc];
    sa.compute_at(so, xt);
    IterVar ko, ki;
    sa.split(sa.reduce_axis(0), tk[1], &ko, &ki);
    std::vector<IterVar> acc_order = {ko, ki};
    for (size_t i = 0; i < acc.shape().size(); ++i) acc_order.push_back(sa.axis(i));
    sa.reorder(acc_order);
    if (cfg.choice_bool("unroll_k")) {
      if (cfg.choice_bool("unroll_explicit")) {
        // The reduction step and the register tile inside it, left to the CUDA compiler: the
        // CUDA back end's unroll pragma (codegen::kUnrollPragma).
        for (const IterVar &iv : std::vector<IterVar>(acc_order.begin() + 1, acc_order.end())) {
          sa.pragma(iv, "unroll", ir::make_const(ir::Int(32), int64_t{1}));
        }
      } else {
        sa.unroll(ki);
      }
    }
    const int64_t unroll_steps = cfg.choice_int("auto_unroll_max_step");
    if (unroll_steps > 0) sa.pragma(ki, "auto_unroll_max_step", ir::make_const(ir::Int(32), unroll_steps));

    // B as the accumulation reads it: the packed weight, whose packing is inlined into the copy.
    const te::Tensor b = c.has_part("pack") ? c.part("pack") : c.inputs[1];
    for (const te::Tensor &in : {c.inputs[0], b}) {
      stage_in_shared(s, in, acc, sa, ko, {{"threadIdx.x", tx[2]}, {"threadIdx.y", ty[2]}},
                      cfg.choice_bool("double_buffer"), cfg.choice_int("vectorize"));
    }
    if (c.has_part("pack")) s[c.part("pack")].compute_inline();
  };
  r.add(std::move(t));
}

// ------------------------------------------------------------------ softmax.cuda, layer_norm.cuda
// A block per row (the axes not reduced, fused); the row's statistics (softmax: max and sum;
// layer norm: sum and variance) are cross-thread reductions: each of num_thread threads reduces
// a strided slice of the row into shared memory (rfactor), and after a barrier one thread
// combines the partial results; then every thread writes its slice of the row. Elementwise parts
// (the exponentials, the mean) are recomputed where they are read.

struct RowOp {
  std::string base, name, summary;
  std::vector<std::string> reductions;  // parts reduced across the block, in order
  std::vector<std::string> inlined;     // parts recomputed where read
  // The axes a row spans (the reduced ones), from the canonical arguments and the rank.
  std::function<std::vector<int64_t>(const Json &canon, int64_t rank)> row_axes;
};

void register_row_op(Registry &r, const RowOp &op) {
  Template t = derived(r, op.base, op.name, op.summary);
  t.version = 2;
  auto base = r.get(op.base);
  t.define_space = [base, op](ConfigSpace &s, const Json &a, const Target &) {
    const Json canon = base->canonicalize(a);
    const te::Tensor data = base->compute(a, Config()).inputs[0];
    const std::vector<int64_t> axes = op.row_axes(canon, static_cast<int64_t>(data.shape().size()));
    int64_t len = 1;
    for (int64_t d : axes) len *= *ir::as_const_int(data.shape()[static_cast<size_t>(d)]);
    std::vector<int64_t> threads;
    for (int64_t v : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}) {
      if (v <= len) threads.push_back(v);
    }
    s.define_choice("num_thread", threads);
    // The first reduced axis, for the schedule (one value; the reduced axes are contiguous).
    s.define_choice("row_axis", {axes.front()});
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const Target &) {
    const auto &k = s.knob("num_thread");
    const Json v = k.find(Json(int64_t{128})) >= 0 ? Json(int64_t{128}) : k.entities.back();
    return s.from_values({{"num_thread", v}, {"row_axis", s.knob("row_axis").entities.front()}});
  };
  t.schedule = [op](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    inline_epilogue(s, c);
    const te::Tensor &anchor = c.part("anchor");
    if (!c.epilogue.empty()) s[anchor].compute_inline();
    for (const std::string &part : op.inlined) s[c.part(part)].compute_inline();
    const te::Tensor out = c.outputs[0];
    const size_t first = static_cast<size_t>(cfg.choice_int("row_axis"));
    const int nt = static_cast<int>(cfg.choice_int("num_thread"));
    const size_t reduced =
        static_cast<const te::ComputeOpNode *>(c.part(op.reductions.front()).op().get())->reduce_axis.size();

    te::Stage so = s[out];
    std::vector<IterVar> rows, cols;
    for (size_t i = 0; i < out.shape().size(); ++i) {
      (i >= first && i < first + reduced ? cols : rows).push_back(so.axis(i));
    }
    std::vector<IterVar> order = rows;
    order.insert(order.end(), cols.begin(), cols.end());
    so.reorder(order);
    IterVar row, col = cols[0], ko, ki;
    if (cols.size() > 1) so.fuse(cols, &col);
    if (!rows.empty()) {
      row = rows[0];
      if (rows.size() > 1) so.fuse(rows, &row);
      so.bind(row, "blockIdx.x");
    }
    so.split(col, nt, &ko, &ki);
    so.bind(ki, "threadIdx.x");

    for (const std::string &part : op.reductions) {
      const te::Tensor red = c.part(part);
      te::Stage sr = s[red];
      std::vector<IterVar> raxes;
      for (size_t i = 0; i < reduced; ++i) raxes.push_back(sr.reduce_axis(i));
      IterVar rk = raxes[0], rko, rki;
      if (raxes.size() > 1) sr.fuse(raxes, &rk);
      sr.split(rk, nt, &rko, &rki);
      te::Tensor partial = s.rfactor(red, rki);
      s[partial].set_scope("shared");
      sr.set_scope("shared");
      if (!rows.empty()) sr.compute_at(so, row);
      te::Stage sp = s[partial];
      sp.compute_at(sr, sr.axis(red.shape().size() - 1));
      sp.bind(sp.axis(0), "threadIdx.x");
    }
  };
  r.add(std::move(t));
}

// ------------------------------------------------------------------ conv2d_nchw.cuda
// Direct convolution out[n, f, y, x] tiled as AutoTVM's CUDA schedule: a block computes a tile of
// output channels x rows x columns (the batch and the channel blocks on grid z) as virtual-thread
// tiles (one fused vthread loop), each thread a register tile accumulated in local memory; for
// every step of the reduction over input channels and kernel rows and columns, a tile of the
// padded input (the padding inlined into the copy) and of the weights is staged in shared memory
// by all threads of the block.

// `depthwise`: depthwise_conv2d_nchw (kernel [C, M, KH, KW]), as a grouped convolution with C
// groups of one input channel and M output channels each; it has no input-channel reduction.
void register_conv2d_nchw(Registry &r, const std::string &op, bool depthwise, const std::string &summary) {
  Template t = derived(r, op + ".x86", op + ".cuda", summary);
  t.version = 2;
  auto base = r.get(op + ".x86");
  struct Dims {
    int64_t OC, OH, OW, C, KH, KW, sh, sw, dh, dw, groups, bytes;
  };
  auto dims = [base, depthwise](const Json &a) {
    const Json canon = base->canonicalize(a);
    const Compute c = base->compute(a, Config());
    auto dim = [](const te::Tensor &t, size_t i) { return *ir::as_const_int(t.shape()[i]); };
    const te::Tensor &data = c.inputs[0], &kernel = c.inputs[1], &out = c.part("anchor");
    const auto strides = canon.at("strides").as_int_vector(), dilation = canon.at("dilation").as_int_vector();
    return Dims{dim(out, 1),
                dim(out, 2),
                dim(out, 3),
                dim(data, 1),
                dim(kernel, 2),
                dim(kernel, 3),
                strides[0],
                strides[1],
                dilation[0],
                dilation[1],
                depthwise ? dim(data, 1) : canon.at("groups").as_int(),
                data.dtype().bytes()};
  };
  t.define_space = [dims, depthwise](ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    s.define_split("tile_f", d.OC, 4);  // blocks, virtual threads, threads, per thread
    s.define_split("tile_y", d.OH, 4);
    s.define_split("tile_x", d.OW, 4);
    if (!depthwise) s.define_split("tile_rc", d.C / d.groups, 2);  // steps, per step
    s.define_split("tile_ry", d.KH, 2);
    s.define_split("tile_rx", d.KW, 2);
    s.add_product_limit("threads_per_block", {{"tile_f", 2}, {"tile_y", 2}, {"tile_x", 2}}, 1, kMaxThreadsPerBlock);
    s.add_product_limit("threads_in_z", {{"tile_f", 2}}, 1, kMaxThreadsInZ);  // tile_f's threads: threadIdx.z
    s.add_product_limit("virtual_threads", {{"tile_f", 1}, {"tile_y", 1}, {"tile_x", 1}}, 1, kMaxVirtualThreads);
    s.add_product_limit("register_tile",
                        {{"tile_f", 1}, {"tile_f", 3}, {"tile_y", 1}, {"tile_y", 3}, {"tile_x", 1}, {"tile_x", 3}}, 1,
                        kMaxRegisterTile);
    s.add_constraint(
        "shared_memory",
        depthwise ? std::vector<std::string>{"tile_f", "tile_y", "tile_x", "tile_ry", "tile_rx"}
                  : std::vector<std::string>{"tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx"},
        [d, depthwise](const Config &c) {
          const auto f = c.split("tile_f"), y = c.split("tile_y"), x = c.split("tile_x");
          const auto rc = depthwise ? std::vector<int64_t>{1, 1} : c.split("tile_rc");
          const auto ry = c.split("tile_ry"), rx = c.split("tile_rx");
          // The tiles of one virtual thread; the kernel gives each virtual thread its own copy.
          const int64_t fspan = f[2] * f[3];
          const int64_t icpg = d.C / d.groups, ocpg = d.OC / d.groups;
          // Channels of the input tile: a group's slice, or slices of the groups the
          // channels span.
          const int64_t channels = d.groups == 1 ? rc[1] : std::min(d.C, ((fspan + ocpg - 1) / ocpg + 1) * icpg);
          const int64_t rows = (y[2] * y[3] - 1) * d.sh + (ry[1] - 1) * d.dh + 1;
          const int64_t cols = (x[2] * x[3] - 1) * d.sw + (rx[1] - 1) * d.dw + 1;
          const int64_t weights = fspan * rc[1] * ry[1] * rx[1];
          return f[1] * y[1] * x[1] * (channels * rows * cols + weights) * d.bytes <= kMaxSharedBytes;
        });
  };
  t.default_config = [dims, depthwise](const ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    auto split2 = [](int64_t n, int64_t inner) {
      const int64_t i = largest_divisor_at_most(n, inner);
      return Json::array_of(std::vector<int64_t>{n / i, i});
    };
    std::vector<std::pair<std::string, Json>> values = {{"tile_f", default_split4(d.OC, 4, 2)},
                                                        {"tile_y", default_split4(d.OH, 4, 1)},
                                                        {"tile_x", default_split4(d.OW, 8, 1)},
                                                        {"tile_ry", split2(d.KH, 1)},
                                                        {"tile_rx", split2(d.KW, d.KW)}};
    if (!depthwise) values.emplace_back("tile_rc", split2(d.C / d.groups, 4));
    return s.from_values(values);
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    const auto tf = cfg.split("tile_f"), ty = cfg.split("tile_y"), tx = cfg.split("tile_x");
    auto [acc, sa] = tile_conv_output(s, c, cfg);
    // Input channels (not in a depthwise convolution), kernel rows, kernel columns.
    const bool channels = static_cast<const te::ComputeOpNode *>(acc.op().get())->reduce_axis.size() == 3;
    IterVar rco, rci, ryo, ryi, rxo, rxi;
    if (channels) sa.split(sa.reduce_axis(0), cfg.split("tile_rc")[1], &rco, &rci);
    sa.split(sa.reduce_axis(channels ? 1 : 0), cfg.split("tile_ry")[1], &ryo, &ryi);
    sa.split(sa.reduce_axis(channels ? 2 : 1), cfg.split("tile_rx")[1], &rxo, &rxi);
    if (channels) {
      sa.reorder({rco, ryo, rxo, rci, ryi, rxi, sa.axis(0), sa.axis(1), sa.axis(2), sa.axis(3)});
    } else {
      sa.reorder({ryo, rxo, ryi, rxi, sa.axis(0), sa.axis(1), sa.axis(2), sa.axis(3)});
    }

    const te::Tensor src = c.has_part("pad") ? c.part("pad") : c.inputs[0];
    for (const te::Tensor &in : {src, c.inputs[1]}) {
      stage_in_shared(s, in, acc, sa, rxo, {{"threadIdx.x", tx[2]}, {"threadIdx.y", ty[2]}, {"threadIdx.z", tf[2]}});
    }
    if (c.has_part("pad")) s[c.part("pad")].compute_inline();
  };
  r.add(std::move(t));
}

// ------------------------------------------------------------------ conv2d_nchw_implicit_gemm.cuda
// The convolution as a GEMM: out[m, f] = sum_k A[m, k] * B[k, f] with M = N·OH·OW output
// positions, N = OC output channels and K = IC·KH·KW, A the im2col matrix of the padded input and B
// the weights as [K, OC]. Neither is materialized: A is a stage data.im2col[n, y, x, k] that reads
// the padded input, B a stage kernel.gemm[k, f] that reads the kernel, and both are inlined into
// their shared-memory staging, so the copy of an A tile gathers the input (padding included)
// directly. A block computes a tile of output channels x rows x columns (the batch and the channel
// blocks on grid z): the M tile is rows x columns of one image, so the staged A tile is exactly
// M tile x K step (no halo), and tile_k steps the fused reduction as matmul.cuda's does.

// The arguments of conv2d_nchw.x86 that the implicit GEMM reads (groups must be 1).
struct ConvShape {
  int64_t N, C, OC, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl, pb, pr, bytes;
};

ConvShape conv_shape(const Template &base, const Json &a) {
  const Json canon = base.canonicalize(a);
  const Compute c = base.compute(a, Config());
  auto dim = [](const te::Tensor &t, size_t i) { return *ir::as_const_int(t.shape()[i]); };
  const te::Tensor &data = c.inputs[0], &kernel = c.inputs[1], &out = c.part("anchor");
  const auto st = canon.at("strides").as_int_vector(), dl = canon.at("dilation").as_int_vector();
  const auto pd = canon.at("padding").as_int_vector();
  return ConvShape{dim(data, 0),   dim(data, 1), dim(out, 1), dim(kernel, 2),
                   dim(kernel, 3), dim(out, 2),  dim(out, 3), st[0],
                   st[1],          dl[0],        dl[1],       pd[0],
                   pd[1],          pd[2],        pd[3],       data.dtype().bytes()};
}

void register_conv2d_implicit_gemm(Registry &r) {
  const std::string name = "conv2d_nchw_implicit_gemm.cuda";
  Template t = derived(r, "conv2d_nchw.x86", name,
                       "2-D convolution in NCHW as an implicit GEMM (M = N·OH·OW, K = IC·KH·KW) tiled over CUDA "
                       "blocks and threads, the im2col gather inlined into the shared-memory staging");
  auto base = r.get("conv2d_nchw.x86");
  t.canonicalize = [base, name](const Json &a) {
    Json canon = base->canonicalize(a);
    if (canon.at("groups").as_int() != 1) {
      bad_args(name, "takes groups = 1 (got " + std::to_string(canon.at("groups").as_int()) +
                         "); use conv2d_nchw.cuda for a grouped convolution");
    }
    return canon;
  };
  t.compute = [base, name](const Json &a, const Config &) {
    const Json canon = base->canonicalize(a);
    if (canon.at("groups").as_int() != 1) bad_args(name, "takes groups = 1");
    const Compute bc = base->compute(a, Config());
    const ConvShape d = conv_shape(*base, a);
    Compute c;
    const te::Tensor data = bc.inputs[0], kernel = bc.inputs[1];
    c.inputs = {data, kernel};
    const ir::DataType out = bc.part("anchor").dtype();
    te::Tensor src = pad(data, {0, 0, d.pt, d.pl}, {0, 0, d.pb, d.pr}, "data.pad");
    if (src != data) c.parts["pad"] = src;
    auto i32 = [](int64_t v) { return ir::Expr(static_cast<int>(v)); };
    const int64_t K = d.C * d.KH * d.KW, KHW = d.KH * d.KW;
    te::Tensor im2col = te::compute(
        {i32(d.N), i32(d.OH), i32(d.OW), i32(K)},
        [=](ir::Var n, ir::Var y, ir::Var x, ir::Var k) {
          const ir::Expr ky = ir::floormod(ir::floordiv(k, i32(d.KW)), i32(d.KH)), kx = ir::floormod(k, i32(d.KW));
          return src(n, ir::floordiv(k, i32(KHW)), y * i32(d.sh) + ky * i32(d.dh), x * i32(d.sw) + kx * i32(d.dw));
        },
        "data.im2col", "im2col");
    te::Tensor weight = te::compute(
        {i32(K), i32(d.OC)},
        [=](ir::Var k, ir::Var f) {
          return kernel(f, ir::floordiv(k, i32(KHW)), ir::floormod(ir::floordiv(k, i32(d.KW)), i32(d.KH)),
                        ir::floormod(k, i32(d.KW)));
        },
        "kernel.gemm", "weight");
    te::IterVar rk = te::reduce_axis(i32(K), "k");
    te::Tensor conv = te::compute(
        {i32(d.N), i32(d.OC), i32(d.OH), i32(d.OW)},
        [=](ir::Var n, ir::Var f, ir::Var y, ir::Var x) {
          return te::sum(ir::cast(out, im2col(n, y, x, rk->var)) * ir::cast(out, weight(rk->var, f)), {rk});
        },
        "conv2d", "conv2d");
    c.parts["im2col"] = im2col;
    c.parts["weight"] = weight;
    c.parts["anchor"] = conv;
    ChannelMap ch{d.OC, [](const std::vector<ir::Var> &i) { return ir::Expr(i[1]); }};
    c.epilogue = build_epilogue(conv, canon.at("epilogue"), ch, &c.inputs);
    c.outputs = {c.epilogue.empty() ? conv : c.epilogue.back()};
    return c;
  };
  t.define_space = [base](ConfigSpace &s, const Json &a, const Target &) {
    const ConvShape d = conv_shape(*base, a);
    s.define_split("tile_f", d.OC, 4);  // the GEMM's N: blocks, virtual threads, threads, per thread
    s.define_split("tile_y", d.OH, 4);  // the GEMM's M: output rows and columns
    s.define_split("tile_x", d.OW, 4);
    s.define_split("tile_k", d.C * d.KH * d.KW, 2);  // steps, per step
    s.define_bool("unroll_k");
    s.define_bool("double_buffer");
    s.define_choice("auto_unroll_max_step", std::vector<int64_t>{0, 16, 64, 512});
    s.add_product_limit("threads_per_block", {{"tile_f", 2}, {"tile_y", 2}, {"tile_x", 2}}, 1, kMaxThreadsPerBlock);
    s.add_product_limit("threads_in_z", {{"tile_f", 2}}, 1, kMaxThreadsInZ);  // tile_f's threads: threadIdx.z
    s.add_product_limit("virtual_threads", {{"tile_f", 1}, {"tile_y", 1}, {"tile_x", 1}}, 1, kMaxVirtualThreads);
    s.add_product_limit("register_tile",
                        {{"tile_f", 1}, {"tile_f", 3}, {"tile_y", 1}, {"tile_y", 3}, {"tile_x", 1}, {"tile_x", 3}}, 1,
                        kMaxRegisterTile);
    s.add_constraint("shared_memory", {"tile_f", "tile_y", "tile_x", "tile_k", "double_buffer"}, [d](const Config &c) {
      const auto f = c.split("tile_f"), y = c.split("tile_y"), x = c.split("tile_x"), k = c.split("tile_k");
      const int64_t copies = c.choice_bool("double_buffer") ? 2 : 1;
      // An A tile (M tile x K step) and a B tile (K step x N tile) per virtual thread.
      return copies * f[1] * y[1] * x[1] * (y[2] * y[3] * x[2] * x[3] + f[2] * f[3]) * k[1] * d.bytes <=
             kMaxSharedBytes;
    });
  };
  t.default_config = [base](const ConfigSpace &s, const Json &a, const Target &) {
    const ConvShape d = conv_shape(*base, a);
    const int64_t K = d.C * d.KH * d.KW, kb = largest_divisor_at_most(K, 8);
    return s.from_values({{"tile_f", default_split4(d.OC, 8, 4)},
                          {"tile_y", default_split4(d.OH, 4, 1)},
                          {"tile_x", default_split4(d.OW, 8, 2)},
                          {"tile_k", Json::array_of(std::vector<int64_t>{K / kb, kb})},
                          {"unroll_k", Json(int64_t{1})}});
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    const auto tf = cfg.split("tile_f"), ty = cfg.split("tile_y"), tx = cfg.split("tile_x"), tk = cfg.split("tile_k");
    auto [acc, sa] = tile_conv_output(s, c, cfg);
    IterVar ko, ki;
    sa.split(sa.reduce_axis(0), tk[1], &ko, &ki);
    sa.reorder({ko, ki, sa.axis(0), sa.axis(1), sa.axis(2), sa.axis(3)});
    if (cfg.choice_bool("unroll_k")) sa.unroll(ki);
    const int64_t unroll_steps = cfg.choice_int("auto_unroll_max_step");
    if (unroll_steps > 0) sa.pragma(ki, "auto_unroll_max_step", ir::make_const(ir::Int(32), unroll_steps));

    // The im2col gather and the weight's reshape are inlined into their shared-memory copies.
    for (const te::Tensor &in : {c.part("im2col"), c.part("weight")}) {
      stage_in_shared(s, in, acc, sa, ko, {{"threadIdx.x", tx[2]}, {"threadIdx.y", ty[2]}, {"threadIdx.z", tf[2]}},
                      cfg.choice_bool("double_buffer"));
    }
    s[c.part("im2col")].compute_inline();
    s[c.part("weight")].compute_inline();
    if (c.has_part("pad")) s[c.part("pad")].compute_inline();
  };
  r.add(std::move(t));
}

// ------------------------------------------------------------------ reduce.cuda
// Two schedules, chosen by the knob `schedule`: "thread_per_output" (the one above: each thread
// reduces one output alone) and "block_per_output": a block computes `outputs_per_block`
// consecutive outputs of the last output axis (threadIdx.y), each reduced across `num_thread`
// threads (threadIdx.x): the reduced axes are fused, each thread reduces a strided slice of them
// into shared memory (rfactor), and after a barrier one thread per output combines the partial
// results, as softmax.cuda does. The mean's scaling and the epilogue follow the combine.

void register_reduce(Registry &r) {
  Template t = derived(r, "reduce.x86", "reduce.cuda",
                       "a reduction over axes, one CUDA thread per output or a block per group of outputs with a "
                       "cross-thread reduction in shared memory");
  t.version = 2;  // 2: the block-per-output schedule
  auto base = r.get("reduce.x86");
  struct Dims {
    int64_t outputs, last, reduced;
  };
  auto dims = [base](const Json &a) {
    const Compute c = base->compute(a, Config());
    const te::Tensor &red = c.part("anchor");
    int64_t reduced = 1;
    for (const auto &k : static_cast<const te::ComputeOpNode *>(red.op().get())->reduce_axis) {
      reduced *= *ir::as_const_int(k->dom.extent);
    }
    return Dims{numel(red), *ir::as_const_int(red.shape().back()), reduced};
  };
  t.define_space = [dims](ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    s.define_choice("schedule", std::vector<std::string>{"thread_per_output", "block_per_output"});
    std::vector<int64_t> threads;
    for (int64_t v = 1; v <= kMaxThreadsPerBlock; v *= 2) {
      if (v <= std::max<int64_t>(32, d.outputs) || v <= d.reduced) threads.push_back(v);
    }
    s.define_choice("num_thread", threads);
    std::vector<int64_t> per_block;
    for (int64_t v = 1; v <= std::min<int64_t>(d.last, 64); ++v) {
      if (d.last % v == 0) per_block.push_back(v);
    }
    s.define_choice("outputs_per_block", per_block);
    s.add_constraint("threads", {"schedule", "num_thread", "outputs_per_block"}, [d](const Config &c) {
      const int64_t nt = c.choice_int("num_thread"), per = c.choice_int("outputs_per_block");
      if (c.choice_string("schedule") == "thread_per_output") {
        // A block of 32 to 1024 threads, no larger than the outputs need; one group size.
        return per == 1 && nt >= 32 && nt <= std::max<int64_t>(32, d.outputs);
      }
      return nt <= d.reduced && nt * per <= kMaxThreadsPerBlock;
    });
  };
  t.default_config = [dims](const ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    if (d.reduced < 32) {
      const Config c = default_thread_per_output(s);
      return s.from_values({{"schedule", Json("thread_per_output")},
                            {"num_thread", c.value("num_thread")},
                            {"outputs_per_block", Json(int64_t{1})}});
    }
    int64_t nt = 1;
    while (nt * 2 <= std::min<int64_t>(d.reduced, 256)) nt *= 2;
    return s.from_values(
        {{"schedule", Json("block_per_output")}, {"num_thread", Json(nt)}, {"outputs_per_block", Json(int64_t{1})}});
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    if (cfg.choice_string("schedule") == "thread_per_output") {
      schedule_thread_per_output(s, c, cfg);
      return;
    }
    const te::Tensor out = c.outputs[0], red = c.part("anchor");
    inline_epilogue(s, c);
    if (c.has_part("mean") && c.part("mean") != out) s[c.part("mean")].compute_inline();
    const int64_t nt = cfg.choice_int("num_thread"), per = cfg.choice_int("outputs_per_block");

    // The reduced axes fused and split over the threads; their partial results in shared memory.
    te::Stage sr = s[red];
    std::vector<IterVar> raxes;
    for (size_t i = 0; i < static_cast<const te::ComputeOpNode *>(red.op().get())->reduce_axis.size(); ++i) {
      raxes.push_back(sr.reduce_axis(i));
    }
    IterVar rk = raxes[0], rko, rki;
    if (raxes.size() > 1) sr.fuse(raxes, &rk);
    sr.split(rk, nt, &rko, &rki);
    te::Tensor partial = s.rfactor(red, rki);

    // Blocks over the outputs: the last output axis split into groups of `per` (threadIdx.y).
    te::Stage so = s[out];
    const size_t rank = out.shape().size();
    IterVar lo, li, b;
    so.split(so.axis(rank - 1), per, &lo, &li);
    std::vector<IterVar> outer;
    for (size_t i = 0; i + 1 < rank; ++i) outer.push_back(so.axis(i));
    outer.push_back(lo);
    b = outer[0];
    if (outer.size() > 1) so.fuse(outer, &b);
    so.bind(b, "blockIdx.x");
    so.bind(li, "threadIdx.y");
    if (red != out) {
      sr.set_scope("shared");
      sr.compute_at(so, b);
    }
    te::Stage sp = s[partial];
    sp.set_scope("shared");
    sp.compute_at(so, b);
    sp.bind(sp.axis(0), "threadIdx.x");
    sp.bind(sp.axis(partial.shape().size() - 1), "threadIdx.y");
  };
  r.add(std::move(t));
}

// ------------------------------------------------------------------ pool2d.cuda
// Two schedules, chosen by the knob `schedule`: "thread_per_output" (one thread per output, the
// padding inlined into each thread's window) and "tiled" (NCHW only): a block computes a tile of
// rows x columns of one channel plane (tile_y, tile_x: blocks, threads), one output a thread; the
// padded input the tile's windows cover is staged in shared memory by all threads of the block
// (the padding inlined into the copy), so overlapping windows read the input once.

void register_pool2d(Registry &r) {
  Template t = derived(r, "pool2d.x86", "pool2d.cuda",
                       "max/average 2-D pooling, one CUDA thread per output or output tiles per block with the "
                       "input tile staged in shared memory");
  t.version = 2;  // 2: the tiled schedule
  auto base = r.get("pool2d.x86");
  struct Dims {
    int64_t outputs, OH, OW, kh, kw, sh, sw, dh, dw, bytes;
    bool nchw;
  };
  auto dims = [base](const Json &a) {
    const Json canon = base->canonicalize(a);
    const Compute c = base->compute(a, Config());
    const te::Tensor &out = c.part("anchor");
    auto dim = [&](size_t i) { return *ir::as_const_int(out.shape()[i]); };
    const auto k = canon.at("kernel").as_int_vector(), st = canon.at("strides").as_int_vector();
    const auto dl = canon.at("dilation").as_int_vector();
    return Dims{numel(out),
                dim(2),
                dim(3),
                k[0],
                k[1],
                st[0],
                st[1],
                dl[0],
                dl[1],
                c.inputs[0].dtype().bytes(),
                out.shape().size() == 4};
  };
  t.define_space = [dims](ConfigSpace &s, const Json &a, const Target &) {
    const Dims d = dims(a);
    s.define_choice("schedule", std::vector<std::string>{"thread_per_output", "tiled"});
    define_thread_per_output(s, d.outputs);
    s.define_split("tile_y", d.OH, 2);  // blocks, threads
    s.define_split("tile_x", d.OW, 2);
    s.add_constraint("schedule", {"schedule", "num_thread", "tile_y", "tile_x"}, [d](const Config &c) {
      const auto y = c.split("tile_y"), x = c.split("tile_x");
      if (c.choice_string("schedule") == "thread_per_output") return y[1] == 1 && x[1] == 1;
      // One block size per tile (num_thread is the one-thread form's knob).
      if (!d.nchw || c.choice_int("num_thread") != 32) return false;
      const int64_t rows = (y[1] - 1) * d.sh + (d.kh - 1) * d.dh + 1, cols = (x[1] - 1) * d.sw + (d.kw - 1) * d.dw + 1;
      return y[1] * x[1] <= kMaxThreadsPerBlock && rows * cols * d.bytes <= kMaxSharedBytes;
    });
  };
  t.default_config = [](const ConfigSpace &s, const Json &, const Target &) {
    const Config c = default_thread_per_output(s);
    return s.from_values({{"schedule", Json("thread_per_output")}, {"num_thread", c.value("num_thread")}});
  };
  t.schedule = [](te::Schedule &s, const Compute &c, const Config &cfg, const Target &) {
    if (cfg.choice_string("schedule") == "thread_per_output") {
      schedule_thread_per_output(s, c, cfg);
      return;
    }
    inline_epilogue(s, c);
    const te::Tensor out = c.outputs[0], red = c.part("anchor");
    if (c.has_part("avg") && c.part("avg") != out) s[c.part("avg")].compute_inline();
    const auto ty = cfg.split("tile_y"), tx = cfg.split("tile_x");
    te::Stage so = s[out];
    IterVar by, thy, bx, thx, b;
    so.split(so.axis(2), ty[1], &by, &thy);
    so.split(so.axis(3), tx[1], &bx, &thx);
    so.reorder({so.axis(0), so.axis(1), by, bx, thy, thx});
    so.fuse({so.axis(0), so.axis(1), by, bx}, &b);
    so.bind(b, "blockIdx.x");
    so.bind(thy, "threadIdx.y");
    so.bind(thx, "threadIdx.x");
    if (red != out) {
      s[red].set_scope("local");
      s[red].compute_at(so, thx);
    }
    const te::Tensor src = c.has_part("pad") ? c.part("pad") : c.inputs[0];
    stage_in_shared(s, src, red, so, b, {{"threadIdx.x", tx[1]}, {"threadIdx.y", ty[1]}});
    if (c.has_part("pad")) s[c.part("pad")].compute_inline();
  };
  r.add(std::move(t));
}

}  // namespace

void register_cuda_templates(Registry &r) {
  register_thread_per_output(r, "elemwise", "a chain of elementwise ops on one tensor, one CUDA thread per element");
  register_thread_per_output(r, "broadcast", "a broadcasting binary op, one CUDA thread per element");
  register_reduce(r);
  register_pool2d(r);
  register_conv2d_nchw(r, "conv2d_nchw", false,
                       "direct 2-D convolution in NCHW tiled over CUDA blocks and threads, shared-memory staging of "
                       "input tiles and weights");
  register_conv2d_nchw(r, "depthwise_conv2d_nchw", true,
                       "depthwise 2-D convolution in NCHW tiled over CUDA blocks and threads, shared-memory staging "
                       "of input tiles and weights");
  register_row_op(r, {"softmax.x86",
                      "softmax.cuda",
                      "softmax over an axis, a CUDA block per row with cross-thread reductions in shared memory",
                      {"max", "sum"},
                      {"exp"},
                      [](const Json &canon, int64_t) { return std::vector<int64_t>{canon.at("axis").as_int()}; }});
  register_row_op(r, {"layer_norm.x86",
                      "layer_norm.cuda",
                      "layer normalization over the trailing axes, a CUDA block per row with cross-thread reductions "
                      "in shared memory",
                      {"sum", "var"},
                      {"mean"},
                      [](const Json &canon, int64_t) { return canon.at("axes").as_int_vector(); }});
  register_conv2d_implicit_gemm(r);
  register_gemm(r, "matmul.x86", "matmul.cuda",
                "matrix multiply a[M,K] x b[K,N] tiled over CUDA blocks and threads, shared-memory staging");
  register_gemm(r, "dense_pack.x86", "dense.cuda",
                "dense data[M,K] x weight[N,K]^T tiled over CUDA blocks and threads, shared-memory staging");
  register_gemm(r, "batch_matmul.x86", "batch_matmul.cuda",
                "batched matrix multiply tiled over CUDA blocks (one grid z per batch) and threads, shared-memory "
                "staging");
}

}  // namespace kiln::ops
