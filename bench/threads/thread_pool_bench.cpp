// Overhead per parallel region: an (almost) empty parallel loop of one chunk per thread, run
// many times through Kiln's thread pool and through an OpenMP parallel for in the same run.
//   parallel_region threads=N iterations=I kiln_us=<median per region> openmp_us=<...> ratio=<kiln/openmp>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

#include "deploy/thread_pool.h"

namespace {

std::atomic<int64_t> sink{0};

int32_t body(int64_t begin, int64_t end, void *) {
  sink.fetch_add(end - begin, std::memory_order_relaxed);
  return 0;
}

template <typename F>
double median_us(F &&region, int regions, int rounds) {
  std::vector<double> per;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < regions; ++i) region();
    auto t1 = std::chrono::steady_clock::now();
    per.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / regions);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main() {
  const int regions = 2000, rounds = 15;
  for (int threads : {1, 2}) {
    kiln::deploy::ThreadPool pool(threads);
    omp_set_num_threads(threads);
    const int64_t n = threads;
    double kiln_us = median_us([&] { pool.parallel_for(body, n, nullptr); }, regions, rounds);
    double omp_us = median_us(
        [&] {
#pragma omp parallel for schedule(static)
          for (int64_t i = 0; i < n; ++i) body(i, i + 1, nullptr);
        },
        regions, rounds);
    std::printf("parallel_region threads=%d iterations=%lld kiln_us=%.2f openmp_us=%.2f ratio=%.2f\n", threads,
                static_cast<long long>(n), kiln_us, omp_us, kiln_us / omp_us);
  }
  return sink.load() > 0 ? 0 : 1;
}
