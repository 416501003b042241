#pragma once
// The compute roofline of one core: float32 fused multiply-adds from registers only (no loads), as
// many independent chains as hide the FMA latency, in the widest vectors the CPU has (AVX-512, else
// AVX2 with FMA, else SSE multiply and add). No kernel on one thread passes it; a benchmark that
// prints a kernel's GFLOPS next to it shows how much of the core the kernel uses, and how much
// faster than its peer any kernel could be. Measured for `seconds` in short bursts, the fastest
// burst counting (as a kernel's fastest timing does).
namespace kiln::bench {

double fma_peak_gflops(double seconds = 0.2);

}  // namespace kiln::bench
