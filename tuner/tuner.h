#pragma once
// Tuning jobs: find the fastest config of each task of a job with as few measurements as
// possible, record every measurement in the tuning log, and survive a crash without losing work.
//
// A job is created in the tuning log before anything is measured (db::Job; its spec holds the
// tasks and options, so that any process can resume it). run() then loops: the task scheduler
// picks a task, its search strategy proposes a batch, the measurer measures it, and the results
// are inserted in one transaction with the job's id. INFRA results are measured again (up to
// max_infra_retries) and never recorded. Resuming (run() on a job with records) rebuilds every
// task's visited set and model from the job's records and goes on with the rest of the budget; a
// crash loses at most the batch in flight.
//
// Task scheduler: one batch per task in turn (warm-up), then the batch goes to the task with the
// largest expected gain of the objective sum(weight_i * latency_i): weight_i times the larger of
// its recent improvement per trial (backward) and its best latency over its trial count (an
// optimistic forward estimate), MetaSchedule's gradient rule. A task leaves the rotation when
// its space is exhausted, its per-task budget is spent, it has not improved for
// `early_stopping` trials, or nothing of it is valid after a warm-up (its errors summarised).
//
// Confirmation: when the search ends, each task's leaders and its default config are timed again
// (TuneOptions::confirm_top, confirm_repeats), and the best a task reports is the log's best, ranked by the
// upper median of each config's records. Picking the fastest of hundreds of noisy timings
// otherwise favours a config whose one timing was lucky (the winner's curse).
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contracts/json.h"
#include "db/tuning_db.h"
#include "tuner/measurer.h"
#include "tuner/search.h"
#include "tuner/tune_observer.h"

namespace kiln::tuner {

// A job's spec, options or state the tuner refuses: an unknown template, bad arguments, a budget
// of 0 or beyond the limit, an unknown job, a job of another target.
class TuneError : public UserError {
 public:
  using UserError::UserError;
};

struct TuneTask {
  std::string template_name;
  contracts::Json args;
  double weight = 1;  // how many times the workload occurs in the model
  std::string name;   // for progress lines; empty: the template name
};

struct TuneOptions {
  std::string strategy = "xgb";
  int64_t trials = 1000;        // measurements in all, failures included (1 .. 10,000,000)
  int64_t trials_per_task = 0;  // 0: no cap of its own
  int64_t early_stopping = 0;   // per task: trials without improvement; 0: off
  double time_budget_s = 0;     // wall time of one run(); 0: none
  int64_t batch_size = 16;      // configs per measurement batch
  bool transfer = true;         // a prior from the log's history of each template (XGB only)
  int64_t transfer_min_records = 100;
  // At most this many records of each other workload feed the prior (cost_model::thin_history);
  // 0: all of them.
  int64_t transfer_max_records_per_workload = 128;
  bool skip_logged = false;  // never measure a config the log holds for the same workload
                             // and target, from any job
  int max_infra_retries = 3;
  // Confirmation, when the search of a job ends (its budget spent or every task done; not when it
  // is paused, cancelled or out of time): each task's `confirm_top` best configs are timed again
  // until each has 1 + `confirm_repeats` valid records, in rounds, so that the config the log
  // names best (TuningDb::best: the upper median of a config's records) is not one lucky timing
  // among many noisy ones. The default config is timed again with them (it is measured once in
  // the search, and one unlucky timing would leave it out of the ranking), so that the best is
  // never a config slower than the default. These measurements come on top of `trials`:
  // (confirm_top + 1) * confirm_repeats per task when the leaders stay the leaders, at most four
  // times that when configs timed again fall behind others; 0 in either turns it off. Off by default, so that a
  // job's trials are its budget; `kiln tune --confirm-top 4` and the tuner benchmark turn it on.
  int64_t confirm_top = 0;
  int64_t confirm_repeats = 2;
  uint64_t seed = 0;
  // Higher runs first when a service queues jobs (-1000 .. 1000); kept with the job so that a
  // restarted service queues it the same way. The tuner itself does not use it.
  int priority = 0;
  // How candidates are timed, kept with the job so that a resumed job is measured the same way.
  // The tuner does not read it: whoever makes the job's measurer does (the tuning service).
  // Unset: the measurer's own options.
  std::optional<kiln::v1::MeasureOptions> measure;
  SearchOptions search;  // seed and prior are set per task

  contracts::Json to_json() const;
  static TuneOptions from_json(const contracts::Json &j);
};

struct TaskStatus {
  std::string name;
  std::string workload_key;
  double weight = 1;
  double flop = 0;
  int64_t trials = 0;
  int64_t valid = 0;
  std::optional<double> best_s;           // during the search its fastest trial's mean seconds;
                                          // after the confirmation the log's best (TuningDb::best)
  int64_t confirmed = 0;                  // measurements of the confirmation (in `trials`)
  std::optional<double> default_s;        // the template's default config
  int64_t last_improvement = 0;           // trials when best_s last improved
  std::string done;                       // why the task left the rotation, empty while it is in it
  std::map<std::string, int64_t> errors;  // error class name -> count
  SearchStats search;                     // what the task's strategy has spent in this run()
  double prior_s = 0;                     // building its transfer prior (history, features, fit)
  int64_t prior_rows = 0;                 // the log's records of other workloads the prior was fit
                                          // on; 0 without a prior

  double best_gflops() const { return best_s ? flop / *best_s / 1e9 : 0; }
  // default_s / best_s, when both exist.
  double speedup() const { return best_s && default_s ? *default_s / *best_s : 0; }
};

struct JobStatus {
  int64_t job_id = 0;
  // "running", "done", "paused" (resumable: cancelled by the caller or paused through the log),
  // "cancelled" (through the log), "failed"; a service that queues jobs adds "pending" (queued)
  // and "waiting" (for its measurer to become usable again).
  std::string state;
  int64_t trials_done = 0;
  int64_t trials_total = 0;
  double elapsed_s = 0;
  double eta_s = 0;  // from the rate of this run
  std::string message;
  std::vector<TaskStatus> tasks;
  // sum(weight * best seconds) over tasks with a valid config: the objective.
  double objective_s() const;
};

class Tuner {
 public:
  // Tasks are built for `target` (a target string; canonicalised) and measured on devices of class
  // `device_key`.
  Tuner(db::TuningDb &log, Measurer &measurer, const std::string &target, const std::string &device_key);

  // Reports what run() does to `observer` (which must outlive the runs); none when null.
  void set_observer(TuneObserver *observer) { observer_ = observer; }

  // Checks the tasks and options (each task built, each space with a valid config, budgets in
  // range) and creates the job in the log. Throws TuneError naming what is wrong, before
  // anything is created.
  int64_t create_job(const std::string &name, const std::vector<TuneTask> &tasks, const TuneOptions &options);

  // Runs (or resumes) a job until its budget is spent, every task is done, the time budget runs
  // out, or *cancel becomes true (the job is then paused and can be resumed), or another process
  // pauses or cancels the job in the log (checked after every batch). `progress` is called after
  // every batch. A done or cancelled job is refused (TuneError). Throws TuneError for an unknown job or one of another
  // target or device class; measurer errors (MeasureError) fail the job with their message and are rethrown.
  JobStatus run(int64_t job_id, const std::function<void(const JobStatus &)> &progress = {},
                const std::atomic<bool> *cancel = nullptr);

 private:
  db::TuningDb &log_;
  Measurer &measurer_;
  std::string target_;
  std::string device_key_;
  TuneObserver *observer_ = nullptr;
};

// A job as the tuning log shows it, for a job that is not running in this process: its state,
// trials and message, and each task's progress (trials, valid, best and default latency, errors)
// from the job's records. elapsed_s and eta_s are 0, and tasks' `done` is empty (the log does not
// keep why a task left the rotation). A spec this tuner cannot read (another version, a template
// it does not know) gives no tasks. Throws TuneError for an unknown job.
JobStatus logged_status(db::TuningDb &log, int64_t job_id);

// One line per task, for terminals and logs.
std::string format_status(const JobStatus &status);

}  // namespace kiln::tuner
