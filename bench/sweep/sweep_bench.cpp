// Search-space sweep: for each workload, N configs drawn uniformly from the valid configs of the
// template's config space plus the default config are lowered, JIT-compiled with LLVM and timed in
// this process on one thread, against oneDNN (and OpenBLAS for dense) measured in the same run. One
// line per workload:
//   sweep op= shape= configs= failed= best_gflops= default_gflops= peer=onednn peer_gflops=
//         [weights=prepacked peer_weights= onednn_plain_gflops= openblas_gflops=] ratio_best= ratio_default=
// then `sweep_best op= shape= space= valid= config= default=` (the knobs of the best and the
// default configs; space is the raw size of the config space, valid the number of configs that
// satisfy its constraints) and a final
//   sweep_summary dense_1024_ratio_best= resnet18_geomean_ratio_best= resnet18_geomean_ratio_default=
// The default config's output is checked against oneDNN's (a `sweep_warning` line when it differs).
// Layouts, packed outside the timed region for both sides, as a deployed model packs its constant
// weights once:
//   - dense: Kiln's dense_pack.x86 takes its weight prepacked ([ceil(N/bn), K, bn], bn the innermost
//     x tile, the last block zero-padded); oneDNN's matmul runs with the plain [N, K] weight and
//     with the weight in the layout it picks (format any), and the faster is the peer (peer_weights
//     says which; onednn_plain_gflops is the plain run);
//   - conv2d_nchwc.x86 and depthwise_conv2d_nchwc.x86 take blocked data/kernel (the block sizes are
//     knobs) and oneDNN picks its own blocked layouts (format any).
// Options: --configs N (default 500), --workloads SUBSTR[,SUBSTR...] (match on the template or
//          the shape), --seed S, --target "llvm -mcpu=...".
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/op.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "deploy/module.h"
#include "deploy/tensor.h"
#include "deploy/thread_pool.h"

namespace {

using namespace kiln;
using contracts::Json;
using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Seconds per call: a warm-up call sets the repetition count so that one measurement takes about
// 20 ms; the figure is the smallest of the medians of 3 measurements. When the warm-up alone is
// slower than `give_up_above` seconds, the warm-up time is returned (the config cannot be the best).
double measure(const std::function<void()> &f, double give_up_above = 1e30) {
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

deploy::Tensor make(const std::vector<int64_t> &shape) {
  return deploy::Tensor::empty(shape, deploy::DType::of<float>());
}

void fill_random(std::vector<float> &v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float &x : v) x = d(rng);
}

std::vector<int64_t> const_shape(const te::Tensor &t) {
  std::vector<int64_t> s;
  for (const auto &d : t.shape()) s.push_back(ir::as_const_int(d).value_or(1));
  return s;
}

// A workload: the Kiln task and what is needed to feed it and its peers from plain (NCHW / row
// major) data.
struct Workload {
  enum Kind { Dense, Conv, Depthwise } kind;
  std::string tmpl;
  std::string shape;  // compact spelling for the output line
  bool resnet = false;
  // dense: M, N, K; conv: N, C, H, W, OC, KH, KW, stride, pad, OH, OW
  int64_t M = 0, Nn = 0, K = 0;
  int64_t N = 1, C = 0, H = 0, W = 0, OC = 0, KH = 0, KW = 0, S = 1, P = 0, OH = 0, OW = 0;
};

Json tensor_json(const std::vector<int64_t> &shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

Json task_args(const Workload &w) {
  if (w.kind == Workload::Dense) {
    return Json::object({{"data", tensor_json({w.M, w.K})}, {"weight", tensor_json({w.Nn, w.K})}, {"prepacked", true}});
  }
  const std::vector<int64_t> kernel = w.kind == Workload::Depthwise ? std::vector<int64_t>{w.C, 1, w.KH, w.KW}
                                                                    : std::vector<int64_t>{w.OC, w.C, w.KH, w.KW};
  return Json::object({{"data", tensor_json({w.N, w.C, w.H, w.W})},
                       {"kernel", tensor_json(kernel)},
                       {"strides", Json::array_of(std::vector<int64_t>{w.S, w.S})},
                       {"padding", Json::array_of(std::vector<int64_t>{w.P, w.P, w.P, w.P})},
                       {"dilation", Json::array_of(std::vector<int64_t>{1, 1})}});
}

Workload dense(int64_t m, int64_t n, int64_t k) {
  Workload w;
  w.kind = Workload::Dense;
  w.tmpl = "dense_pack.x86";
  w.M = m;
  w.Nn = n;
  w.K = k;
  w.shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  return w;
}

Workload conv(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t s, int64_t p, bool depthwise = false) {
  Workload w;
  w.kind = depthwise ? Workload::Depthwise : Workload::Conv;
  w.tmpl = depthwise ? "depthwise_conv2d_nchwc.x86" : "conv2d_nchwc.x86";
  w.resnet = !depthwise;
  w.C = c;
  w.H = w.W = hw;
  w.OC = oc;
  w.KH = w.KW = k;
  w.S = s;
  w.P = p;
  w.OH = (hw + 2 * p - k) / s + 1;
  w.OW = w.OH;
  w.shape = "1x" + std::to_string(c) + "x" + std::to_string(hw) + "x" + std::to_string(hw) + "_k" + std::to_string(oc) +
            "x" + std::to_string(k) + "x" + std::to_string(k) + "_s" + std::to_string(s) + "_p" + std::to_string(p);
  return w;
}

// Plain inputs and the reference output (oneDNN's), in NCHW / row-major.
struct Plain {
  std::vector<float> x, w, ref;
};

// --- oneDNN peer ---

struct OneDnnResult {
  double seconds = 0;
  std::vector<float> out;  // plain layout
  // dense: the weight layout of the faster run ("plain" or "packed"), and the time with the plain
  // layout
  const char *weights = "";
  double plain_seconds = 0;
};

OneDnnResult onednn_run(const Workload &wl, const Plain &p) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  OneDnnResult r;
  if (wl.kind == Workload::Dense) {
    // Weights in the plain [N, K] layout, and in the layout oneDNN picks for them (format any,
    // reordered once outside the timed region, as a deployed model does with constant weights);
    // the faster of the two is the peer.
    memory::desc a_md({wl.M, wl.K}, dt::f32, tag::ab), b_md({wl.K, wl.Nn}, dt::f32, tag::ba),
        c_md({wl.M, wl.Nn}, dt::f32, tag::ab);
    std::vector<float> x = p.x, w = p.w;
    r.out.assign(static_cast<size_t>(wl.M * wl.Nn), 0.0f);
    memory a(a_md, eng, x.data()), user_b(b_md, eng, w.data()), c(c_md, eng, r.out.data());
    r.seconds = 1e30;
    for (bool any : {false, true}) {
      memory::desc w_md = any ? memory::desc({wl.K, wl.Nn}, dt::f32, tag::any) : b_md;
      matmul::primitive_desc pd(matmul::desc(a_md, w_md, c_md), eng);
      memory b = user_b;
      if (pd.weights_desc() != b_md) {
        b = memory(pd.weights_desc(), eng);
        reorder(user_b, b).execute(strm, user_b, b);
        strm.wait();
      }
      matmul prim(pd);
      const double t = measure([&] {
        prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
        strm.wait();
      });
      if (!any) r.plain_seconds = t;
      if (t < r.seconds) {
        r.seconds = t;
        r.weights = pd.weights_desc() != b_md ? "packed" : "plain";
      }
    }
    return r;
  }
  const bool dw = wl.kind == Workload::Depthwise;
  memory::dims src_d = {wl.N, wl.C, wl.H, wl.W}, dst_d = {wl.N, wl.OC, wl.OH, wl.OW};
  memory::dims w_d = dw ? memory::dims{wl.C, 1, 1, wl.KH, wl.KW} : memory::dims{wl.OC, wl.C, wl.KH, wl.KW};
  memory::desc src_any(src_d, dt::f32, tag::any), w_any(w_d, dt::f32, tag::any), dst_any(dst_d, dt::f32, tag::any);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src_any, w_any, dst_any,
                              {wl.S, wl.S}, {wl.P, wl.P}, {wl.P, wl.P});
  convolution_forward::primitive_desc pd(d, eng);
  std::vector<float> x = p.x, w = p.w;
  r.out.assign(static_cast<size_t>(wl.N * wl.OC * wl.OH * wl.OW), 0.0f);
  memory user_src({src_d, dt::f32, tag::nchw}, eng, x.data());
  memory user_w({w_d, dt::f32, dw ? tag::goihw : tag::oihw}, eng, w.data());
  memory user_dst({dst_d, dt::f32, tag::nchw}, eng, r.out.data());
  memory src(pd.src_desc(), eng), wt(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  reorder(user_src, src).execute(strm, user_src, src);
  reorder(user_w, wt).execute(strm, user_w, wt);
  strm.wait();
  convolution_forward prim(pd);
  r.seconds = measure([&] {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, dst}});
    strm.wait();
  });
  reorder(dst, user_dst).execute(strm, dst, user_dst);
  strm.wait();
  return r;
}

double openblas_seconds(const Workload &wl, const Plain &p) {
  std::vector<float> c(static_cast<size_t>(wl.M * wl.Nn));
  return measure([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(wl.M), static_cast<int>(wl.Nn),
                static_cast<int>(wl.K), 1.0f, p.x.data(), static_cast<int>(wl.K), p.w.data(), static_cast<int>(wl.K),
                0.0f, c.data(), static_cast<int>(wl.Nn));
  });
}

// --- Kiln ---

// The function's arguments for a config: inputs packed from the plain data in the layout the
// config's compute asks for, outputs allocated.
struct KilnArgs {
  std::vector<deploy::Tensor> tensors;
  int64_t ob = 0;  // conv2d_nchwc: the output channel block
};

KilnArgs kiln_args(const Workload &wl, const ops::Compute &c, const autotune::Config &cfg, const Plain &p) {
  KilnArgs a;
  std::vector<te::Tensor> all = c.args();
  for (const auto &t : all) a.tensors.push_back(make(const_shape(t)));
  float *x = a.tensors[0].data_as<float>(), *w = a.tensors[1].data_as<float>();
  if (wl.kind == Workload::Dense) {
    // weight [ceil(N/bn), K, bn], the padding columns zero
    const int64_t bn = cfg.split("tile_x").back(), N = wl.Nn, K = wl.K;
    std::copy(p.x.begin(), p.x.end(), x);
    std::fill(w, w + a.tensors[1].numel(), 0.0f);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) w[(n / bn * K + k) * bn + n % bn] = p.w[n * K + k];
    return a;
  }
  if (wl.kind == Workload::Depthwise) {
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
std::vector<float> kiln_output(const Workload &wl, const KilnArgs &a) {
  const deploy::Tensor &t = a.tensors.back();
  const float *o = t.data_as<float>();
  if (wl.kind == Workload::Dense) return std::vector<float>(o, o + t.numel());
  std::vector<float> r(static_cast<size_t>(wl.OC * wl.OH * wl.OW));
  const int64_t ob = a.ob;
  for (int64_t oc = 0; oc < wl.OC; ++oc)
    for (int64_t y = 0; y < wl.OH; ++y)
      for (int64_t x = 0; x < wl.OW; ++x)
        r[(oc * wl.OH + y) * wl.OW + x] = o[((oc / ob * wl.OH + y) * wl.OW + x) * ob + oc % ob];
  return r;
}

struct Measured {
  bool ok = false;
  double seconds = 0;
  std::string error;
  std::vector<float> out;
};

Measured run_config(const ops::Task &task, const Workload &wl, const autotune::Config &cfg, const Plain &p,
                    const codegen::LLVMBuildOptions &options, bool keep_output, double give_up_above) {
  Measured m;
  try {
    ops::Compute c = task.compute(cfg);
    ir::LoweredFunc f = task.lower(cfg, "sweep_op");
    codegen::LLVMModule module(f, options);
    KilnArgs a = kiln_args(wl, c, cfg, p);
    const std::vector<KilnArg> args = deploy::to_kiln_args(a.tensors);
    KilnPackedFunc fn = module.function("sweep_op");
    const int32_t n = static_cast<int32_t>(args.size());
    bool failed = false;
    m.seconds = measure(
        [&] {
          if (fn(args.data(), n) != 0) failed = true;
        },
        give_up_above);
    if (failed) {
      m.error = module.last_error();
      return m;
    }
    if (keep_output) m.out = kiln_output(wl, a);
    m.ok = true;
  } catch (const std::exception &e) {
    m.error = e.what();
  }
  return m;
}

// OpenBLAS picks its kernels from the CPU model at load time and falls back to SSE3 kernels on a
// CPU its release does not know; oneDNN's OpenMP runtime reads its thread count at load time. When
// either needs changing, the benchmark runs itself again with the environment set.
void set_environment(char **argv) {
  bool again = false;
  const char *omp = std::getenv("OMP_NUM_THREADS");
  if (!omp || std::string(omp) != "1") {
    setenv("OMP_NUM_THREADS", "1", 1);
    again = true;
  }
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const std::string core = openblas_get_corename();
    if (core == "Prescott" || core == "Core2" || core == "Nehalem" || core == "Sandybridge") {
      const codegen::LLVMTarget host = codegen::LLVMTarget::host();
      const char *better = host.has_feature("avx512f") ? "SkylakeX" : host.has_feature("avx2") ? "Haswell" : nullptr;
      if (better) {
        std::fprintf(stderr, "OpenBLAS chose %s kernels for this CPU; running it with OPENBLAS_CORETYPE=%s\n",
                     core.c_str(), better);
        setenv("OPENBLAS_CORETYPE", better, 1);
        again = true;
      }
    }
  }
  if (again) execv("/proc/self/exe", argv);
}

std::vector<std::string> split_list(const std::string &s) {
  std::vector<std::string> r;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) r.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

std::string no_spaces(std::string s) {
  for (char &c : s) {
    if (c == ' ' || c == '\n' || c == '\t') c = ';';
  }
  return s;
}

}  // namespace

int main(int argc, char **argv) {
  set_environment(argv);
  int n_configs = 500;
  uint64_t seed = 1;
  std::string filter;
  std::string target = "llvm -mcpu=native";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--configs" && i + 1 < argc) {
      n_configs = std::atoi(argv[++i]);
    } else if (a == "--workloads" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--configs N] [--workloads SUBSTR[,SUBSTR...]] [--seed S] [--target T]\n",
                   argv[0]);
      return 1;
    }
  }
  deploy::set_num_threads(1);
  openblas_set_num_threads(1);
  codegen::LLVMBuildOptions options;
  options.target = target;

  std::vector<Workload> workloads = {dense(1024, 1024, 1024)};
  for (int64_t m : {1, 16, 64}) {
    for (int64_t k : {512, 2048}) workloads.push_back(dense(m, 1000, k));
  }
  // The 12 distinct convolutions of ResNet-18 at batch 1.
  workloads.push_back(conv(3, 224, 64, 7, 2, 3));
  workloads.push_back(conv(64, 56, 64, 3, 1, 1));
  workloads.push_back(conv(64, 56, 64, 1, 1, 0));
  workloads.push_back(conv(64, 56, 128, 3, 2, 1));
  workloads.push_back(conv(64, 56, 128, 1, 2, 0));
  workloads.push_back(conv(128, 28, 128, 3, 1, 1));
  workloads.push_back(conv(128, 28, 256, 3, 2, 1));
  workloads.push_back(conv(128, 28, 256, 1, 2, 0));
  workloads.push_back(conv(256, 14, 256, 3, 1, 1));
  workloads.push_back(conv(256, 14, 512, 3, 2, 1));
  workloads.push_back(conv(256, 14, 512, 1, 2, 0));
  workloads.push_back(conv(512, 7, 512, 3, 1, 1));
  // A MobileNet depthwise layer.
  workloads.push_back(conv(32, 112, 32, 3, 1, 1, true));

  const std::vector<std::string> wanted = split_list(filter);
  double dense1024_ratio = NAN, log_best = 0, log_default = 0;
  int resnet_layers = 0;
  for (const Workload &wl : workloads) {
    if (!wanted.empty()) {
      bool match = false;
      for (const auto &w : wanted) {
        match = match || wl.tmpl.find(w) != std::string::npos || wl.shape.find(w) != std::string::npos;
      }
      if (!match) continue;
    }
    ops::Task task(wl.tmpl, task_args(wl), driver::resolve_target(target));
    const double flop = task.flop();

    Plain p;
    if (wl.kind == Workload::Dense) {
      p.x.resize(static_cast<size_t>(wl.M * wl.K));
      p.w.resize(static_cast<size_t>(wl.Nn * wl.K));
    } else {
      p.x.resize(static_cast<size_t>(wl.N * wl.C * wl.H * wl.W));
      p.w.resize(static_cast<size_t>(wl.OC * (wl.kind == Workload::Depthwise ? 1 : wl.C) * wl.KH * wl.KW));
    }
    fill_random(p.x, seed * 7 + 1);
    fill_random(p.w, seed * 7 + 2);

    OneDnnResult peer = onednn_run(wl, p);
    double openblas = wl.kind == Workload::Dense ? openblas_seconds(wl, p) : 0;

    // Prints a warning line when a config's output differs from oneDNN's: the tolerance grows
    // with the largest output and the square root of the reduction length.
    auto check = [&](const Measured &m, const char *which) {
      double diff = 0, scale = 1;
      for (size_t i = 0; i < peer.out.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(m.out[i] - peer.out[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(peer.out[i])));
      }
      if (!(diff <= 1e-5 * scale * std::sqrt(flop / static_cast<double>(peer.out.size())))) {
        std::printf("sweep_warning op=%s shape=%s %s config differs from oneDNN: max_abs_diff=%g max_abs=%g\n",
                    wl.tmpl.c_str(), wl.shape.c_str(), which, diff, scale);
      }
    };

    // The default config, checked against oneDNN's output.
    const autotune::Config def = task.default_config();
    const Measured dm = run_config(task, wl, def, p, options, true, 1e30);
    if (!dm.ok) {
      std::printf("sweep_warning op=%s shape=%s default config failed: %s\n", wl.tmpl.c_str(), wl.shape.c_str(),
                  no_spaces(dm.error).c_str());
    } else {
      check(dm, "default");
    }

    // Random configs, distinct, uniform over the valid ones.
    std::mt19937_64 rng(seed * 1000003 + std::hash<std::string>()(wl.tmpl + wl.shape));
    std::set<int64_t> seen;
    std::vector<autotune::Config> configs;
    for (int tries = 0; static_cast<int>(configs.size()) < n_configs && tries < 20 * n_configs + 100; ++tries) {
      autotune::Config c = task.space().sample(rng);
      if (seen.insert(c.index()).second) configs.push_back(c);
    }
    double best = dm.ok ? dm.seconds : 1e30;
    autotune::Config best_cfg = def;
    int measured = dm.ok ? 1 : 0, failed = dm.ok ? 0 : 1;
    std::string first_error;
    for (const auto &cfg : configs) {
      // A config whose first call is 4x slower than the best so far is recorded from that call.
      const Measured m = run_config(task, wl, cfg, p, options, false, 4 * best);
      if (!m.ok) {
        ++failed;
        if (first_error.empty()) first_error = m.error;
        continue;
      }
      ++measured;
      if (m.seconds < best) {
        best = m.seconds;
        best_cfg = cfg;
      }
    }
    // The peers, the default and the best config are timed a second time at the end and keep the
    // faster figure, so that a burst of load on the machine during one measurement does not
    // favour either side.
    const OneDnnResult again = onednn_run(wl, p);
    if (again.seconds < peer.seconds) {
      peer.seconds = again.seconds;
      peer.weights = again.weights;
    }
    peer.plain_seconds = std::min(peer.plain_seconds, again.plain_seconds);
    if (wl.kind == Workload::Dense) openblas = std::min(openblas, openblas_seconds(wl, p));
    double def_seconds = dm.ok ? dm.seconds : 0;
    if (dm.ok) {
      const Measured again = run_config(task, wl, def, p, options, false, 1e30);
      if (again.ok) def_seconds = std::min(def_seconds, again.seconds);
      if (def_seconds < best) {
        best = def_seconds;
        best_cfg = def;
      }
    }
    if (best_cfg != def) {
      const Measured bm = run_config(task, wl, best_cfg, p, options, true, 1e30);
      if (bm.ok) {
        check(bm, "best");
        best = std::min(best, bm.seconds);
      }
    }
    const double g_best = flop / best * 1e-9, g_def = dm.ok ? flop / def_seconds * 1e-9 : 0;
    const double g_peer = flop / peer.seconds * 1e-9;
    std::printf(
        "sweep op=%s shape=%s configs=%d failed=%d best_gflops=%.2f default_gflops=%.2f peer=onednn "
        "peer_gflops=%.2f",
        wl.tmpl.c_str(), wl.shape.c_str(), measured, failed, g_best, g_def, g_peer);
    if (wl.kind == Workload::Dense) {
      std::printf(" weights=prepacked peer_weights=%s onednn_plain_gflops=%.2f openblas_gflops=%.2f", peer.weights,
                  flop / peer.plain_seconds * 1e-9, flop / openblas * 1e-9);
    }
    std::printf(" ratio_best=%.3f ratio_default=%.3f\n", g_best / g_peer, g_def / g_peer);
    std::printf("sweep_best op=%s shape=%s space=%lld valid=%lld config=%s default=%s\n", wl.tmpl.c_str(),
                wl.shape.c_str(), static_cast<long long>(task.space().size()),
                static_cast<long long>(task.space().count_valid()), no_spaces(best_cfg.to_string()).c_str(),
                no_spaces(def.to_string()).c_str());
    if (!first_error.empty()) {
      std::printf("sweep_failure op=%s shape=%s first_error=%s\n", wl.tmpl.c_str(), wl.shape.c_str(),
                  no_spaces(first_error.substr(0, 200)).c_str());
    }
    std::fflush(stdout);
    if (wl.kind == Workload::Dense && wl.M == 1024) dense1024_ratio = g_best / g_peer;
    if (wl.resnet) {
      log_best += std::log(g_best / g_peer);
      log_default += std::log(std::max(g_def, 1e-9) / g_peer);
      ++resnet_layers;
    }
  }
  const double gb = resnet_layers ? std::exp(log_best / resnet_layers) : NAN;
  const double gd = resnet_layers ? std::exp(log_default / resnet_layers) : NAN;
  std::printf(
      "sweep_summary dense_1024_ratio_best=%.3f resnet18_geomean_ratio_best=%.3f "
      "resnet18_geomean_ratio_default=%.3f resnet18_layers=%d configs_per_workload=%d\n",
      dense1024_ratio, gb, gd, resnet_layers, n_configs);
  return 0;
}
