#include "bench/common/fma_peak.h"

#include <immintrin.h>

#include <chrono>

namespace kiln::bench {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 12 independent chains of STEP per inner iteration (two FMA units of latency 4 need 8; 12 and
// the two operands fit the 16 registers AVX2 has); the empty asm keeps the compiler from folding or
// eliminating the chains. The loop runs in bursts of 4096 iterations (tens of microseconds) and the
// fastest burst counts, as a kernel's fastest timing does: the clock of a shared core moves, and a
// long average sits below the speed a short kernel sees. A macro rather than a template: each
// expansion is compiled for its own instruction set (the target attribute of the function it is
// in). b = 1 and c = 0 keep every value finite and normal whatever the count. Sets `flops` to float
// operations per second.
#define KILN_FMA_CHAINS(V, INIT, B, C, LANES, STEP)                                             \
  do {                                                                                          \
    const V b = B, c = C;                                                                       \
    V a0 = INIT, a1 = INIT, a2 = INIT, a3 = INIT, a4 = INIT, a5 = INIT;                         \
    V a6 = INIT, a7 = INIT, a8 = INIT, a9 = INIT, a10 = INIT, a11 = INIT;                       \
    const auto start = std::chrono::steady_clock::now();                                        \
    double fastest = 1e30;                                                                      \
    do {                                                                                        \
      const auto t0 = std::chrono::steady_clock::now();                                         \
      for (int k = 0; k < 4096; ++k) {                                                          \
        a0 = STEP(a0, b, c), a1 = STEP(a1, b, c), a2 = STEP(a2, b, c), a3 = STEP(a3, b, c);     \
        a4 = STEP(a4, b, c), a5 = STEP(a5, b, c), a6 = STEP(a6, b, c), a7 = STEP(a7, b, c);     \
        a8 = STEP(a8, b, c), a9 = STEP(a9, b, c), a10 = STEP(a10, b, c), a11 = STEP(a11, b, c); \
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));      \
        __asm__ volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));    \
      }                                                                                         \
      const double burst = seconds_since(t0);                                                   \
      if (burst > 0 && burst < fastest) fastest = burst;                                        \
    } while (seconds_since(start) < seconds);                                                   \
    flops = 4096.0 * 12 * (LANES)*2 / fastest;                                                  \
  } while (false)

#define KILN_MUL_ADD(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)

__attribute__((target("avx512f"))) double peak_avx512(double seconds) {
  double flops = 0;
  KILN_FMA_CHAINS(__m512, _mm512_set1_ps(1.5f), _mm512_set1_ps(1.0f), _mm512_setzero_ps(), 16, _mm512_fmadd_ps);
  return flops;
}

__attribute__((target("avx2,fma"))) double peak_avx2(double seconds) {
  double flops = 0;
  KILN_FMA_CHAINS(__m256, _mm256_set1_ps(1.5f), _mm256_set1_ps(1.0f), _mm256_setzero_ps(), 8, _mm256_fmadd_ps);
  return flops;
}

double peak_sse(double seconds) {
  double flops = 0;
  KILN_FMA_CHAINS(__m128, _mm_set1_ps(1.5f), _mm_set1_ps(1.0f), _mm_setzero_ps(), 4, KILN_MUL_ADD);
  return flops;
}

}  // namespace

double fma_peak_gflops(double seconds) {
  __builtin_cpu_init();
  double flops;
  if (__builtin_cpu_supports("avx512f")) {
    flops = peak_avx512(seconds);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    flops = peak_avx2(seconds);
  } else {
    flops = peak_sse(seconds);
  }
  return flops / 1e9;
}

}  // namespace kiln::bench
