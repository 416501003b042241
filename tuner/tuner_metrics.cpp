#include "tuner/tuner_metrics.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "tuner/job_manager.h"

namespace kiln::tuner {

namespace {

constexpr std::chrono::seconds kRateWindow{60};
constexpr const char *kJobStates[] = {"pending", "running", "waiting", "paused", "done", "failed", "cancelled"};

std::string label_of(db::ErrorClass error) {
  std::string name(db::to_string(error));
  for (char &c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

TunerMetrics::TunerMetrics(rpc::MetricsRegistry &registry)
    : registry_(registry),
      trials_(registry.counter("kiln_tuner_trials_total",
                               "Trials measured, by error class (ok, or the lower-case error class).", {"error"})),
      trials_per_second_(registry
                             .gauge("kiln_tuner_trials_per_second",
                                    "Trials measured per second over the last minute (INFRA excluded).")
                             .get()),
      jobs_(registry.gauge("kiln_tuner_jobs", "Tuning jobs by state.", {"state"})),
      farm_wait_(registry
                     .histogram("kiln_tuner_farm_wait_seconds",
                                "Time a batch waited for a runner lease (farm) or for the machine (local).", {},
                                rpc::duration_buckets())
                     .get()),
      log_write_(registry
                     .histogram("kiln_tuner_log_write_seconds", "Time to write a batch of records to the tuning log.",
                                {}, rpc::duration_buckets())
                     .get()),
      refit_(registry
                 .histogram("kiln_tuner_cost_model_refit_seconds", "Time of a cost-model refit (xgb strategy).", {},
                            rpc::duration_buckets())
                 .get()) {
  // Every class is shown from the start, so that rate() sees the first trials of each.
  for (int code = 0; code < db::kErrorClassCount; ++code) trials_.with({label_of(static_cast<db::ErrorClass>(code))});
  registry.on_collect([this] { collect(); });
}

void TunerMetrics::trials_measured(db::ErrorClass error, int count) {
  trials_.with({label_of(error)}).inc(count);
  if (error == db::ErrorClass::kInfra) return;
  std::lock_guard<std::mutex> lock(window_mutex_);
  window_.emplace_back(Clock::now(), count);
}

void TunerMetrics::log_written(double seconds) { log_write_.observe(seconds); }

void TunerMetrics::cost_model_refitted(double seconds) { refit_.observe(seconds); }

void TunerMetrics::farm_waited(double seconds) { farm_wait_.observe(seconds); }

void TunerMetrics::watch_jobs(JobManager &manager) {
  registry_.on_collect([this, &manager] {
    std::map<std::string, int> by_state;
    for (const char *state : kJobStates) by_state[state] = 0;
    for (const JobReport &report : manager.list()) ++by_state[report.status.state];
    for (const auto &[state, count] : by_state) jobs_.with({state}).set(count);
  });
}

void TunerMetrics::collect() {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(window_mutex_);
  while (!window_.empty() && now - window_.front().first > kRateWindow) window_.pop_front();
  int total = 0;
  for (const auto &[when, count] : window_) total += count;
  // Over the last minute, or since the start when that is shorter.
  const double span = std::max(1.0, std::min(std::chrono::duration<double>(kRateWindow).count(),
                                             std::chrono::duration<double>(now - started_).count()));
  trials_per_second_.set(total / span);
}

}  // namespace kiln::tuner
