#pragma once
// The time evaluator: how a measurement worker times one candidate, with the semantics of TVM's
// time_evaluator so that numbers compare with AutoTVM's.
//   1. One warm-up call, not timed. `after_warmup` may then inspect its output (the correctness
//      check) and stop the evaluation.
//   2. `repeat` repeats of `number` calls each; a repeat records seconds per call.
//   3. When the first repeat lasts less than min_repeat_ms, `number` grows to what the measured
//      rate predicts for min_repeat_ms, times 1.618, and at least doubles; the repeat is redone
//      until it lasts min_repeat_ms, and the grown `number` is kept for the later repeats.
//   4. `before_repeat` (the CPU cache flush) runs before every repeat, redone ones included,
//      outside the timed region.
// With a deterministic clock (a cycle model: every call on the same inputs reads the same time)
// there is nothing to average: the warm-up call is the one call, timed, and its time is every
// repeat's (number 1; min_repeat_ms and before_repeat do not apply).
// The call reports failure by throwing; the exception leaves the evaluator.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace kiln::rpc {

struct TimeEvaluatorOptions {
  uint64_t number = 1;
  uint32_t repeat = 3;
  uint32_t min_repeat_ms = 0;
  // `number` never grows beyond this.
  uint64_t max_number = uint64_t{1} << 32;
  // Runs before every repeat, not timed.
  std::function<void()> before_repeat;
  // Runs after the warm-up call; returning false ends the evaluation with no timings.
  std::function<bool()> after_warmup;
  // Seconds on a monotonic clock, read before and after each repeat; the steady clock when empty.
  std::function<double()> clock;
  // The clock reads the same time for every call (DeviceBackend::deterministic_clock()): one call.
  bool deterministic = false;
};

struct Timing {
  // Seconds per call, one per repeat; empty when after_warmup stopped the evaluation.
  std::vector<double> seconds;
  // Calls per repeat, as grown by min_repeat_ms.
  uint64_t number = 0;
  // Every call made, the warm-up and redone repeats included.
  uint64_t calls = 0;
  bool stopped_after_warmup = false;
};

Timing time_evaluate(const std::function<void()> &call, const TimeEvaluatorOptions &options);

// Writes back and evicts every cache line of [data, data + bytes) from the CPU caches, then waits
// for it to complete (clflush and a fence on x86; nothing elsewhere).
void flush_cpu_cache(const void *data, size_t bytes);

}  // namespace kiln::rpc
