// Compile time of the LLVM back end on the 1024³ fp32 GEMM kernel of bench/gemm: in-process JIT
// and shared library, each step timed, against the C back end (codegen_c + cc -O2) as the peer.
// One line per mode (median of the repeats):
//   compile kernel=gemm m= n= k= mode=jit lower_ms= codegen_ms= optimize_ms= emit_ms= link_ms=
//           total_ms= c_backend_ms=
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/gemm/gemm_schedule.h"
#include "compiler/codegen/c/c_module.h"
#include "compiler/codegen/llvm/llvm_module.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char **argv) {
  using namespace kiln;
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const int m = 1024, n = 1024, k = 1024;
  codegen::LLVMBuildOptions options;
  options.target = "llvm -mcpu=native";
  const bench::GemmConfig config =
      bench::gemm_config(codegen::LLVMTarget::parse(options.target).vector_bits(), m, n, k);

  std::vector<double> lower_ms, c_ms;
  ir::LoweredFunc f;
  for (int r = 0; r < repeats; ++r) {
    const auto t = Clock::now();
    f = bench::gemm_function(m, n, k, config);
    lower_ms.push_back(ms_since(t));
    const auto tc = Clock::now();
    codegen::CModule c(f);
    c_ms.push_back(ms_since(tc));
  }

  const std::string lib =
      (std::filesystem::temp_directory_path() / ("kiln_compile_bench_" + std::to_string(getpid()) + ".so")).string();
  for (const std::string mode : {"jit", "library"}) {
    std::vector<double> codegen, optimize, emit, link, total;
    for (int r = 0; r < repeats; ++r) {
      codegen::LLVMCompileTimes t;
      if (mode == "jit") {
        codegen::LLVMModule module(f, options);
        t = module.times();
      } else {
        t = codegen::export_library({f}, lib, options);
      }
      codegen.push_back(t.codegen_ms);
      optimize.push_back(t.optimize_ms);
      emit.push_back(t.emit_ms);
      link.push_back(t.link_ms);
      total.push_back(t.total_ms());
    }
    std::printf(
        "compile kernel=gemm m=%d n=%d k=%d mode=%s lower_ms=%.1f codegen_ms=%.1f optimize_ms=%.1f emit_ms=%.1f "
        "link_ms=%.1f total_ms=%.1f c_backend_ms=%.1f\n",
        m, n, k, mode.c_str(), median(lower_ms), median(codegen), median(optimize), median(emit), median(link),
        median(total), median(c_ms));
  }
  std::error_code ec;
  std::filesystem::remove(lib, ec);
  return 0;
}
