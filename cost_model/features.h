#pragma once
// Features of schedule candidates, the cost model's input (cost_model/cost_model.h).
//
// IrFeatureExtractor reads the candidate's lowered program (ops::Task::lower without unrolling or
// vectorizing, so that every loop keeps its annotation) and returns a vector of one fixed length,
// the same for every template and target (TVM's variable-length itervar vectors are what crashed
// its XGBoost again and again). Its layout (docs/cost_model.md) is:
//   - kStoreSlots blocks, one per innermost buffer store, the stores with the most work (dynamic
//     iterations times vector lanes) first, empty slots zero. Each block holds:
//       the loop nest above the store, innermost first, kLoopSlots loops: present, log2 extent,
//         the annotation one-hot (serial, parallel, vectorized, unrolled, blockIdx, threadIdx,
//         vthread) and the loop's depth from the outermost;
//       the nest's summary: iterations, parallel extent, work per parallel task, vector lanes,
//         unrolled extent, auto-unroll limit, enclosing conditions, depth;
//       arithmetic executed (dynamic counts): float add, mul, fused multiply-add, div, min/max,
//         integer ops, special functions, comparisons, selects, casts;
//       kBufferSlots buffers it touches (the stored one first, then by bytes accessed): read,
//         written, bytes accessed, unique bytes, innermost stride, innermost non-zero stride, reuse
//         count and distance (iterations and bytes), gather, non-affine index, unit-stride
//         vector access, scope, and the footprint curve: unique bytes touched by the innermost
//         1..kLoopSlots loops;
//   - whole-program summaries: stores, loops, allocations by scope (count and bytes), FLOPs,
//     argument bytes, the totals of iterations, float ops and bytes, and the software prefetches
//     executed.
// Counts and sizes enter as log2(1 + x).
//
// KnobFeatureExtractor is AutoTVM's "knob" features, kept for comparison: the config's entity
// values, one vector per space (its length depends on the space).
//
// Adding a feature changes kIrFeatureVersion (and usually the length); saved models of another
// version are refused on load, never misread.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/ir/function.h"
#include "compiler/ops/registry.h"
#include "cost_model/cost_model.h"

namespace kiln::cost_model {

constexpr int kIrFeatureVersion = 2;

class FeatureExtractor {
 public:
  virtual ~FeatureExtractor() = default;
  // The spec of the vectors extract() returns for this task.
  virtual FeatureSpec spec(const ops::Task &task) const = 0;
  // The features of one candidate (spec(task).length values). Throws what Task::instantiate and
  // lowering throw (ConfigError, ScheduleError) for a config that cannot be built.
  virtual std::vector<float> extract(const ops::Task &task, const autotune::Config &config) const = 0;
};

class IrFeatureExtractor : public FeatureExtractor {
 public:
  static constexpr size_t kStoreSlots = 4;
  static constexpr size_t kLoopSlots = 8;
  static constexpr size_t kBufferSlots = 5;
  static constexpr size_t kLoopFeatures = 10;
  static constexpr size_t kNestFeatures = 8;
  static constexpr size_t kArithFeatures = 10;
  static constexpr size_t kBufferFeatures = 15 + kLoopSlots;
  static constexpr size_t kStoreFeatures =
      kLoopSlots * kLoopFeatures + kNestFeatures + kArithFeatures + kBufferSlots * kBufferFeatures;
  static constexpr size_t kProgramFeatures = 16;
  static constexpr size_t kLength = kStoreSlots * kStoreFeatures + kProgramFeatures;

  static FeatureSpec ir_spec() { return {"ir", kIrFeatureVersion, kLength}; }
  // One name per value, e.g. "store0.loop1.extent", "store2.buf0.footprint3", "program.flop".
  static std::vector<std::string> names();
  // "name=value" lines for the non-zero values of a vector, for reading what a candidate looks
  // like to the model.
  static std::string describe(const std::vector<float> &features);

  FeatureSpec spec(const ops::Task &) const override { return ir_spec(); }
  std::vector<float> extract(const ops::Task &task, const autotune::Config &config) const override;
  // The features of a lowered function; `flop` is the workload's FLOP count.
  std::vector<float> extract_lowered(const ir::LoweredFunc &func, double flop) const;
};

class KnobFeatureExtractor : public FeatureExtractor {
 public:
  static constexpr int kVersion = 1;
  FeatureSpec spec(const ops::Task &task) const override;
  std::vector<float> extract(const ops::Task &task, const autotune::Config &config) const override;
};

// The features of many candidates of one task, extracted by `threads` threads (0: one per core).
struct FeatureBatch {
  FeatureSpec spec;
  std::vector<float> features;      // rows() * spec.length, row-major; a failed row is all NaN
  std::vector<std::string> errors;  // per row: empty, or why the candidate could not be built
  // Seconds spent lowering and extracting, summed over threads (IR features: lowering is
  // Task::lower, extraction is the walk over the lowered program).
  double lower_seconds = 0;
  double extract_seconds = 0;
  // IR features: lower_seconds by lowering pass (lower::LowerOptions::pass_seconds), summed over
  // threads; what lower_seconds holds beyond their sum is instantiating the template's schedule.
  std::map<std::string, double> lower_pass_seconds;
  double wall_seconds = 0;
  size_t rows() const { return errors.size(); }
};

FeatureBatch extract_features(const FeatureExtractor &extractor, const ops::Task &task,
                              const std::vector<autotune::Config> &configs, int threads = 0);

}  // namespace kiln::cost_model
