#include "db/job.h"

#include <array>

namespace kiln::db {

namespace {

constexpr std::array<std::string_view, 6> kStateNames = {"pending", "running", "paused", "done", "failed", "cancelled"};

}  // namespace

std::string_view to_string(JobState state) { return kStateNames[static_cast<size_t>(state)]; }

std::optional<JobState> parse_job_state(std::string_view name) {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

bool is_finished(JobState state) {
  return state == JobState::kDone || state == JobState::kFailed || state == JobState::kCancelled;
}

bool JobProgress::was_measured(const std::string &workload_key, int64_t config_index) const {
  auto it = measured.find(workload_key);
  return it != measured.end() && it->second.count(config_index) > 0;
}

}  // namespace kiln::db
