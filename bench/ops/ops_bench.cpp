// Memory-bound operators at Kiln's default config against oneDNN's primitive on the same data,
// float32, batch 1, timed interleaved in this process at each thread count. One line per case and
// thread count:
//   ops case=<name> threads=<n> kiln_us=<t> onednn_us=<t> kiln_gbs=<g> onednn_gbs=<g> ratio=<r>
// GB/s counts the bytes of the input and the output once each; ratio is oneDNN's time over Kiln's
// (above 1: Kiln is faster). oneDNN's OpenMP threads are set with omp_set_num_threads.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/common/layer.h"
#include "bench/common/split_list.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/target.h"
#include "compiler/ops/epilogue.h"
#include "compiler/ops/registry.h"
#include "deploy/thread_pool.h"

namespace {

using namespace kiln;
using contracts::Json;

Json tensor(const std::vector<int64_t> &shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Case {
  std::string name;
  std::string tmpl;
  Json args;
  std::vector<int64_t> in_shape, out_shape;
  // Makes oneDNN's primitive and its arguments on src/dst (other arguments it owns).
  std::function<std::function<void(dnnl::stream &)>(dnnl::engine &, memory &src, memory &dst)> onednn;
};

memory::dims dims(const std::vector<int64_t> &s) { return memory::dims(s.begin(), s.end()); }

memory::desc plain_md(const std::vector<int64_t> &s) {
  return memory::desc(dims(s), dt::f32, s.size() == 2 ? tag::ab : s.size() == 3 ? tag::abc : tag::abcd);
}

Case eltwise_case(const std::string &name, const std::vector<int64_t> &shape, const Json &op, dnnl::algorithm alg) {
  Case c{name,  "elemwise.x86", Json::object({{"data", tensor(shape)}, {"epilogue", Json::array({op})}}),
         shape, shape,          nullptr};
  c.onednn = [shape, alg](dnnl::engine &eng, memory &src, memory &dst) {
    auto d = dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, plain_md(shape), 0.f, 0.f);
    auto p = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, eng));
    return std::function<void(dnnl::stream &)>([p, src, dst](dnnl::stream &s) {
      p.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    });
  };
  return c;
}

Case softmax_case(const std::string &name, const std::vector<int64_t> &shape) {
  Case c{name, "softmax.x86", Json::object({{"data", tensor(shape)}}), shape, shape, nullptr};
  c.onednn = [shape](dnnl::engine &eng, memory &src, memory &dst) {
    auto d = dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, plain_md(shape),
                                         static_cast<int>(shape.size()) - 1);
    auto p = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(d, eng));
    return std::function<void(dnnl::stream &)>([p, src, dst](dnnl::stream &s) {
      p.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    });
  };
  return c;
}

Case pool_case(const std::string &name, const std::vector<int64_t> &shape, bool is_max, int64_t k, int64_t st,
               int64_t pad, bool global) {
  const int64_t oh = global ? 1 : (shape[2] + 2 * pad - k) / st + 1,
                ow = global ? 1 : (shape[3] + 2 * pad - k) / st + 1;
  std::vector<int64_t> out = {shape[0], shape[1], oh, ow};
  Json args = Json::object({{"data", tensor(shape)}, {"pool_type", is_max ? "max" : "avg"}});
  if (!global) {
    args.set("kernel", Json::array_of(std::vector<int64_t>{k, k}));
    args.set("strides", Json::array_of(std::vector<int64_t>{st, st}));
    args.set("padding", Json::array_of(std::vector<int64_t>{pad, pad, pad, pad}));
  }
  Case c{name, global ? "global_pool2d.x86" : "pool2d.x86", args, shape, out, nullptr};
  const int64_t kh = global ? shape[2] : k, kw = global ? shape[3] : k, s = global ? 1 : st, p = global ? 0 : pad;
  c.onednn = [shape, out, is_max, kh, kw, s, p](dnnl::engine &eng, memory &src, memory &dst) {
    auto d = dnnl::pooling_forward::desc(
        dnnl::prop_kind::forward_inference,
        is_max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding, plain_md(shape),
        plain_md(out), {s, s}, {kh, kw}, {p, p}, {p, p});
    auto pd = dnnl::pooling_forward::primitive_desc(d, eng);
    auto prim = dnnl::pooling_forward(pd);
    memory ws = pd.workspace_desc().get_size() ? memory(pd.workspace_desc(), eng) : memory();
    return std::function<void(dnnl::stream &)>([prim, src, dst, ws](dnnl::stream &st2) {
      std::unordered_map<int, memory> a = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
      if (ws) a[DNNL_ARG_WORKSPACE] = ws;
      prim.execute(st2, a);
    });
  };
  return c;
}

Case layer_norm_case(const std::string &name, const std::vector<int64_t> &shape) {
  Case c{name, "layer_norm.x86", Json::object({{"data", tensor(shape)}}), shape, shape, nullptr};
  c.onednn = [shape](dnnl::engine &eng, memory &src, memory &dst) {
    auto d = dnnl::layer_normalization_forward::desc(
        dnnl::prop_kind::forward_inference, plain_md(shape), 1e-5f,
        dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
    auto pd = dnnl::layer_normalization_forward::primitive_desc(d, eng);
    auto prim = dnnl::layer_normalization_forward(pd);
    memory::desc cd({shape.back()}, dt::f32, tag::a);
    memory scale(cd, eng), shift(cd, eng);
    std::fill_n(static_cast<float *>(scale.get_data_handle()), shape.back(), 1.0f);
    std::fill_n(static_cast<float *>(shift.get_data_handle()), shape.back(), 0.0f);
    memory mean(pd.mean_desc(), eng), var(pd.variance_desc(), eng);
    return std::function<void(dnnl::stream &)>([prim, src, dst, scale, shift, mean, var](dnnl::stream &s) {
      prim.execute(s, {{DNNL_ARG_SRC, src},
                       {DNNL_ARG_DST, dst},
                       {DNNL_ARG_SCALE, scale},
                       {DNNL_ARG_SHIFT, shift},
                       {DNNL_ARG_MEAN, mean},
                       {DNNL_ARG_VARIANCE, var}});
    });
  };
  return c;
}

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void set_onednn_threads(int n) {
  using Fn = void (*)(int);
  if (auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) f(n);
}

}  // namespace

int main(int argc, char **argv) {
  std::string filter, threads_list = "1,2", target = "llvm -mcpu=native";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cases" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      threads_list = argv[++i];
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--cases SUBSTR[,SUBSTR...]] [--threads N[,N...]] [--target T]\n", argv[0]);
      return 1;
    }
  }
  using ops::epilogue::hard_swish;
  using ops::epilogue::relu;
  std::vector<Case> cases = {
      eltwise_case("relu_1x64x56x56", {1, 64, 56, 56}, relu(), dnnl::algorithm::eltwise_relu),
      eltwise_case("hardswish_1x16x112x112", {1, 16, 112, 112}, hard_swish(), dnnl::algorithm::eltwise_hardswish),
      softmax_case("softmax_1x12x128x128", {1, 12, 128, 128}),
      softmax_case("softmax_1x1000", {1, 1000}),
      pool_case("maxpool3s2p1_1x64x112x112", {1, 64, 112, 112}, true, 3, 2, 1, false),
      pool_case("avgpool2s2_1x64x56x56", {1, 64, 56, 56}, false, 2, 2, 0, false),
      pool_case("global_avgpool_1x1280x7x7", {1, 1280, 7, 7}, false, 0, 0, 0, true),
      layer_norm_case("layer_norm_1x128x768", {1, 128, 768}),
  };
  const ops::Target tg = driver::resolve_target(target);
  codegen::LLVMBuildOptions options;
  options.target = target;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<int> thread_counts;
  for (const std::string &t : bench::split_list(threads_list)) thread_counts.push_back(std::atoi(t.c_str()));
  for (const Case &c : cases) {
    bool wanted = filter.empty();
    for (const std::string &f : bench::split_list(filter)) wanted = wanted || c.name.find(f) != std::string::npos;
    if (!wanted) continue;
    ops::Task task(c.tmpl, c.args, tg);
    ops::Instance inst = task.instantiate(task.default_config());
    ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
    codegen::LLVMModule m(f, options);
    std::vector<deploy::Tensor> args;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    for (const auto &t : inst.compute.args()) {
      std::vector<int64_t> shape;
      for (const auto &d : t.shape()) shape.push_back(ir::as_const_int(d).value_or(1));
      deploy::Tensor x = deploy::Tensor::empty(shape, deploy::DType::of<float>());
      for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = u(rng);
      args.push_back(x);
    }
    // Layer norm's scale and shift: ones and zeros, as oneDNN's.
    if (c.tmpl == "layer_norm.x86" && args.size() == 4) {
      std::fill_n(args[1].data_as<float>(), args[1].numel(), 1.0f);
      std::fill_n(args[2].data_as<float>(), args[2].numel(), 0.0f);
    }
    memory src(plain_md(c.in_shape), eng, args[0].data()), dst(plain_md(c.out_shape), eng);
    auto run_onednn = c.onednn(eng, src, dst);
    const double bytes = 4.0 * static_cast<double>(numel(c.in_shape) + numel(c.out_shape));
    // The outputs agree (loosely: approximate math on both sides).
    run_onednn(strm);
    strm.wait();
    m.call("op", args);
    const float *ko = args.back().data_as<float>(), *oo = static_cast<const float *>(dst.get_data_handle());
    double max_diff = 0;
    for (int64_t i = 0; i < numel(c.out_shape); ++i) max_diff = std::max(max_diff, std::fabs(double(ko[i]) - oo[i]));
    for (int n : thread_counts) {
      deploy::set_num_threads(n);
      set_onednn_threads(n);
      double kiln_s = 1e30, onednn_s = 1e30;
      for (int round = 0; round < 3; ++round) {
        kiln_s = std::min(kiln_s, bench::time_call([&] { m.call("op", args); }));
        onednn_s = std::min(onednn_s, bench::time_call([&] {
                              run_onednn(strm);
                              strm.wait();
                            }));
      }
      std::printf(
          "ops case=%s threads=%d kiln_us=%.2f onednn_us=%.2f kiln_gbs=%.2f onednn_gbs=%.2f ratio=%.3f "
          "max_diff=%.2g\n",
          c.name.c_str(), n, kiln_s * 1e6, onednn_s * 1e6, bytes / kiln_s * 1e-9, bytes / onednn_s * 1e-9,
          onednn_s / kiln_s, max_diff);
      std::fflush(stdout);
    }
  }
  return 0;
}
