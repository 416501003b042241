// dense_pack.x86 at one shape: the GFLOPS of its default config (or of a config given as the
// tuning log writes it) against OpenBLAS's cblas_sgemm on the same data (C = A · Bᵀ), both on one
// thread and timed in turns, and optionally the kernel's assembly. One line:
//   dense_pack m= n= k= config= gflops= openblas_gflops= ratio=
// Usage: dense_pack_bench M N K [--config JSON] [--asm] [--target "llvm -mcpu=..."]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/target.h"
#include "compiler/ir/op.h"
#include "compiler/ops/registry.h"
#include "deploy/tensor.h"
#include "deploy/thread_pool.h"

using kiln::contracts::Json;

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [--config JSON] [--asm] [--target T]\n", argv[0]);
    return 2;
  }
  const int64_t M = std::atoll(argv[1]), N = std::atoll(argv[2]), K = std::atoll(argv[3]);
  std::string config, target = "llvm -mcpu=native";
  bool show_asm = false;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      config = argv[++i];
    } else if (a == "--asm") {
      show_asm = true;
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  auto matrix = [](int64_t r, int64_t c) {
    return Json::object({{"shape", Json::array_of(std::vector<int64_t>{r, c})}, {"dtype", "float32"}});
  };
  kiln::ops::Task task("dense_pack.x86",
                       Json::object({{"data", matrix(M, K)}, {"weight", matrix(N, K)}, {"prepacked", true}}),
                       kiln::driver::resolve_target(target));
  const kiln::autotune::Config cfg =
      config.empty() ? task.default_config() : task.space().parse_config_text(config, task.default_config());
  kiln::ir::LoweredFunc f = task.lower(cfg, "op");
  kiln::codegen::LLVMBuildOptions options;
  options.target = target;
  options.keep_assembly = show_asm;
  kiln::codegen::LLVMModule m(f, options);
  if (show_asm) std::printf("%s\n", m.assembly().c_str());
  kiln::deploy::set_num_threads(1);
  kiln::ops::Instance inst = task.instantiate(cfg);
  std::vector<kiln::deploy::Tensor> args;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const auto &t : inst.compute.args()) {
    std::vector<int64_t> shape;
    for (const auto &e : t.shape()) shape.push_back(*kiln::ir::as_const_int(e));
    kiln::deploy::Tensor x = kiln::deploy::Tensor::empty(shape, kiln::deploy::DType::of<float>());
    float *p = x.data_as<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] = dist(rng);
    args.push_back(x);
  }
  // The weight as [N, K] for OpenBLAS (the kernel's input is packed as [N/bn, K, bn]).
  const int64_t bn = cfg.split("tile_x").back();
  const float *packed = args[1].data_as<float>();
  std::vector<float> w(static_cast<size_t>(N * K)), c(static_cast<size_t>(M * N));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) w[static_cast<size_t>(n * K + k)] = packed[((n / bn) * K + k) * bn + n % bn];
  }
  const float *a = args[0].data_as<float>();
  openblas_set_num_threads(1);
  auto kiln_run = [&] { m.call("op", args); };
  auto blas_run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                1.0F, a, static_cast<int>(K), w.data(), static_cast<int>(K), 0.0F, c.data(), static_cast<int>(N));
  };
  kiln_run();
  blas_run();
  double best = 1e30, best_blas = 1e30, total = 0;
  auto time = [](auto &&f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int rep = 0; rep < 400 && (rep < 5 || total < 2.0); ++rep) {
    const double s = time(kiln_run), sb = time(blas_run);
    best = std::min(best, s);
    best_blas = std::min(best_blas, sb);
    total += s + sb;
  }
  const double flop = 2.0 * static_cast<double>(M * N * K);
  std::printf("dense_pack m=%lld n=%lld k=%lld config=%s gflops=%.1f openblas_gflops=%.1f ratio=%.3f\n",
              static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), cfg.to_string().c_str(),
              flop / best / 1e9, flop / best_blas / 1e9, best_blas / best);
  return 0;
}
