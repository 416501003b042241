// Memory-bound operators at Kiln's default config against oneDNN's primitive on the same data,
// float32, batch 1, timed interleaved in this process at each thread count. One line per case and
// thread count:
//   ops case=<name> threads=<n> kiln_us=<t> onednn_us=<t> kiln_gbs=<g> onednn_gbs=<g> ratio=<r>
//       cpu_ratio=<r> copy_gbs=<g> copy=<memcpy|loop> roofline=<f> max_diff=<d>
// GB/s counts the bytes of the input and the output once each; ratio is oneDNN's time over Kiln's
// (above 1: Kiln is faster). oneDNN's OpenMP threads are set with omp_set_num_threads, and wait
// passively (OMP_WAIT_POLICY=passive, set before oneDNN loads by running this program again, unless
// OMP_WAIT_POLICY is set already): an idle OpenMP thread that spins takes a core from Kiln's threads
// on a machine with few cores. The first line names the policy in effect:
//   ops omp_wait_policy=<policy>
// Timing: each side is called a few times first (the first calls pay for waking threads), then
// --rounds interleaved rounds each time a batch of about 2 ms of calls per side; a side's figure is
// the fastest round's time per call (the rounds a busy machine preempted are left out). cpu_ratio
// is the same ratio of the calling thread's CPU time (at 1 thread all of the work; at 2 threads
// the caller's share, its wait for the other thread included).
// Roofline: a plain copy through the same thread pool (one thread below 16 KiB a chunk), reading
// and writing as many bytes as the case (half of them each way), timed in the same rounds, twice:
// with memcpy and with a loop of the widest vector loads and stores the machine has (memcpy picks
// rep movsb or non-temporal stores by size, far below the cache's bandwidth at some sizes on some
// machines). copy_gbs is the faster's (copy= names it); roofline is Kiln's GB/s over it, the
// fraction of the bandwidth of the cache level the case's data fits in.
// Softmax cases add one line per thread count with the bound the vector exp alone sets:
//   ops exp_bound case=<name> threads=<n> exp_ns=<t> exp_tsc=<c> exp_tsc16=<c> bound_us=<t>
//       bound_roofline=<f>
// exp_ns (exp_tsc: time-stamp counter ticks; exp_tsc16: ticks per 16 lanes) is the time per element
// of elemwise.x86 with an exp epilogue at its default config (blocks of four vectors) on 4096 floats
// (in L1, so the exp's instructions, not memory, bound it), at one thread; bound_us is the case's elements times that
// over the threads that have rows to work on (softmax computes one exp per element); bound_roofline is the case's GB/s
// at that time over the copy's: the roofline no softmax with this exp can pass.
// The reorder cases are layout_transform.x86 (what the layout pass inserts where two convolutions'
// channel blocks disagree; docs/graph.md estimates their cost from these) against oneDNN's reorder.
// --asm DIR writes each case's lowered function and assembly (and the exp kernel's, DIR/exp.*).
// --svg FILE draws each case's roofline at each thread count as a bar (the exp bound of softmax
// cases as a mark on it, the ratio to oneDNN right of it) with the goal of 0.8 as a dashed line.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/common/bar_chart.h"
#include "bench/common/layer.h"
#include "bench/common/split_list.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/target.h"
#include "compiler/ir/function.h"
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

// oneDNN's tag for NCHW data in channel blocks of `b` (0: NCHW).
tag blocked_tag(int64_t b) {
  switch (b) {
    case 0:
      return tag::abcd;
    case 8:
      return tag::aBcd8b;
    case 16:
      return tag::aBcd16b;
    case 32:
      return tag::aBcd32b;
    default:
      throw std::invalid_argument("no oneDNN tag for a block of " + std::to_string(b));
  }
}

// A layout transform of NCHW `shape` from channel blocks of `src` to blocks of `dst` (0: NCHW), as
// the layout pass inserts between convolutions that disagree; oneDNN's reorder between the same two
// layouts.
Case reorder_case(const std::string &name, const std::vector<int64_t> &shape, int64_t src, int64_t dst) {
  std::vector<int64_t> data = shape;
  if (src) data = {shape[0], shape[1] / src, shape[2], shape[3], src};
  Case c{name,
         "layout_transform.x86",
         Json::object({{"data", tensor(data)}, {"src_block", src}, {"dst_block", dst}}),
         shape,
         shape,
         nullptr};
  c.onednn = [shape, src, dst](dnnl::engine &eng, memory &in, memory &out) {
    memory from(memory::desc(dims(shape), dt::f32, blocked_tag(src)), eng, in.get_data_handle());
    memory to(memory::desc(dims(shape), dt::f32, blocked_tag(dst)), eng, out.get_data_handle());
    auto prim = dnnl::reorder(from, to);
    return std::function<void(dnnl::stream &)>(
        [prim, from, to](dnnl::stream &s) mutable { prim.execute(s, from, to); });
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

// A copy of n floats in vector loads and stores, not memcpy (which picks rep movsb or
// non-temporal stores by size: on some machines, at some sizes, far below the cache's bandwidth).
#if defined(__x86_64__)
__attribute__((target("avx512f"))) void vector_copy_avx512(const float *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + 16);
    const __m512 c = _mm512_loadu_ps(src + i + 32), d = _mm512_loadu_ps(src + i + 48);
    _mm512_storeu_ps(dst + i, a);
    _mm512_storeu_ps(dst + i + 16, b);
    _mm512_storeu_ps(dst + i + 32, c);
    _mm512_storeu_ps(dst + i + 48, d);
  }
  for (; i < n; ++i) dst[i] = src[i];
}

__attribute__((target("avx"))) void vector_copy_avx(const float *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_loadu_ps(src + i), b = _mm256_loadu_ps(src + i + 8);
    const __m256 c = _mm256_loadu_ps(src + i + 16), d = _mm256_loadu_ps(src + i + 24);
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
    _mm256_storeu_ps(dst + i + 16, c);
    _mm256_storeu_ps(dst + i + 24, d);
  }
  for (; i < n; ++i) dst[i] = src[i];
}
#endif

void vector_copy(const float *src, float *dst, int64_t n) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f"), avx = __builtin_cpu_supports("avx");
  if (avx512) return vector_copy_avx512(src, dst, n);
  if (avx) return vector_copy_avx(src, dst, n);
#endif
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

struct CopyJob {
  const float *src;
  float *dst;
  int64_t n, chunks;
  bool vector_loop;  // vector_copy, else memcpy
};

// The roofline kernel: dst = src in `chunks` contiguous pieces on the thread pool.
int32_t copy_chunks(int64_t begin, int64_t end, void *closure) {
  const auto *j = static_cast<const CopyJob *>(closure);
  const int64_t per = (j->n + j->chunks - 1) / j->chunks;
  for (int64_t c = begin; c < end; ++c) {
    const int64_t lo = c * per, hi = std::min(j->n, lo + per);
    if (hi <= lo) continue;
    if (j->vector_loop) {
      vector_copy(j->src + lo, j->dst + lo, hi - lo);
    } else {
      std::memcpy(j->dst + lo, j->src + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    }
  }
  return 0;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Seconds {
  double wall, cpu;  // per call: elapsed, and the calling thread's CPU time
};

// Seconds per call of f over a batch of `reps` calls.
Seconds batch_seconds(const std::function<void()> &f, int reps) {
  const double t0 = now_seconds(), c0 = thread_cpu_seconds();
  for (int r = 0; r < reps; ++r) f();
  return {(now_seconds() - t0) / reps, (thread_cpu_seconds() - c0) / reps};
}

// Enough calls for about 2 ms, from the fastest of a few single calls.
int batch_reps(const std::function<void()> &f) {
  double best = 1e30;
  for (int i = 0; i < 5; ++i) best = std::min(best, batch_seconds(f, 1).wall);
  return std::clamp(static_cast<int>(2e-3 / std::max(best, 1e-8)), 1, 100000);
}

// The fastest of the rounds, by elapsed time and by CPU time.
Seconds fastest(const std::vector<Seconds> &v) {
  Seconds b{1e30, 1e30};
  for (const Seconds &x : v) b = {std::min(b.wall, x.wall), std::min(b.cpu, x.cpu)};
  return b;
}

uint64_t tsc() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

// The lowered function (Kiln IR) and its assembly, to PATH.ir and PATH.s.
void write_listing(const std::string &path, const ir::LoweredFunc &f, const codegen::LLVMBuildOptions &options) {
  const auto write = [](const std::string &name, const std::string &text) {
    if (FILE *out = std::fopen(name.c_str(), "w")) {
      std::fputs(text.c_str(), out);
      std::fclose(out);
    } else {
      std::fprintf(stderr, "cannot write %s\n", name.c_str());
    }
  };
  std::ostringstream ir_text;
  ir_text << f;
  write(path + ".ir", ir_text.str());
  write(path + ".s", codegen::emit_assembly({f}, options));
}

struct ExpCost {
  double ns = 0, tsc = 0;  // per element
};

// The vector exp's cost per element at one thread: elemwise.x86 with an exp epilogue on 4096
// floats (32 KiB in and out together, in L1), the fastest of `rounds` batches of about 2 ms.
ExpCost exp_cost(const ops::Target &tg, const codegen::LLVMBuildOptions &options, int rounds,
                 const std::string &asm_dir) {
  const int64_t n = 4096;
  Json exp_op = Json::object({{"op", "expr"},
                              {"inputs", Json::array()},
                              {"expr", Json::object({{"op", "exp"}, {"args", Json::array({"x"})}})}});
  ops::Task task("elemwise.x86", Json::object({{"data", tensor({1, n})}, {"epilogue", Json::array({exp_op})}}), tg);
  ops::Instance inst = task.instantiate(task.default_config());
  const ir::LoweredFunc func = lower::lower(*inst.schedule, inst.compute.args(), "exp");
  codegen::LLVMModule m(func, options);
  if (!asm_dir.empty()) write_listing(asm_dir + "/exp", func, options);
  std::vector<deploy::Tensor> args;
  for (int i = 0; i < 2; ++i) {
    deploy::Tensor x = deploy::Tensor::empty({1, n}, deploy::DType::of<float>());
    for (int64_t j = 0; j < n; ++j) x.data_as<float>()[j] = -4.0f + 8.0f * static_cast<float>(j) / n;
    args.push_back(x);
  }
  deploy::set_num_threads(1);
  const std::function<void()> f = [&] { m.call("exp", args); };
  const int reps = batch_reps(f);
  ExpCost best{1e30, 1e30};
  for (int r = 0; r < rounds; ++r) {
    const uint64_t t0 = tsc();
    const double s = batch_seconds(f, reps).wall;
    const double ticks = static_cast<double>(tsc() - t0) / reps;
    if (s * 1e9 / n < best.ns) best = {s * 1e9 / n, ticks / n};
  }
  return best;
}

}  // namespace

int main(int argc, char **argv) {
  if (bench::set_onednn_passive_wait_env()) execv("/proc/self/exe", argv);
  std::string filter, threads_list = "1,2", target = "llvm -mcpu=native";
  std::string config_text, asm_dir, svg_path;
  int rounds = 9;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cases" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      threads_list = argv[++i];
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (a == "--config" && i + 1 < argc) {
      config_text = argv[++i];
    } else if (a == "--asm" && i + 1 < argc) {
      asm_dir = argv[++i];
    } else if (a == "--svg" && i + 1 < argc) {
      svg_path = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--cases SUBSTR[,SUBSTR...]] [--threads N[,N...]] [--target T] [--rounds R]\n"
                   "  [--config KNOBS]  knobs over the default config of each case run (tile_ow=[4,14];...)\n"
                   "  [--asm DIR]  write each case's lowered IR and assembly to DIR/<case>.ir and DIR/<case>.s\n"
                   "  [--svg FILE]  draw each case's roofline (and exp bound) at each thread count\n",
                   argv[0]);
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
      // 16 KiB in and out: in L1, so the time is the operations' (softmax_1x12x128x128 streams
      // 768 KiB each way through L2).
      softmax_case("softmax_1x1x32x128", {1, 1, 32, 128}),
      // Shorter rows: the default interleaves more of them (8 or 4 vectors a row at AVX2's 8 lanes).
      softmax_case("softmax_1x12x128x64", {1, 12, 128, 64}),
      softmax_case("softmax_1x12x128x32", {1, 12, 128, 32}),
      // Longer and odd rows at AVX-512's 16 lanes: 16 and 6 vectors a row.
      softmax_case("softmax_1x12x128x256", {1, 12, 128, 256}),
      softmax_case("softmax_1x12x128x96", {1, 12, 128, 96}),
      pool_case("maxpool3s2p1_1x64x112x112", {1, 64, 112, 112}, true, 3, 2, 1, false),
      pool_case("avgpool2s2_1x64x56x56", {1, 64, 56, 56}, false, 2, 2, 0, false),
      pool_case("global_avgpool_1x1280x7x7", {1, 1280, 7, 7}, false, 0, 0, 0, true),
      pool_case("global_maxpool_1x2048x7x7", {1, 2048, 7, 7}, true, 0, 0, 0, true),
      layer_norm_case("layer_norm_1x128x768", {1, 128, 768}),
      layer_norm_case("layer_norm_1x384x1024", {1, 384, 1024}),
      // Between two convolutions whose blocks disagree (ResNet-18's first stage, 802 KB), and into
      // the blocked layout.
      reorder_case("reorder_32c_16c_1x64x56x56", {1, 64, 56, 56}, 32, 16),
      reorder_case("reorder_16c_32c_1x128x28x28", {1, 128, 28, 28}, 16, 32),
      reorder_case("reorder_nchw_32c_1x64x56x56", {1, 64, 56, 56}, 0, 32),
      // Out of and into the blocked layout at a channel shuffle (ShuffleNetV2's stage 3: each unit
      // takes its convolutions' blocked output back to NCHW, and half the shuffled channels in).
      reorder_case("reorder_32c_nchw_1x128x14x14", {1, 128, 14, 14}, 32, 0),
      reorder_case("reorder_16c_nchw_1x64x28x28", {1, 64, 28, 28}, 16, 0),
      reorder_case("reorder_nchw_16c_1x128x14x14", {1, 128, 14, 14}, 0, 16),
  };
  std::printf("ops omp_wait_policy=%s\n", bench::onednn_wait_policy().c_str());
  const ops::Target tg = driver::resolve_target(target);
  codegen::LLVMBuildOptions options;
  options.target = target;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::optional<ExpCost> exp;
  std::vector<int> thread_counts;
  for (const std::string &t : bench::split_list(threads_list)) thread_counts.push_back(std::atoi(t.c_str()));
  std::vector<bench::BarRow> chart;
  for (const Case &c : cases) {
    bool wanted = filter.empty();
    for (const std::string &f : bench::split_list(filter)) wanted = wanted || c.name.find(f) != std::string::npos;
    if (!wanted) continue;
    ops::Task task(c.tmpl, c.args, tg);
    autotune::Config cfg = task.default_config();
    if (!config_text.empty()) {
      try {
        cfg = task.space().parse_config_text(config_text, cfg);
      } catch (const UserError &e) {
        std::fprintf(stderr, "%s: --config for case %s: %s\n", argv[0], c.name.c_str(), e.what());
        return 1;
      }
    }
    ops::Instance inst = task.instantiate(cfg);
    ir::LoweredFunc f = lower::lower(*inst.schedule, inst.compute.args(), "op");
    codegen::LLVMModule m(f, options);
    if (!asm_dir.empty()) write_listing(asm_dir + "/" + c.name, f, options);
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
    bench::BarRow &bars = chart.emplace_back();
    bars.label = c.name;
    for (int n : thread_counts) {
      deploy::set_num_threads(n);
      set_onednn_threads(n);
      // oneDNN's primitive made at this thread count (one made at another count runs its
      // parallel sections for that count).
      run_onednn = c.onednn(eng, src, dst);
      // The roofline copy: as many bytes read and written as the case, half each way.
      const int64_t copy_n = (numel(c.in_shape) + numel(c.out_shape)) / 2;
      std::vector<float> copy_src(static_cast<size_t>(copy_n), 1.0f), copy_dst(static_cast<size_t>(copy_n));
      // One chunk per thread, but no chunk under 16 KiB: a small copy on one thread (waking a
      // second costs more than the copy).
      const int64_t chunks = std::clamp<int64_t>(copy_n / 4096, 1, n);
      CopyJob memcpy_job{copy_src.data(), copy_dst.data(), copy_n, chunks, false};
      CopyJob loop_job{copy_src.data(), copy_dst.data(), copy_n, chunks, true};
      const std::function<void()> kiln = [&] { m.call("op", args); };
      const std::function<void()> onednn = [&] {
        run_onednn(strm);
        strm.wait();
      };
      const auto copy_with = [&](CopyJob &job) {
        return std::function<void()>([&job] {
          if (job.chunks > 1) {
            deploy::global_thread_pool().parallel_for(copy_chunks, job.chunks, &job);
          } else {
            copy_chunks(0, 1, &job);
          }
        });
      };
      const std::function<void()> copy_memcpy = copy_with(memcpy_job), copy_loop = copy_with(loop_job);
      const int kiln_reps = batch_reps(kiln), onednn_reps = batch_reps(onednn);
      const int memcpy_reps = batch_reps(copy_memcpy), loop_reps = batch_reps(copy_loop);
      std::vector<Seconds> kiln_t, onednn_t, memcpy_t, loop_t;
      for (int round = 0; round < rounds; ++round) {
        kiln_t.push_back(batch_seconds(kiln, kiln_reps));
        onednn_t.push_back(batch_seconds(onednn, onednn_reps));
        memcpy_t.push_back(batch_seconds(copy_memcpy, memcpy_reps));
        loop_t.push_back(batch_seconds(copy_loop, loop_reps));
      }
      const Seconds kiln_b = fastest(kiln_t), onednn_b = fastest(onednn_t);
      // The faster of the two copies is the roofline.
      const double memcpy_s = fastest(memcpy_t).wall, loop_s = fastest(loop_t).wall;
      const double kiln_s = kiln_b.wall, onednn_s = onednn_b.wall, copy_s = std::min(memcpy_s, loop_s);
      const double copy_gbs = 8.0 * static_cast<double>(copy_n) / copy_s * 1e-9;
      const double roofline = bytes / kiln_s * 1e-9 / copy_gbs;
      std::printf(
          "ops case=%s threads=%d kiln_us=%.2f onednn_us=%.2f kiln_gbs=%.2f onednn_gbs=%.2f ratio=%.3f "
          "cpu_ratio=%.3f copy_gbs=%.2f copy=%s roofline=%.2f max_diff=%.2g config=%s\n",
          c.name.c_str(), n, kiln_s * 1e6, onednn_s * 1e6, bytes / kiln_s * 1e-9, bytes / onednn_s * 1e-9,
          onednn_s / kiln_s, onednn_b.cpu / kiln_b.cpu, copy_gbs, loop_s < memcpy_s ? "loop" : "memcpy", roofline, max_diff,
          cfg.to_string().c_str());
      bars.values.push_back(roofline);
      bars.markers.push_back(-1);
      char note[64];
      std::snprintf(note, sizeof note, "%d thr: %.2fx oneDNN", n, onednn_s / kiln_s);
      bars.notes.emplace_back(note);
      if (c.tmpl == "softmax.x86") {
        if (!exp) {
          exp = exp_cost(tg, options, rounds, asm_dir);
          deploy::set_num_threads(n);
        }
        // Rows of the last axis: a thread works on whole rows.
        const int64_t rows = numel(c.in_shape) / c.in_shape.back();
        const double bound_s =
            static_cast<double>(numel(c.in_shape)) * exp->ns * 1e-9 / static_cast<double>(std::min<int64_t>(n, rows));
        const double bound_roofline = bytes / bound_s * 1e-9 / copy_gbs;
        std::printf(
            "ops exp_bound case=%s threads=%d exp_ns=%.3f exp_tsc=%.2f exp_tsc16=%.1f bound_us=%.2f "
            "bound_roofline=%.2f\n",
            c.name.c_str(), n, exp->ns, exp->tsc, 16 * exp->tsc, bound_s * 1e6, bound_roofline);
        bars.markers.back() = bound_roofline;
      }
      std::fflush(stdout);
    }
  }
  if (!svg_path.empty()) {
    bench::BarOptions o;
    o.title = "Memory-bound operators: Kiln's GB/s over a copy's (roofline), default configs";
    o.x_label = "fraction of the copy's bandwidth (bytes in and out counted once)";
    o.x_hi = 1.4;
    o.x_ticks = {0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4};
    o.goal = 0.8;
    o.goal_label = "goal 0.8";
    o.marker_label = "softmax: the bound its exps alone set";
    const char *colors[] = {"#4477aa", "#66ccee", "#228833", "#ccbb44"};
    for (size_t i = 0; i < thread_counts.size(); ++i)
      o.series.emplace_back(std::to_string(thread_counts[i]) + (thread_counts[i] == 1 ? " thread" : " threads"),
                            colors[i % 4]);
    try {
      bench::write_bar_chart(svg_path, chart, o);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
      return 1;
    }
  }
  return 0;
}
