#include "tuner/tuner_service.h"

#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "rpc_server/shared_token.h"

namespace kiln::tuner {

namespace {

grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *context, grpc::Status status) {
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

// The one mapping of what the manager throws to a status (see tuner_service.h).
grpc::Status status_of(const std::exception_ptr &error) {
  try {
    std::rethrow_exception(error);
  } catch (const UnknownJobError &e) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, e.what());
  } catch (const JobStateError &e) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e.what());
  } catch (const TuneError &e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const ServiceStoppingError &e) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, e.what());
  } catch (const UserError &e) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, e.what());
  } catch (const std::exception &e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "an exception that is not a std::exception");
  }
}

grpc::Status check_job_id(int64_t id) {
  if (id > 0) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must be positive, not " + std::to_string(id));
}

// Checks the token (and the job id, when the call names one), runs `body` and maps what it
// throws.
grpc::ServerUnaryReactor *serve(grpc::CallbackServerContext *context, const std::string &token,
                                const std::function<void()> &body, std::optional<int64_t> job_id = std::nullopt) {
  grpc::Status status = rpc::check_token(*context, token);
  if (status.ok() && job_id) status = check_job_id(*job_id);
  if (!status.ok()) return finish(context, status);
  try {
    body();
  } catch (...) {
    return finish(context, status_of(std::current_exception()));
  }
  return finish(context, grpc::Status::OK);
}

// One WatchJob stream. The manager's subscription queues events; the reactor writes them one at
// a time. Nothing is written before start() is done with the reactor, so that OnDone (and the
// reactor's deletion) cannot come first.
class WatchReactor final : public grpc::ServerWriteReactor<kiln::v1::JobEvent> {
 public:
  explicit WatchReactor(JobManager &manager) : manager_(manager) {}

  // Subscribes; the manager calls back at once with the job's current state.
  void start(int64_t job_id) {
    uint64_t subscription = 0;
    try {
      subscription =
          manager_.subscribe(job_id, [this](const JobReport &report, bool final) { on_event(report, final); });
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      finishing_ = true;
      Finish(status_of(std::current_exception()));
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    subscription_ = subscription;
    started_ = true;
    write_next_locked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    if (finishing_) return;
    if (!ok || cancelled_) {
      finishing_ = true;
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away"));
      return;
    }
    write_next_locked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    if (finishing_ || writing_) return;  // OnWriteDone finishes
    finishing_ = true;
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away"));
  }

  void OnDone() override {
    // After unsubscribe() returns the manager never calls on_event again.
    manager_.unsubscribe(subscription_);
    delete this;
  }

 private:
  void on_event(const JobReport &report, bool final) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finishing_) return;
    kiln::v1::JobEvent event;
    report_to_proto(report, event.mutable_job());
    event.set_final(final);
    if (!queue_.empty() && !queue_.back().final()) {
      queue_.back() = std::move(event);  // the newer state replaces one not yet written
    } else {
      queue_.push_back(std::move(event));
    }
    write_next_locked();
  }

  void write_next_locked() {
    if (!started_ || writing_ || finishing_ || queue_.empty()) return;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (current_.final()) {
      finishing_ = true;
      StartWriteAndFinish(&current_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      writing_ = true;
      StartWrite(&current_);
    }
  }

  JobManager &manager_;
  std::mutex mutex_;
  uint64_t subscription_ = 0;
  bool started_ = false, writing_ = false, finishing_ = false, cancelled_ = false;
  std::deque<kiln::v1::JobEvent> queue_;
  kiln::v1::JobEvent current_;
};

}  // namespace

TunerService::TunerService(JobManager &manager, std::string token, SubmissionLimits limits)
    : manager_(manager), token_(std::move(token)), limits_(limits) {}

grpc::ServerUnaryReactor *TunerService::SubmitJob(grpc::CallbackServerContext *context,
                                                  const kiln::v1::SubmitJobRequest *request,
                                                  kiln::v1::SubmitJobReply *reply) {
  return serve(context, token_, [&] {
    const size_t bytes = request->spec().ByteSizeLong();
    if (bytes > kMaxSpecBytes)
      throw TuneError("the job spec is " + std::to_string(bytes) + " bytes; at most " + std::to_string(kMaxSpecBytes) +
                      " are accepted");
    const JobSubmission submission = submission_from_proto(request->spec(), limits_);
    report_to_proto(manager_.submit(submission), reply->mutable_job());
  });
}

grpc::ServerUnaryReactor *TunerService::GetJob(grpc::CallbackServerContext *context,
                                               const kiln::v1::JobRequest *request, kiln::v1::JobInfo *reply) {
  return serve(
      context, token_, [&] { report_to_proto(manager_.get(request->job_id()), reply); }, request->job_id());
}

grpc::ServerUnaryReactor *TunerService::ListJobs(grpc::CallbackServerContext *context,
                                                 const kiln::v1::ListJobsRequest * /*request*/,
                                                 kiln::v1::ListJobsReply *reply) {
  return serve(context, token_, [&] {
    for (const JobReport &report : manager_.list()) report_to_proto(report, reply->add_jobs());
  });
}

grpc::ServerWriteReactor<kiln::v1::JobEvent> *TunerService::WatchJob(grpc::CallbackServerContext *context,
                                                                     const kiln::v1::JobRequest *request) {
  auto *reactor = new WatchReactor(manager_);
  grpc::Status status = rpc::check_token(*context, token_);
  if (status.ok()) status = check_job_id(request->job_id());
  if (!status.ok()) {
    reactor->Finish(status);
    return reactor;
  }
  reactor->start(request->job_id());
  return reactor;
}

grpc::ServerUnaryReactor *TunerService::PauseJob(grpc::CallbackServerContext *context,
                                                 const kiln::v1::JobRequest *request, kiln::v1::JobInfo *reply) {
  return serve(
      context, token_, [&] { report_to_proto(manager_.pause(request->job_id()), reply); }, request->job_id());
}

grpc::ServerUnaryReactor *TunerService::ResumeJob(grpc::CallbackServerContext *context,
                                                  const kiln::v1::JobRequest *request, kiln::v1::JobInfo *reply) {
  return serve(
      context, token_, [&] { report_to_proto(manager_.resume(request->job_id()), reply); }, request->job_id());
}

grpc::ServerUnaryReactor *TunerService::CancelJob(grpc::CallbackServerContext *context,
                                                  const kiln::v1::JobRequest *request, kiln::v1::JobInfo *reply) {
  return serve(
      context, token_, [&] { report_to_proto(manager_.cancel(request->job_id()), reply); }, request->job_id());
}

}  // namespace kiln::tuner
