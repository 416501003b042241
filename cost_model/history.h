#pragma once
// Training data from measurements of other workloads: the tuner reads the tuning log's history of
// a template family on a device class (db::TuningDb::history) and hands it here as HistoryRows;
// each workload is re-created from its template and arguments, its configs re-lowered and their
// features extracted, which gives the Samples a prior model is fit on (transfer learning).
#include <cstddef>
#include <string>
#include <vector>

#include "compiler/ops/registry.h"
#include "contracts/config.h"
#include "cost_model/cost_model.h"
#include "cost_model/features.h"

namespace kiln::cost_model {

struct HistoryRow {
  std::string template_name;
  std::string args_json;  // the workload's canonical arguments
  contracts::ConfigRecord config;
  double throughput = 0;  // FLOP/s; 0 for a failed measurement
};

struct HistorySamples {
  Samples samples;
  // Rows left out, with the reason: a workload the registry cannot build (an unknown template,
  // arguments it refuses), a config of another space version, a config that no longer builds.
  size_t skipped = 0;
  std::vector<std::string> skip_reasons;  // at most one per workload or error kind
  // Rows whose features were extracted by this call; the others came from the process's cache of
  // history features (by extractor, target, workload and config), which the jobs of one process
  // (the tuning service, a benchmark) share: each job's prior reads the history of the other
  // workloads of its template, which the jobs before it have featurized.
  size_t extracted = 0;
};

// At most `max_per_workload` rows of each workload of `rows` (0: all), in their order: the fastest
// quarter of the budget, then an even spread over the rest by throughput (failures included), so
// that a prior sees both what wins and the whole range of the space. Deterministic. Feature
// extraction costs about a lowering per row; a template with a long history would otherwise make
// the prior cost more than the trials it saves.
std::vector<HistoryRow> thin_history(const std::vector<HistoryRow> &rows, size_t max_per_workload);

// Features of every row, extracted with `threads` threads, on `target` (the task's target: the
// history of a device class may have been measured under other spellings of it). Rows of the
// same workload share one ops::Task.
HistorySamples samples_from_history(const std::vector<HistoryRow> &rows, const FeatureExtractor &extractor,
                                    const ops::Target &target, int threads = 0,
                                    const ops::Registry &registry = ops::Registry::builtin());

}  // namespace kiln::cost_model
