// ReplayMeasurer: answers from a recorded table.
#include <algorithm>
#include <cmath>

#include "tuner/measurer.h"

namespace kiln::tuner {

namespace {

// Whether `candidate` answers for a config instead of `current`: a valid outcome beats a failure,
// a faster valid one a slower one, and a later failure an earlier one.
bool replaces(const MeasureOutcome &candidate, const MeasureOutcome &current) {
  if (candidate.valid() != current.valid()) return candidate.valid();
  if (candidate.valid()) return candidate.mean() < current.mean();
  return true;
}

MeasureOutcome outcome_of(const db::Record &record) {
  MeasureOutcome out;
  out.error = record.error;
  out.message = record.error_message;
  if (record.valid()) out.costs = record.costs;
  out.wall_s = record.wall_s;
  out.runner = record.runner;
  out.kiln_version = record.kiln_version;
  return out;
}

}  // namespace

ReplayMeasurer ReplayMeasurer::from_log(db::TuningDb &log, const std::string &template_name) {
  ReplayMeasurer replay;
  db::ExportFilter filter;
  filter.template_name = template_name;
  // Records come oldest first (in the order they were stored), so a later failure replaces an
  // earlier one.
  log.for_each_record(filter, [&](const db::Record &record) {
    replay.add(record.workload.key, record.config.index, outcome_of(record));
  });
  return replay;
}

void ReplayMeasurer::add(const std::string &workload_key, int64_t config_index, MeasureOutcome outcome) {
  if (outcome.error == db::ErrorClass::kInfra) return;
  if (outcome.valid() && outcome.costs.empty()) return;
  auto [it, inserted] = table_.try_emplace({workload_key, config_index}, outcome);
  if (!inserted && replaces(outcome, it->second)) it->second = std::move(outcome);
}

std::vector<MeasureOutcome> ReplayMeasurer::measure(const ops::Task &task, const std::string & /*device_key*/,
                                                    const std::vector<autotune::Config> &configs) {
  std::vector<MeasureOutcome> outcomes;
  outcomes.reserve(configs.size());
  for (const autotune::Config &config : configs) {
    MeasureOutcome out;
    int64_t index = -1;
    try {
      index = config.index();
    } catch (const UserError &e) {
      out.error = db::ErrorClass::kInstantiation;
      out.message = e.what();
      outcomes.push_back(std::move(out));
      continue;
    }
    if (config.fingerprint() != task.space().fingerprint()) {
      out.error = db::ErrorClass::kInstantiation;
      out.message = "config " + config.to_string() + " belongs to another config space than " +
                    task.workload().template_name + "'s";
      outcomes.push_back(std::move(out));
      continue;
    }
    auto it = table_.find({task.key(), index});
    if (it == table_.end()) {
      ++misses_;
      out.error = db::ErrorClass::kUnknown;
      out.message = "not in the replay table";
    } else {
      ++answered_;
      out = it->second;
    }
    outcomes.push_back(std::move(out));
  }
  return outcomes;
}

std::vector<int64_t> ReplayMeasurer::indexes(const std::string &workload_key) const {
  std::vector<int64_t> out;
  for (auto it = table_.lower_bound({workload_key, INT64_MIN}); it != table_.end() && it->first.first == workload_key;
       ++it) {
    out.push_back(it->first.second);
  }
  return out;
}

}  // namespace kiln::tuner
