#include "rpc_server/time_evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::rpc {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The repetition count the measured rate predicts for `min_seconds`, times the golden ratio, and
// at least twice the current one.
uint64_t grown_number(uint64_t number, double elapsed, double min_seconds, uint64_t max_number) {
  double predicted = elapsed > 0 ? min_seconds / (elapsed / static_cast<double>(number)) * 1.618 : 0.0;
  double next = std::max(predicted, 2.0 * static_cast<double>(number));
  if (!(next < static_cast<double>(max_number))) return max_number;
  return static_cast<uint64_t>(std::ceil(next));
}

}  // namespace

Timing time_evaluate(const std::function<void()> &call, const TimeEvaluatorOptions &options) {
  Timing t;
  t.number = options.deterministic ? 1 : std::max<uint64_t>(options.number, 1);
  const Clock::time_point origin = Clock::now();
  auto now = [&] { return options.clock ? options.clock() : seconds_since(origin); };
  const double warmup_t0 = options.deterministic ? now() : 0.0;
  call();
  ++t.calls;
  const double warmup_seconds = options.deterministic ? now() - warmup_t0 : 0.0;
  if (options.after_warmup && !options.after_warmup()) {
    t.stopped_after_warmup = true;
    return t;
  }
  if (options.deterministic) {
    t.seconds.assign(options.repeat, warmup_seconds);
    return t;
  }
  const double min_seconds = options.min_repeat_ms / 1000.0;
  for (uint32_t r = 0; r < options.repeat; ++r) {
    for (;;) {
      if (options.before_repeat) options.before_repeat();
      const double t0 = now();
      for (uint64_t i = 0; i < t.number; ++i) call();
      const double elapsed = now() - t0;
      t.calls += t.number;
      if (r == 0 && elapsed < min_seconds && t.number < options.max_number) {
        t.number = grown_number(t.number, elapsed, min_seconds, options.max_number);
        continue;
      }
      t.seconds.push_back(elapsed / static_cast<double>(t.number));
      break;
    }
  }
  return t;
}

void flush_cpu_cache(const void *data, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr size_t kLine = 64;
  const char *p = static_cast<const char *>(data);
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{kLine} - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t a = start; a < end; a += kLine) _mm_clflush(reinterpret_cast<const void *>(a));
  _mm_mfence();
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace kiln::rpc
