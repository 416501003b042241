// fp32 GEMM, C = A · B: Kiln's hand-written schedule compiled by the LLVM back end against
// OpenBLAS's cblas_sgemm, in the same run, on 1 and 2 threads. One line per case:
//   gemm m= n= k= threads= kiln_gflops= openblas_gflops= ratio=
// Options: --target "llvm -mcpu=..." (default native), --quick (fewer repeats), --only MxNxK.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/gemm/gemm_schedule.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "deploy/module.h"
#include "deploy/tensor.h"
#include "deploy/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best time in seconds over repeats, running for at least `budget` seconds after a warm-up.
template <class F>
double best_time(F &&f, double budget) {
  f();
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 1000 && (rep < 3 || total < budget); ++rep) {
    const auto t = Clock::now();
    f();
    const double s = std::chrono::duration<double>(Clock::now() - t).count();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

}  // namespace

// OpenBLAS picks its kernels from the CPU model at load time; on a CPU its release does not know
// it falls back to SSE3 ("Prescott") kernels, which would make it a weak peer. Then the benchmark
// runs itself again with OPENBLAS_CORETYPE naming the kernels the CPU can run.
void use_best_openblas_kernels(char **argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const std::string core = openblas_get_corename();
  if (core != "Prescott" && core != "Core2" && core != "Nehalem" && core != "Sandybridge") return;
  const kiln::codegen::LLVMTarget host = kiln::codegen::LLVMTarget::host();
  const char *better = host.has_feature("avx512f") ? "SkylakeX" : host.has_feature("avx2") ? "Haswell" : nullptr;
  if (!better) return;
  std::fprintf(stderr, "OpenBLAS chose %s kernels for this CPU; running it with OPENBLAS_CORETYPE=%s\n", core.c_str(),
               better);
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
  using namespace kiln;
  use_best_openblas_kernels(argv);
  std::string target = "llvm -mcpu=native";
  std::string only;
  double budget = 0.5;
  int mr = 0, nr = 0, mb = 0, ku = 0, pack = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mr" && i + 1 < argc) {
      mr = std::atoi(argv[++i]);
    } else if (a == "--nr" && i + 1 < argc) {
      nr = std::atoi(argv[++i]);
    } else if (a == "--mb" && i + 1 < argc) {
      mb = std::atoi(argv[++i]);
    } else if (a == "--pack" && i + 1 < argc) {
      pack = std::atoi(argv[++i]);
    } else if (a == "--ku" && i + 1 < argc) {
      ku = std::atoi(argv[++i]);
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--quick") {
      budget = 0.1;
    } else {
      std::fprintf(stderr, "usage: %s [--target T] [--only MxNxK] [--quick] [--mr R --nr C --mb B --ku U --pack 0|1]\n",
                   argv[0]);
      return 1;
    }
  }
  struct Shape {
    int m, n, k;
  };
  std::vector<Shape> shapes = {
      {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {1000, 1000, 1000}};
  for (int m : {1, 16, 64}) {
    for (int k : {512, 2048}) shapes.push_back({m, 1000, k});
  }
  const int vector_bits = codegen::LLVMTarget::parse(target).vector_bits();
  codegen::LLVMBuildOptions options;
  options.target = target;
  for (const Shape &sh : shapes) {
    if (!only.empty() && only != std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k)) {
      continue;
    }
    bench::GemmConfig config = bench::gemm_config(vector_bits, sh.m, sh.n, sh.k);
    if (mr) config.mr = mr;
    if (nr) config.nr = nr;
    if (mb) config.mb = mb;
    if (ku) config.ku = ku;
    if (pack >= 0) config.pack_b = pack != 0;
    if (std::getenv("KILN_BENCH_VERBOSE")) {
      std::fprintf(stderr, "config lanes=%d mr=%d nr=%d mb=%d ku=%d pack_b=%d parallel=%d\n", config.lanes, config.mr,
                   config.nr, config.mb, config.ku, config.pack_b ? 1 : 0, config.parallel ? 1 : 0);
    }
    codegen::LLVMModule module(bench::gemm_function(sh.m, sh.n, sh.k, config), options);
    const deploy::DType f32 = deploy::DType::of<float>();
    deploy::Tensor a = deploy::Tensor::empty({sh.m, sh.k}, f32), b = deploy::Tensor::empty({sh.k, sh.n}, f32);
    deploy::Tensor c = deploy::Tensor::empty({sh.m, sh.n}, f32), ref = deploy::Tensor::empty({sh.m, sh.n}, f32);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = dist(rng);
    for (int64_t i = 0; i < b.numel(); ++i) b.data_as<float>()[i] = dist(rng);
    const std::vector<deploy::Tensor> tensors = {a, b, c};
    const std::vector<KilnArg> args = deploy::to_kiln_args(tensors);
    KilnPackedFunc fn = module.function("gemm");
    const double flops = 2.0 * sh.m * sh.n * sh.k;
    for (int threads : {1, 2}) {
      deploy::set_num_threads(threads);
      openblas_set_num_threads(threads);
      const double tk = best_time(
          [&] {
            if (fn(args.data(), 3) != 0) {
              std::fprintf(stderr, "kiln gemm failed: %s\n", module.last_error().c_str());
              std::exit(1);
            }
          },
          budget);
      const double tb = best_time(
          [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh.m, sh.n, sh.k, 1.0f, a.data_as<float>(), sh.k,
                        b.data_as<float>(), sh.n, 0.0f, ref.data_as<float>(), sh.n);
          },
          budget);
      double max_err = 0;
      for (int64_t i = 0; i < c.numel(); ++i) {
        max_err = std::max(max_err, static_cast<double>(std::fabs(c.data_as<float>()[i] - ref.data_as<float>()[i])));
      }
      if (max_err > 1e-2) {
        std::fprintf(stderr, "kiln gemm %dx%dx%d differs from OpenBLAS by %g\n", sh.m, sh.n, sh.k, max_err);
        return 1;
      }
      const double gk = flops / tk * 1e-9, gb = flops / tb * 1e-9;
      std::printf("gemm m=%d n=%d k=%d threads=%d kiln_gflops=%.1f openblas_gflops=%.1f ratio=%.2f\n", sh.m, sh.n, sh.k,
                  threads, gk, gb, gk / gb);
      std::fflush(stdout);
    }
  }
  return 0;
}
