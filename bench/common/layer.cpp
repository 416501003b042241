#include "bench/common/layer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <unordered_map>

#include "compiler/ir/op.h"
#include "contracts/error.h"
#include "deploy/module.h"
#include "deploy/tensor.h"

namespace kiln::bench {

using contracts::Json;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

Json tensor_json(const std::vector<int64_t> &shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

std::vector<int64_t> shape_of(const Json &args, const std::string &name) {
  return args.at(name).at("shape").as_int_vector();
}

std::vector<int64_t> const_shape(const te::Tensor &t) {
  std::vector<int64_t> s;
  for (const auto &d : t.shape()) s.push_back(ir::as_const_int(d).value_or(1));
  return s;
}

void fill_random(std::vector<float> &v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float &x : v) x = d(rng);
}

// The function's arguments for a config: inputs packed from the plain data in the layout the
// config's compute asks for, outputs allocated.
struct KilnArgs {
  std::vector<deploy::Tensor> tensors;
  int64_t ob = 0;  // the output channel block of the convolutions
};

KilnArgs kiln_args(const Layer &wl, const ops::Compute &c, const autotune::Config &cfg, const PlainInputs &p) {
  KilnArgs a;
  for (const auto &t : c.args()) a.tensors.push_back(deploy::Tensor::empty(const_shape(t), deploy::DType::of<float>()));
  float *x = a.tensors[0].data_as<float>(), *w = a.tensors[1].data_as<float>();
  if (wl.kind == Layer::Dense) {
    // weight [ceil(N/bn), K, bn], the padding columns zero
    const int64_t bn = cfg.split("tile_x").back(), N = wl.Nn, K = wl.K;
    std::copy(p.x.begin(), p.x.end(), x);
    std::fill(w, w + a.tensors[1].numel(), 0.0f);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[(n / bn * K + k) * bn + n % bn] = p.w[n * K + k];
    return a;
  }
  if (wl.kind == Layer::Depthwise) {
    // data [N, C/cb, H, W, cb], kernel [C/cb, 1, KH, KW, 1, cb]
    const int64_t cb = cfg.split("tile_c").back(), C = wl.C, H = wl.H, W = wl.W, KH = wl.KH, KW = wl.KW;
    a.ob = cb;
    for (int64_t ch = 0; ch < C; ++ch) {
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx) x[((ch / cb * H + y) * W + xx) * cb + ch % cb] = p.x[(ch * H + y) * W + xx];
      for (int64_t k = 0; k < KH * KW; ++k) w[(ch / cb * KH * KW + k) * cb + ch % cb] = p.w[ch * KH * KW + k];
    }
    return a;
  }
  const int64_t ib = cfg.split("tile_ic").back(), ob = cfg.split("tile_oc").back();
  a.ob = ob;
  const int64_t C = wl.C, H = wl.H, W = wl.W, OC = wl.OC, KH = wl.KH, KW = wl.KW;
  // data [N, C/ib, H, W, ib]
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t xx = 0; xx < W; ++xx) x[((ch / ib * H + y) * W + xx) * ib + ch % ib] = p.x[(ch * H + y) * W + xx];
  // kernel [OC/ob, C/ib, KH, KW, ib, ob]
  for (int64_t o = 0; o < OC; ++o)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t dst = ((((o / ob * (C / ib) + ch / ib) * KH + kh) * KW + kw) * ib + ch % ib) * ob + o % ob;
          w[dst] = p.w[((o * C + ch) * KH + kh) * KW + kw];
        }
  return a;
}

// The output in the plain layout.
std::vector<float> kiln_output(const Layer &wl, const KilnArgs &a) {
  const deploy::Tensor &t = a.tensors.back();
  const float *o = t.data_as<float>();
  if (wl.kind == Layer::Dense) return std::vector<float>(o, o + t.numel());
  std::vector<float> r(static_cast<size_t>(wl.OC * wl.OH * wl.OW));
  const int64_t ob = a.ob;
  for (int64_t oc = 0; oc < wl.OC; ++oc)
    for (int64_t y = 0; y < wl.OH; ++y)
      for (int64_t x = 0; x < wl.OW; ++x)
        r[(oc * wl.OH + y) * wl.OW + x] = o[((oc / ob * wl.OH + y) * wl.OW + x) * ob + oc % ob];
  return r;
}

}  // namespace

bool set_onednn_single_thread_env() {
  const char *omp = std::getenv("OMP_NUM_THREADS");
  if (omp && std::string(omp) == "1") return false;
  setenv("OMP_NUM_THREADS", "1", 1);
  return true;
}

bool set_onednn_passive_wait_env() {
  if (std::getenv("OMP_WAIT_POLICY")) return false;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  return true;
}

std::string onednn_wait_policy() {
  const char *p = std::getenv("OMP_WAIT_POLICY");
  return p && *p ? p : "default";
}

Layer dense_layer(int64_t m, int64_t n, int64_t k) {
  Layer w;
  w.kind = Layer::Dense;
  w.tmpl = "dense_pack.x86";
  w.M = m;
  w.Nn = n;
  w.K = k;
  w.shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  return w;
}

Layer conv_layer(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride, int64_t pad, bool depthwise) {
  Layer w;
  w.kind = depthwise ? Layer::Depthwise : Layer::Conv;
  w.tmpl = depthwise ? "depthwise_conv2d_nchwc.x86" : "conv2d_nchwc.x86";
  w.C = c;
  w.H = w.W = hw;
  w.OC = depthwise ? c : oc;
  w.KH = w.KW = k;
  w.S = stride;
  w.P = pad;
  w.OH = (hw + 2 * pad - k) / stride + 1;
  w.OW = w.OH;
  w.shape = "1x" + std::to_string(c) + "x" + std::to_string(hw) + "x" + std::to_string(hw) + "_k" +
            std::to_string(w.OC) + "x" + std::to_string(k) + "x" + std::to_string(k) + "_s" + std::to_string(stride) +
            "_p" + std::to_string(pad);
  return w;
}

Json layer_args(const Layer &w) {
  if (w.kind == Layer::Dense) {
    return Json::object({{"data", tensor_json({w.M, w.K})}, {"weight", tensor_json({w.Nn, w.K})}, {"prepacked", true}});
  }
  const std::vector<int64_t> kernel = w.kind == Layer::Depthwise ? std::vector<int64_t>{w.C, 1, w.KH, w.KW}
                                                                 : std::vector<int64_t>{w.OC, w.C, w.KH, w.KW};
  return Json::object({{"data", tensor_json({w.N, w.C, w.H, w.W})},
                       {"kernel", tensor_json(kernel)},
                       {"strides", Json::array_of(std::vector<int64_t>{w.S, w.S})},
                       {"padding", Json::array_of(std::vector<int64_t>{w.P, w.P, w.P, w.P})},
                       {"dilation", Json::array_of(std::vector<int64_t>{1, 1})}});
}

Layer layer_of(const std::string &template_name, const Json &args) {
  Layer w;
  if (template_name == "dense_pack.x86") {
    const std::vector<int64_t> d = shape_of(args, "data"), wt = shape_of(args, "weight");
    if (d.size() != 2 || wt.size() != 2 || d[1] != wt[1] || !args.get_or("prepacked", false).as_bool()) {
      throw UserError("bench layer: dense_pack.x86 arguments other than data [M, K], weight [N, K], prepacked");
    }
    w = dense_layer(d[0], wt[0], d[1]);
  } else if (template_name == "conv2d_nchwc.x86" || template_name == "depthwise_conv2d_nchwc.x86") {
    const bool depthwise = template_name == "depthwise_conv2d_nchwc.x86";
    const std::vector<int64_t> d = shape_of(args, "data"), k = shape_of(args, "kernel");
    const std::vector<int64_t> s = args.at("strides").as_int_vector(), p = args.at("padding").as_int_vector();
    const std::vector<int64_t> dil =
        args.get_or("dilation", Json::array_of(std::vector<int64_t>{1, 1})).as_int_vector();
    const bool square = d.size() == 4 && d[0] == 1 && d[2] == d[3] && k.size() == 4 && k[2] == k[3] && s.size() == 2 &&
                        s[0] == s[1] && p.size() == 4 && p[0] == p[1] && p[1] == p[2] && p[2] == p[3] &&
                        dil == std::vector<int64_t>{1, 1} && (!depthwise || k[1] == 1);
    if (!square) throw UserError("bench layer: " + template_name + " arguments other than a square batch-1 layer");
    w = conv_layer(d[1], d[2], k[0], k[2], s[0], p[0], depthwise);
  } else {
    throw UserError("bench layer: no oneDNN peer for the template " + template_name);
  }
  return w;
}

double time_call(const std::function<void()> &f, double give_up_above) {
  const double t0 = now_s();
  f();
  const double first = now_s() - t0;
  if (first > give_up_above) return first;
  const int reps = std::max(1, std::min(10000, static_cast<int>(std::ceil(0.02 / std::max(first, 1e-7)))));
  double best = 1e30;
  std::vector<double> samples(static_cast<size_t>(reps));
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < reps; ++r) {
      const double t = now_s();
      f();
      samples[static_cast<size_t>(r)] = now_s() - t;
    }
    std::nth_element(samples.begin(), samples.begin() + reps / 2, samples.end());
    best = std::min(best, samples[static_cast<size_t>(reps / 2)]);
  }
  return best;
}

PlainInputs plain_inputs(const Layer &wl, uint64_t seed) {
  PlainInputs p;
  if (wl.kind == Layer::Dense) {
    p.x.resize(static_cast<size_t>(wl.M * wl.K));
    p.w.resize(static_cast<size_t>(wl.Nn * wl.K));
  } else {
    p.x.resize(static_cast<size_t>(wl.N * wl.C * wl.H * wl.W));
    p.w.resize(static_cast<size_t>(wl.OC * (wl.kind == Layer::Depthwise ? 1 : wl.C) * wl.KH * wl.KW));
  }
  fill_random(p.x, seed * 7 + 1);
  fill_random(p.w, seed * 7 + 2);
  return p;
}

struct OneDnnKernel::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  Layer layer;
  std::vector<float> x, w, out;
  // dense: the plain-weight and the format-any primitives with their weights; conv: one
  struct Variant {
    dnnl::primitive prim;
    std::unordered_map<int, dnnl::memory> args;
    bool packed = false;
  };
  std::vector<Variant> variants;
  dnnl::memory dst, user_dst;  // conv: the primitive's output and the plain one
  const char *weights = "";
  double plain_seconds = 0;
};

OneDnnKernel::OneDnnKernel(const Layer &wl, const PlainInputs &p) : impl_(std::make_unique<Impl>()) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  Impl &k = *impl_;
  k.layer = wl;
  k.x = p.x;
  k.w = p.w;
  engine &eng = k.eng;
  if (wl.kind == Layer::Dense) {
    // Weights in the plain [N, K] layout, and in the layout oneDNN picks for them (format any,
    // reordered once here, as a deployed model does with constant weights).
    memory::desc a_md({wl.M, wl.K}, dt::f32, tag::ab), b_md({wl.K, wl.Nn}, dt::f32, tag::ba),
        c_md({wl.M, wl.Nn}, dt::f32, tag::ab);
    k.out.assign(static_cast<size_t>(wl.M * wl.Nn), 0.0f);
    memory a(a_md, eng, k.x.data()), user_b(b_md, eng, k.w.data()), c(c_md, eng, k.out.data());
    for (bool any : {false, true}) {
      memory::desc w_md = any ? memory::desc({wl.K, wl.Nn}, dt::f32, tag::any) : b_md;
      matmul::primitive_desc pd(matmul::desc(a_md, w_md, c_md), eng);
      memory b = user_b;
      if (pd.weights_desc() != b_md) {
        b = memory(pd.weights_desc(), eng);
        reorder(user_b, b).execute(k.strm, user_b, b);
        k.strm.wait();
      }
      k.variants.push_back(
          {matmul(pd), {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}}, pd.weights_desc() != b_md});
    }
    return;
  }
  const bool dw = wl.kind == Layer::Depthwise;
  memory::dims src_d = {wl.N, wl.C, wl.H, wl.W}, dst_d = {wl.N, wl.OC, wl.OH, wl.OW};
  memory::dims w_d = dw ? memory::dims{wl.C, 1, 1, wl.KH, wl.KW} : memory::dims{wl.OC, wl.C, wl.KH, wl.KW};
  memory::desc src_any(src_d, dt::f32, tag::any), w_any(w_d, dt::f32, tag::any), dst_any(dst_d, dt::f32, tag::any);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src_any, w_any, dst_any,
                              {wl.S, wl.S}, {wl.P, wl.P}, {wl.P, wl.P});
  convolution_forward::primitive_desc pd(d, eng);
  k.out.assign(static_cast<size_t>(wl.N * wl.OC * wl.OH * wl.OW), 0.0f);
  memory user_src({src_d, dt::f32, tag::nchw}, eng, k.x.data());
  memory user_w({w_d, dt::f32, dw ? tag::goihw : tag::oihw}, eng, k.w.data());
  k.user_dst = memory({dst_d, dt::f32, tag::nchw}, eng, k.out.data());
  memory src(pd.src_desc(), eng), wt(pd.weights_desc(), eng);
  k.dst = memory(pd.dst_desc(), eng);
  reorder(user_src, src).execute(k.strm, user_src, src);
  reorder(user_w, wt).execute(k.strm, user_w, wt);
  k.strm.wait();
  k.variants.push_back({convolution_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, k.dst}}});
}

OneDnnKernel::~OneDnnKernel() = default;

double OneDnnKernel::time() {
  Impl &k = *impl_;
  double best = 1e30;
  for (Impl::Variant &v : k.variants) {
    const double t = time_call([&] {
      v.prim.execute(k.strm, v.args);
      k.strm.wait();
    });
    if (k.layer.kind == Layer::Dense && !v.packed) k.plain_seconds = t;
    if (t < best) {
      best = t;
      k.weights = k.layer.kind != Layer::Dense ? "" : v.packed ? "packed" : "plain";
    }
  }
  return best;
}

const char *OneDnnKernel::weights() const { return impl_->weights; }
double OneDnnKernel::plain_seconds() const { return impl_->plain_seconds; }

std::vector<float> OneDnnKernel::output() {
  Impl &k = *impl_;
  if (k.layer.kind != Layer::Dense) {
    dnnl::reorder(k.dst, k.user_dst).execute(k.strm, k.dst, k.user_dst);
    k.strm.wait();
  }
  return k.out;
}

OneDnnResult onednn_run(const Layer &wl, const PlainInputs &p) {
  OneDnnKernel k(wl, p);
  OneDnnResult r;
  r.seconds = k.time();
  r.out = k.output();
  r.weights = k.weights();
  r.plain_seconds = k.plain_seconds();
  return r;
}

struct KilnKernel::Impl {
  Layer layer;
  std::unique_ptr<codegen::LLVMModule> module;
  KilnArgs args;
  std::vector<KilnArg> call_args;
  KilnPackedFunc fn = nullptr;
  std::string error;
};

KilnKernel::KilnKernel(const ops::Task &task, const Layer &layer, const autotune::Config &cfg, const PlainInputs &p,
                       const codegen::LLVMBuildOptions &options)
    : impl_(std::make_unique<Impl>()) {
  Impl &k = *impl_;
  k.layer = layer;
  try {
    ops::Compute c = task.compute(cfg);
    ir::LoweredFunc f = task.lower(cfg, "bench_layer");
    k.module = std::make_unique<codegen::LLVMModule>(f, options);
    k.args = kiln_args(layer, c, cfg, p);
    k.call_args = deploy::to_kiln_args(k.args.tensors);
    k.fn = k.module->function("bench_layer");
  } catch (const std::exception &e) {
    k.error = e.what();
    if (k.error.empty()) k.error = "failed to build";
  }
}

KilnKernel::~KilnKernel() = default;

bool KilnKernel::ok() const { return impl_->error.empty(); }
const std::string &KilnKernel::error() const { return impl_->error; }

double KilnKernel::time(double give_up_above) {
  Impl &k = *impl_;
  if (!ok()) return 0;
  const int32_t n = static_cast<int32_t>(k.call_args.size());
  bool failed = false;
  const double t = time_call(
      [&] {
        if (k.fn(k.call_args.data(), n) != 0) failed = true;
      },
      give_up_above);
  if (failed) {
    k.error = k.module->last_error();
    if (k.error.empty()) k.error = "the kernel failed";
  }
  return t;
}

std::vector<float> KilnKernel::output() const { return kiln_output(impl_->layer, impl_->args); }

KilnResult kiln_run(const ops::Task &task, const Layer &wl, const autotune::Config &cfg, const PlainInputs &p,
                    const codegen::LLVMBuildOptions &options, bool keep_output, double give_up_above) {
  KilnKernel k(task, wl, cfg, p, options);
  KilnResult m;
  if (k.ok()) m.seconds = k.time(give_up_above);
  m.ok = k.ok();
  m.error = k.error();
  if (m.ok && keep_output) m.out = k.output();
  return m;
}

bool matches(const std::vector<float> &out, const std::vector<float> &ref, double flop, double *max_diff,
             double *max_abs) {
  double diff = out.size() == ref.size() ? 0 : INFINITY, scale = 1;
  for (size_t i = 0; i < ref.size() && i < out.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(out[i] - ref[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(ref[i])));
  }
  if (max_diff) *max_diff = diff;
  if (max_abs) *max_abs = scale;
  return diff <= 1e-5 * scale * std::sqrt(flop / static_cast<double>(std::max<size_t>(1, ref.size())));
}

}  // namespace kiln::bench
