#pragma once
// TunerMetrics: kilnd's metrics, fed by the running jobs (as their TuneObserver), the measurers'
// waits and, at every scrape, the job manager's jobs:
//   kiln_tuner_trials_total{error}           counter: trials measured, by error class (ok,
//                                            instantiation, compile_host, ..., infra: lower-case
//                                            db::ErrorClass names)
//   kiln_tuner_trials_per_second             gauge: trials measured (infra excluded) per second
//                                            over the last minute; rate() on the counter is the
//                                            same over any window
//   kiln_tuner_jobs{state}                   gauge: jobs by state (pending, running, waiting,
//                                            paused, done, failed, cancelled)
//   kiln_tuner_farm_wait_seconds             histogram: waits for a runner lease (farm) or for the
//                                            machine (local), per batch
//   kiln_tuner_log_write_seconds             histogram: writes of a batch of records to the log
//   kiln_tuner_cost_model_refit_seconds      histogram: cost-model refits of the xgb strategy
#include <chrono>
#include <deque>
#include <mutex>
#include <utility>

#include "rpc_server/metrics.h"
#include "tuner/tune_observer.h"

namespace kiln::tuner {

class JobManager;

class TunerMetrics : public TuneObserver {
 public:
  // Registers the metrics in `registry`, which must outlive this object.
  explicit TunerMetrics(rpc::MetricsRegistry &registry);

  void trials_measured(db::ErrorClass error, int count) override;
  void log_written(double seconds) override;
  void cost_model_refitted(double seconds) override;
  // For the measurers' `waited` callbacks.
  void farm_waited(double seconds);

  // Counts `manager`'s jobs by state at every scrape; `manager` must outlive the registry's renders.
  void watch_jobs(JobManager &manager);

 private:
  using Clock = std::chrono::steady_clock;
  void collect();

  rpc::MetricsRegistry &registry_;
  rpc::Family<rpc::Counter> &trials_;
  rpc::Gauge &trials_per_second_;
  rpc::Family<rpc::Gauge> &jobs_;
  rpc::Histogram &farm_wait_, &log_write_, &refit_;
  const Clock::time_point started_ = Clock::now();
  std::mutex window_mutex_;
  std::deque<std::pair<Clock::time_point, int>> window_;  // measured trials of the last minute
};

}  // namespace kiln::tuner
