#pragma once
// Job: a tuning job as the tuning log keeps it, so that it can be listed and resumed after a
// crash or a restart.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace kiln::db {

enum class JobState { kPending, kRunning, kPaused, kDone, kFailed, kCancelled };

// "pending", "running", "paused", "done", "failed", "cancelled".
std::string_view to_string(JobState state);
std::optional<JobState> parse_job_state(std::string_view name);
// Done, failed and cancelled jobs are finished; prune may delete their records.
bool is_finished(JobState state);

struct Job {
  int64_t id = 0;
  std::string name;
  nlohmann::json spec;  // what the tuner needs to restart the job (tasks, budget, options)
  JobState state = JobState::kPending;
  int64_t trials_total = 0;  // the planned number of measurements
  int64_t trials_done = 0;   // records inserted for this job (kept up to date by insert())
  std::string message;       // the latest status or failure message
  double created_at = 0;     // Unix seconds
  double updated_at = 0;
};

// What a resumed job needs: the job, and which configs it already measured (failed ones
// included, so they are not measured again).
struct JobProgress {
  Job job;
  // workload key -> config indexes measured for it by this job
  std::unordered_map<std::string, std::unordered_set<int64_t>> measured;
  int64_t records = 0;

  bool was_measured(const std::string &workload_key, int64_t config_index) const;
};

}  // namespace kiln::db
