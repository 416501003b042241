#include "tuner/job_manager.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "contracts/json.h"
#include "contracts/target.h"
#include "rpc_server/event_log.h"
#include "rpc_server/measure_pool.h"

namespace kiln::tuner {

namespace {

using Clock = std::chrono::steady_clock;
using contracts::Json;

constexpr char kPausedMessage[] = "paused through the tuning service";
constexpr char kCancelledMessage[] = "cancelled through the tuning service";
constexpr char kQueuedMessage[] = "queued";

bool active_state(db::JobState s) { return s == db::JobState::kPending || s == db::JobState::kRunning; }

std::string seconds_text(std::chrono::milliseconds d) { return fmt::format("{:g} s", d.count() / 1000.0); }

// The measure options a job's measurer uses: the tuner's defaults with the job's own on top.
kiln::v1::MeasureOptions job_measure_options(const std::optional<kiln::v1::MeasureOptions> &own) {
  kiln::v1::MeasureOptions options = default_measure_options();
  if (own) options.MergeFrom(*own);
  return options;
}

}  // namespace

JobManager::JobManager(JobManagerOptions options)
    : options_(std::move(options)), log_(db::TuningDb::open(options_.log_path)) {
  if (options_.max_running < 1 || options_.max_running > 64) {
    throw UserError("the tuning service runs 1 to 64 jobs at once, not " + std::to_string(options_.max_running));
  }
  if (!options_.measurer) throw UserError("the tuning service needs a measurer factory");
  if (options_.retry_first.count() <= 0 || options_.retry_longest < options_.retry_first ||
      options_.give_up_after.count() < 0) {
    throw UserError("the tuning service's back-off must start above 0 and not shrink");
  }
  options_.target = contracts::canonical_target(options_.target);
  contracts::check_device_key(options_.device_key);
}

JobManager::~JobManager() {
  shutdown();
  if (lock_fd_ >= 0) close(lock_fd_);
}

void JobManager::event(bool warning, const char *name, const std::vector<rpc::LogField> &fields) {
  if (!options_.events) return;
  options_.events->write(warning ? rpc::LogLevel::kWarn : rpc::LogLevel::kInfo, name, fields);
}

void JobManager::start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (started_ || stopping_) return;
  }
  // One service per log: two would run the same jobs twice.
  const std::string lock_path = options_.log_path + ".service.lock";
  lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw UserError("cannot open " + lock_path + ": " + std::strerror(errno));
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd_);
    lock_fd_ = -1;
    throw UserError("another tuning service already serves " + options_.log_path);
  }
  std::vector<db::TuningDb> connections;
  for (int i = 0; i < options_.max_running; ++i) connections.push_back(db::TuningDb::open(options_.log_path));
  std::vector<db::Job> jobs;
  {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    jobs = log_.jobs();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const db::Job &job : jobs) {
    const bool stopped_with_us = job.state == db::JobState::kPaused && job.message == kServiceStoppedMessage;
    if (!active_state(job.state) && !stopped_with_us) continue;
    Entry &e = entry_from_job_locked(job);
    enqueue_locked(e, std::string("queued again (it was ") + std::string(db::to_string(job.state)) +
                          " when the tuning service stopped)");
  }
  started_ = true;
  for (db::TuningDb &connection : connections) {
    workers_.emplace_back([this, log = std::move(connection)]() mutable { worker(log); });
  }
}

JobManager::Entry &JobManager::entry_from_job_locked(const db::Job &job) {
  auto found = entries_.find(job.id);
  if (found != entries_.end()) return *found->second;
  auto e = std::make_unique<Entry>();
  e->id = job.id;
  e->name = job.name;
  e->target = options_.target;
  e->device_key = options_.device_key;
  try {
    if (job.spec.is_object()) {
      e->target = job.spec.value("target", e->target);
      e->device_key = job.spec.value("device_key", e->device_key);
      if (job.spec.contains("options")) {
        const TuneOptions o = TuneOptions::from_json(Json::parse(job.spec.at("options").dump()));
        e->priority = o.priority;
        e->measure = o.measure;
      }
    }
  } catch (const std::exception &) {
    // A spec of another tuner: the defaults, and Tuner::run says what is wrong.
  }
  Entry &out = *e;
  entries_[job.id] = std::move(e);
  return out;
}

JobManager::Entry &JobManager::entry_locked(int64_t job_id) {
  auto found = entries_.find(job_id);
  if (found != entries_.end()) return *found->second;
  std::optional<db::Job> job;
  {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    job = log_.job(job_id);
  }
  if (!job) throw UnknownJobError("there is no tuning job " + std::to_string(job_id) + " in " + options_.log_path);
  return entry_from_job_locked(*job);
}

JobReport JobManager::report_locked(Entry &e, bool with_tasks) {
  JobReport report;
  report.name = e.name;
  report.priority = e.priority;
  report.target = e.target;
  report.device_key = e.device_key;
  if (e.phase != Phase::kIdle) {
    report.status = e.status;
  } else {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    const std::optional<db::Job> row = log_.job(e.id);
    if (e.has_status || !with_tasks || !row) {
      report.status = e.status;
      report.status.job_id = e.id;
      if (row) {
        report.status.state = std::string(db::to_string(row->state));
        report.status.message = row->message;
        report.status.trials_done = row->trials_done;
        report.status.trials_total = row->trials_total;
      }
    } else {
      report.status = logged_status(log_, e.id);
    }
    report.status.eta_s = 0;
  }
  if (!with_tasks) report.status.tasks.clear();
  return report;
}

void JobManager::publish_locked(Entry &e, bool final) {
  std::vector<uint64_t> done;
  bool any = false;
  for (const auto &[id, sub] : subscriptions_) any = any || sub.job_id == e.id;
  if (!any) return;
  const JobReport report = report_locked(e);
  for (auto &[id, sub] : subscriptions_) {
    if (sub.job_id != e.id) continue;
    sub.watcher(report, final);
    if (final) done.push_back(id);
  }
  for (uint64_t id : done) subscriptions_.erase(id);
}

void JobManager::enqueue_locked(Entry &e, const std::string &why) {
  {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    log_.update_job(e.id, db::JobState::kPending, why);
    e.status = logged_status(log_, e.id);
  }
  e.phase = Phase::kQueued;
  e.stop = Stop::kNone;
  e.queued_at = next_queued_at_++;
  e.status.state = "pending";
  e.status.message = why;
  queue_[{-e.priority, e.queued_at}] = e.id;
  event(false, "job_queued", {{"job", e.id}, {"name", e.name}, {"priority", e.priority}, {"reason", why}});
  publish_locked(e, false);
  wake_.notify_all();
}

JobReport JobManager::submit(const JobSubmission &submission) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw ServiceStoppingError("the tuning service is shutting down");
  }
  MeasurerRequest request;
  try {
    request.target = contracts::canonical_target(submission.target.empty() ? options_.target : submission.target);
    request.device_key = submission.device_key.empty() ? options_.device_key : submission.device_key;
    contracts::check_device_key(request.device_key);
  } catch (const contracts::TargetError &e) {
    throw TuneError(e.what());
  }
  request.measure = job_measure_options(submission.options.measure);
  // Options beyond what any runner accepts would fail every batch; refuse them now.
  if (std::optional<rpc::MeasureRejection> over = rpc::check_options(request.measure, rpc::MeasureLimits())) {
    throw TuneError("measure options: " + over->message);
  }
  request.priority = submission.options.priority;
  std::unique_ptr<Measurer> measurer;
  try {
    measurer = options_.measurer(request);
  } catch (const MeasureError &e) {
    throw TuneError(e.what());
  }
  std::string name = submission.name;
  if (name.empty() && !submission.tasks.empty()) {
    name =
        submission.tasks.front().name.empty() ? submission.tasks.front().template_name : submission.tasks.front().name;
  }
  // A connection of its own: building a thousand tasks takes a while, and the manager's
  // connection serves every other call meanwhile.
  db::TuningDb log = db::TuningDb::open(options_.log_path);
  Tuner tuner(log, *measurer, request.target, request.device_key);
  const int64_t job_id = tuner.create_job(name, submission.tasks, submission.options);
  std::lock_guard<std::mutex> lock(mutex_);
  Entry &e = entry_locked(job_id);
  event(false, "job_submitted",
        {{"job", job_id},
         {"name", name},
         {"tasks", submission.tasks.size()},
         {"trials", submission.options.trials},
         {"target", request.target},
         {"device_key", request.device_key}});
  enqueue_locked(e, kQueuedMessage);
  return report_locked(e);
}

JobReport JobManager::get(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return report_locked(entry_locked(job_id));
}

std::vector<JobReport> JobManager::list() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<db::Job> jobs;
  {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    jobs = log_.jobs();
  }
  std::vector<JobReport> out;
  for (const db::Job &job : jobs) {
    Entry &e = entry_from_job_locked(job);
    if (e.phase != Phase::kIdle) {
      out.push_back(report_locked(e, false));
      continue;
    }
    JobReport r;
    r.name = e.name;
    r.priority = e.priority;
    r.target = e.target;
    r.device_key = e.device_key;
    r.status.job_id = job.id;
    r.status.state = std::string(db::to_string(job.state));
    r.status.message = job.message;
    r.status.trials_done = job.trials_done;
    r.status.trials_total = job.trials_total;
    out.push_back(std::move(r));
  }
  return out;
}

JobReport JobManager::pause(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry &e = entry_locked(job_id);
  switch (e.phase) {
    case Phase::kQueued: {
      queue_.erase({-e.priority, e.queued_at});
      {
        std::lock_guard<std::mutex> db_lock(db_mutex_);
        log_.update_job(e.id, db::JobState::kPaused, std::string(kPausedMessage));
      }
      e.phase = Phase::kIdle;
      e.status.state = "paused";
      e.status.message = kPausedMessage;
      event(false, "job_paused", {{"job", e.id}, {"was", "queued"}});
      publish_locked(e, true);
      return report_locked(e);
    }
    case Phase::kRunning:
      if (e.stop == Stop::kNone) {
        e.stop = Stop::kPause;
        e.cancel = true;
        if (e.measurer) e.measurer->cancel();
        e.status.message = "pausing after the batch in flight";
        wake_.notify_all();
      }
      return report_locked(e);
    case Phase::kIdle:
      break;
  }
  JobReport now = report_locked(e, false);
  const std::optional<db::JobState> state = db::parse_job_state(now.status.state);
  if (state == db::JobState::kPaused) return report_locked(e);
  if (!state || !active_state(*state)) {
    throw JobStateError(
        fmt::format("job {} is {}; only a queued or running job can be paused", e.id, now.status.state));
  }
  // Pending or running in the log but not here: another process runs it (it stops after its
  // batch when it sees the log), or nothing does.
  {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    log_.update_job(e.id, db::JobState::kPaused, std::string(kPausedMessage));
  }
  event(false, "job_paused", {{"job", e.id}, {"was", "running"}});
  return report_locked(e);
}

JobReport JobManager::resume(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) throw ServiceStoppingError("the tuning service is shutting down");
  Entry &e = entry_locked(job_id);
  if (e.phase != Phase::kIdle) return report_locked(e);
  const JobReport now = report_locked(e, false);
  const std::optional<db::JobState> state = db::parse_job_state(now.status.state);
  if (state == db::JobState::kRunning) {
    throw JobStateError(fmt::format("job {} is running in another process; pause it there first", e.id));
  }
  if (!state || *state == db::JobState::kDone || *state == db::JobState::kCancelled) {
    throw JobStateError(
        fmt::format("job {} is {}; only a paused, failed or pending job can be resumed", e.id, now.status.state));
  }
  enqueue_locked(e, "queued again by a client");
  return report_locked(e);
}

JobReport JobManager::cancel(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry &e = entry_locked(job_id);
  if (e.phase == Phase::kRunning) {
    if (e.stop != Stop::kShutdown) {
      e.stop = Stop::kCancel;
      e.cancel = true;
      if (e.measurer) e.measurer->cancel();
      e.status.message = "cancelling after the batch in flight";
      wake_.notify_all();
    }
    return report_locked(e);
  }
  if (e.phase == Phase::kIdle) {
    const JobReport now = report_locked(e, false);
    if (now.status.state == "cancelled") return report_locked(e);
    if (now.status.state == "done") {
      throw JobStateError(fmt::format("job {} is done; only an unfinished job can be cancelled", e.id));
    }
  } else {
    queue_.erase({-e.priority, e.queued_at});
  }
  {
    std::lock_guard<std::mutex> db_lock(db_mutex_);
    log_.update_job(e.id, db::JobState::kCancelled, std::string(kCancelledMessage));
  }
  const bool was_queued = e.phase == Phase::kQueued;
  e.phase = Phase::kIdle;
  e.status.state = "cancelled";
  e.status.message = kCancelledMessage;
  event(false, "job_cancelled", {{"job", e.id}});
  if (was_queued) publish_locked(e, true);
  return report_locked(e);
}

uint64_t JobManager::subscribe(int64_t job_id, Watcher watcher) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry &e = entry_locked(job_id);
  const bool final = e.phase == Phase::kIdle || stopping_;
  watcher(report_locked(e), final);
  const uint64_t id = next_subscription_++;
  if (!final) subscriptions_[id] = {job_id, std::move(watcher)};
  return id;
}

void JobManager::unsubscribe(uint64_t subscription) {
  std::lock_guard<std::mutex> lock(mutex_);
  subscriptions_.erase(subscription);
}

void JobManager::shutdown() {
  std::lock_guard<std::mutex> once(shutdown_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto &[id, e] : entries_) {
      if (e->phase != Phase::kRunning) continue;
      e->stop = Stop::kShutdown;
      e->cancel = true;
      if (e->measurer) e->measurer->cancel();
    }
    wake_.notify_all();
  }
  for (std::thread &t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &[id, sub] : subscriptions_) {
    Entry &e = *entries_.at(sub.job_id);
    if (e.phase == Phase::kQueued) e.status.message = "queued; the tuning service stopped and runs it when it starts";
    sub.watcher(report_locked(e), true);
  }
  subscriptions_.clear();
}

void JobManager::worker(db::TuningDb &log) {
  for (;;) {
    Entry *e = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      auto next = queue_.begin();
      e = entries_.at(next->second).get();
      queue_.erase(next);
      e->phase = Phase::kRunning;
      e->stop = Stop::kNone;
      e->cancel = false;
      e->status.state = "running";
      e->status.message.clear();
      event(false, "job_started", {{"job", e->id}, {"name", e->name}});
      publish_locked(*e, false);
    }
    run_job(*e, log);
  }
}

void JobManager::run_job(Entry &e, db::TuningDb &log) {
  std::chrono::milliseconds backoff = options_.retry_first;
  std::optional<Clock::time_point> failing_since;
  int failures = 0;
  MeasurerRequest request;
  request.job_id = e.id;
  request.target = e.target;
  request.device_key = e.device_key;
  request.measure = job_measure_options(e.measure);
  request.priority = e.priority;

  // Names the job's measurer to pause() and cancel() while it exists.
  struct MeasurerSlot {
    JobManager &manager;
    Entry &entry;
    MeasurerSlot(JobManager &m, Entry &e, Measurer *measurer) : manager(m), entry(e) {
      std::lock_guard<std::mutex> lock(manager.mutex_);
      entry.measurer = measurer;
      if (entry.cancel) measurer->cancel();
    }
    ~MeasurerSlot() {
      std::lock_guard<std::mutex> lock(manager.mutex_);
      entry.measurer = nullptr;
    }
  };

  for (;;) {
    std::string failure;
    {
      std::unique_ptr<Measurer> measurer;
      try {
        measurer = options_.measurer(request);
        MeasurerSlot slot(*this, e, measurer.get());
        Tuner tuner(log, *measurer, e.target, e.device_key);
        tuner.set_observer(options_.observer);
        const JobStatus result = tuner.run(
            e.id,
            [&](const JobStatus &s) {
              failing_since.reset();
              backoff = options_.retry_first;
              failures = 0;
              std::lock_guard<std::mutex> lock(mutex_);
              const std::string note = e.stop == Stop::kNone ? std::string() : e.status.message;
              e.status = s;
              e.status.message = note;
              publish_locked(e, false);
            },
            &e.cancel);
        finish_run(e, log, result);
        return;
      } catch (const MeasureError &err) {
        failure = err.what();
      } catch (const std::exception &err) {
        fail_job(e, log, err.what());
        return;
      }
    }

    // The measurer failed: wait and try again, unless asked to stop or it has failed for too long.
    const Clock::time_point now = Clock::now();
    if (!failing_since) failing_since = now;
    ++failures;
    if (now - *failing_since >= options_.give_up_after) {
      fail_job(e, log,
               fmt::format("gave up after {} without a usable measurer: {}",
                           seconds_text(std::chrono::duration_cast<std::chrono::milliseconds>(now - *failing_since)),
                           failure));
      return;
    }
    const std::string message =
        fmt::format("waiting for runners: {} (failure {}; next attempt in {}, giving up after {})", failure, failures,
                    seconds_text(backoff), seconds_text(options_.give_up_after));
    try {
      log.update_job(e.id, db::JobState::kRunning, message);
    } catch (const std::exception &) {
      // The log is busy: the state is only shown; the next attempt writes it again.
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (e.stop == Stop::kNone) {
        e.status.state = "waiting";
        e.status.message = message;
        event(true, "job_waiting",
              {{"job", e.id},
               {"error", failure},
               {"failures", failures},
               {"retry_in_s", std::chrono::duration<double>(backoff).count()},
               {"give_up_after_s", std::chrono::duration<double>(options_.give_up_after).count()}});
        publish_locked(e, false);
        wake_.wait_for(lock, backoff, [&] { return e.stop != Stop::kNone; });
      }
      if (e.stop != Stop::kNone) {
        JobStatus stopped = e.status;
        stopped.state = "paused";
        lock.unlock();
        finish_run(e, log, stopped);
        return;
      }
    }
    backoff = std::min(backoff * 2, options_.retry_longest);
  }
}

void JobManager::finish_run(Entry &e, db::TuningDb &log, const JobStatus &result) {
  JobStatus status = result;
  Stop stop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop = e.stop;
  }
  try {
    if (status.state == "paused") {
      switch (stop) {
        case Stop::kPause:
          status.message = kPausedMessage;
          log.update_job(e.id, db::JobState::kPaused, status.message);
          break;
        case Stop::kCancel:
          status.state = "cancelled";
          status.message = kCancelledMessage;
          log.update_job(e.id, db::JobState::kCancelled, status.message);
          break;
        case Stop::kShutdown:
          status.message = kServiceStoppedMessage;
          log.update_job(e.id, db::JobState::kPaused, status.message);
          break;
        case Stop::kNone:
          break;
      }
    }
  } catch (const std::exception &err) {
    event(true, "job_state_not_recorded", {{"job", e.id}, {"error", err.what()}});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  e.status = status;
  e.status.eta_s = 0;
  e.has_status = true;
  e.phase = Phase::kIdle;
  e.stop = Stop::kNone;
  event(false, ("job_" + status.state).c_str(),
        {{"job", e.id},
         {"message", status.message},
         {"trials_done", status.trials_done},
         {"trials", status.trials_total},
         {"elapsed_s", status.elapsed_s}});
  publish_locked(e, true);
}

void JobManager::fail_job(Entry &e, db::TuningDb &log, const std::string &message) {
  try {
    log.update_job(e.id, db::JobState::kFailed, message);
  } catch (const std::exception &err) {
    event(true, "job_state_not_recorded", {{"job", e.id}, {"error", err.what()}});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  e.status.state = "failed";
  e.status.message = message;
  e.status.eta_s = 0;
  e.has_status = true;
  e.phase = Phase::kIdle;
  e.stop = Stop::kNone;
  event(true, "job_failed", {{"job", e.id}, {"error", message}});
  publish_locked(e, true);
}

}  // namespace kiln::tuner
