#pragma once
// JobManager: the tuning service's jobs. It runs several tuning jobs at once from one tuning log:
// jobs are queued by priority (higher first, then in submission order) and at most `max_running`
// run at a time, each on a thread of its own with its own connection to the log and its own
// measurer (from a factory, so that the service decides what measures: a farm client per job, or
// the one local machine shared).
//
// Everything a job is lives in the tuning log (db::Job: its spec, state and records), so the
// manager can be stopped and started again at any moment:
//   - start() queues again every job the log shows as running or pending (a service killed even
//     with SIGKILL resumes them from their records, losing at most the batch in flight) and every
//     job that shutdown() paused;
//   - shutdown() pauses the running jobs after their batch in flight (the log says paused, with
//     kServiceStoppedMessage) and joins the threads.
// A measurer that fails (MeasureError: the farm cannot be reached, no runner of the device class)
// does not fail the job at once: the job waits ("waiting", with the reason and the next attempt
// in its message) and tries again with exponential back-off, and fails only when the measurer
// stays unusable for `give_up_after` without a measured batch in between.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "db/tuning_db.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

namespace kiln::rpc {
class EventLog;
struct LogField;
}  // namespace kiln::rpc

namespace kiln::tuner {

// A job id the tuning log does not hold.
class UnknownJobError : public TuneError {
 public:
  using TuneError::TuneError;
};

// A pause, resume or cancel that the job's state does not allow (pausing a done job, resuming a
// cancelled one, ...). The message names the state.
class JobStateError : public TuneError {
 public:
  using TuneError::TuneError;
};

// A submission or resume after shutdown() began.
class ServiceStoppingError : public UserError {
 public:
  using UserError::UserError;
};

// The message of a job that shutdown() paused; start() queues such jobs again.
constexpr char kServiceStoppedMessage[] = "paused: the tuning service stopped; it goes on when the service starts";

// What a job's measurer is made for.
struct MeasurerRequest {
  int64_t job_id = 0;      // 0 while the job is being created
  std::string target;      // canonical
  std::string device_key;  // the device class
  // default_measure_options() with the job's own options (TuneOptions::measure) on top.
  kiln::v1::MeasureOptions measure;
  int priority = 0;  // the job's
};

// Makes a job's measurer. Throws MeasureError when it cannot for now (the job waits and tries
// again) and TuneError when it never will (a target the service does not measure: the job fails).
using MeasurerFactory = std::function<std::unique_ptr<Measurer>(const MeasurerRequest &)>;

struct JobManagerOptions {
  // The tuning log (created when missing).
  std::string log_path;
  // The target and device class of jobs that name none.
  std::string target = "llvm -mcpu=native";
  std::string device_key = "local-cpu";
  // Jobs running at once (1 .. 64).
  int max_running = 1;
  MeasurerFactory measurer;
  // Back-off after a measurer failure: the first wait, doubled after each failure up to the
  // longest; the job fails once the measurer has failed for `give_up_after` without a measured
  // batch in between.
  std::chrono::milliseconds retry_first{std::chrono::seconds(1)};
  std::chrono::milliseconds retry_longest{std::chrono::seconds(60)};
  std::chrono::milliseconds give_up_after{std::chrono::hours(1)};
  // Where the manager logs its events (job_submitted, job_queued, job_started, job_waiting,
  // job_paused, job_done, job_failed, job_cancelled, ...); none when null. Must outlive the manager.
  rpc::EventLog *events = nullptr;
  // Told what the running jobs measure (tune_observer.h); none when null. Must outlive the manager.
  TuneObserver *observer = nullptr;
};

// What a client asks to tune.
struct JobSubmission {
  std::string name;
  std::vector<TuneTask> tasks;
  TuneOptions options;
  std::string target;      // empty: the manager's
  std::string device_key;  // empty: the manager's
};

// A job as the manager reports it: live for a job it queues or runs ("pending", "running",
// "waiting"), else as the log keeps it (see logged_status()).
struct JobReport {
  JobStatus status;
  std::string name;
  int priority = 0;
  std::string target;
  std::string device_key;
};

class JobManager {
 public:
  // Opens (or creates) the log. Throws db::TuningDbError when it cannot, UserError for options
  // out of range.
  explicit JobManager(JobManagerOptions options);
  // shutdown().
  ~JobManager();
  JobManager(const JobManager &) = delete;
  JobManager &operator=(const JobManager &) = delete;

  // Queues again the jobs the log shows as running or pending and those shutdown() paused, and
  // starts running jobs. Throws UserError when another JobManager (another kilnd) serves the
  // same log.
  void start();

  // Checks the submission (Tuner::create_job: TuneError naming what is wrong), creates the job in
  // the log and queues it.
  JobReport submit(const JobSubmission &submission);
  // Throws UnknownJobError.
  JobReport get(int64_t job_id);
  // Every job of the log, oldest first, without their tasks.
  std::vector<JobReport> list();
  // A queued job leaves the queue; a running one stops after its batch in flight (the report
  // still says running, and its watchers get the final event once it has stopped). Pausing a
  // paused job does nothing. Throws UnknownJobError, JobStateError (a done, failed or cancelled
  // job).
  JobReport pause(int64_t job_id);
  // Queues a paused, failed or pending job again. A queued or running job is left as it is.
  // Throws UnknownJobError, JobStateError (done or cancelled, or running in another process).
  JobReport resume(int64_t job_id);
  // Stops a job for good (a running one after its batch in flight). Cancelling a cancelled job
  // does nothing. Throws UnknownJobError, JobStateError (a done job).
  JobReport cancel(int64_t job_id);

  // Calls `watcher` at once with the job's current report, then after every batch and change of
  // state, until a call with final = true: the job stopped (or was stopped already), or the
  // manager shut down. Calls come one at a time from the manager's threads, under its lock: a
  // watcher must be quick and must not call the manager. Returns an id for unsubscribe(); after
  // unsubscribe() returns, the watcher is not called again. Throws UnknownJobError.
  using Watcher = std::function<void(const JobReport &report, bool final)>;
  uint64_t subscribe(int64_t job_id, Watcher watcher);
  void unsubscribe(uint64_t subscription);

  // Pauses the running jobs after their batch in flight (kServiceStoppedMessage), gives every
  // watcher its final event and joins the threads. Queued jobs stay pending in the log. Later
  // submissions are refused. Safe to call more than once.
  void shutdown();

 private:
  enum class Phase { kIdle, kQueued, kRunning };
  enum class Stop { kNone, kPause, kCancel, kShutdown };
  struct Entry {
    int64_t id = 0;
    std::string name, target, device_key;
    int priority = 0;
    std::optional<kiln::v1::MeasureOptions> measure;
    Phase phase = Phase::kIdle;
    uint64_t queued_at = 0;  // queue order within a priority
    Stop stop = Stop::kNone;
    std::atomic<bool> cancel{false};  // for Tuner::run
    Measurer *measurer = nullptr;     // while one exists for the job
    // Live while the job is queued or running; afterwards the last one (has_status).
    JobStatus status;
    bool has_status = false;
  };
  struct Subscription {
    int64_t job_id;
    Watcher watcher;
  };
  using QueueKey = std::pair<int, uint64_t>;  // (-priority, queued_at)

  Entry &entry_locked(int64_t job_id);
  Entry &entry_from_job_locked(const db::Job &job);
  JobReport report_locked(Entry &e, bool with_tasks = true);
  void enqueue_locked(Entry &e, const std::string &why);
  void publish_locked(Entry &e, bool final);
  void event(bool warning, const char *name, const std::vector<rpc::LogField> &fields);
  void worker(db::TuningDb &log);
  void run_job(Entry &e, db::TuningDb &log);
  // After Tuner::run returned: the state the stop reason asks for, in the log and to watchers.
  void finish_run(Entry &e, db::TuningDb &log, const JobStatus &result);
  void fail_job(Entry &e, db::TuningDb &log, const std::string &message);

  JobManagerOptions options_;
  std::mutex shutdown_mutex_;  // one shutdown() at a time
  std::mutex db_mutex_;        // the manager's own connection; never held while taking mutex_
  db::TuningDb log_;
  int lock_fd_ = -1;

  std::mutex mutex_;
  std::condition_variable wake_;  // the queue changed, a stop was asked, or shutdown
  std::map<int64_t, std::unique_ptr<Entry>> entries_;
  std::map<QueueKey, int64_t> queue_;
  uint64_t next_queued_at_ = 1;
  std::map<uint64_t, Subscription> subscriptions_;
  uint64_t next_subscription_ = 1;
  bool started_ = false, stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace kiln::tuner
