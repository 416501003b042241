#include "rpc_server/tracker_service.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <utility>

#include "contracts/target.h"
#include "rpc_server/shared_token.h"

namespace kiln::rpc {

namespace {

grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *context, grpc::Status status) {
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::Status invalid(const std::string &message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); }

// OK, or INVALID_ARGUMENT naming `field` when `value` is empty or longer than `limit`.
grpc::Status check_name(const char *field, const std::string &value, size_t limit = kMaxNameLength) {
  if (value.empty()) return invalid(std::string(field) + " is empty");
  if (value.size() > limit) return invalid(std::string(field) + " is longer than " + std::to_string(limit) + " bytes");
  return grpc::Status::OK;
}

// check_name, then the device-key rule of contracts/target.h.
grpc::Status check_device_key(const char *field, const std::string &value) {
  grpc::Status status = check_name(field, value);
  if (!status.ok()) return status;
  try {
    contracts::check_device_key(value);
  } catch (const contracts::TargetError &e) {
    return invalid(std::string(field) + ": " + e.what());
  }
  return grpc::Status::OK;
}

// check_name, then the target grammar of contracts/target.h.
grpc::Status check_target(const char *field, const std::string &value) {
  grpc::Status status = check_name(field, value, kMaxTargetLength);
  if (!status.ok()) return status;
  try {
    contracts::Target::parse(value);
  } catch (const contracts::TargetError &e) {
    return invalid(std::string(field) + ": " + e.what());
  }
  return grpc::Status::OK;
}

// A duration in whole milliseconds, clamped to what a uint32 field holds (about 49 days).
uint32_t clamp_ms(std::chrono::milliseconds ms) {
  return static_cast<uint32_t>(std::clamp<int64_t>(ms.count(), 0, std::numeric_limits<uint32_t>::max()));
}

void to_proto(const RunnerRegistration &runner, kiln::v1::Target *target) {
  target->set_target(runner.target);
  target->set_device_key(runner.device_key);
}

// One waiting Acquire. The tracker completes it exactly once; when the caller cancels first, the
// request is withdrawn, and a lease granted to a caller that has gone away is released again.
class AcquireReactor final : public grpc::ServerUnaryReactor {
 public:
  AcquireReactor(Tracker &tracker, kiln::v1::AcquireReply *reply) : tracker_(tracker), reply_(reply) {}

  // Asks the tracker. The tracker may complete the request at once, on this thread; then the
  // reply is sent only once start() is done with the reactor, since Finish() may lead to OnDone()
  // and the reactor's deletion.
  void start(const std::string &device_key, int priority, Tracker::Clock::time_point deadline) {
    uint64_t id = tracker_.acquire(device_key, priority, deadline,
                                   [this](AcquireOutcome outcome) { complete(std::move(outcome)); });
    std::unique_lock<std::mutex> lock(mutex_);
    request_id_ = id;
    started_ = true;
    if (completed_) {
      grpc::Status status = std::move(deferred_status_);
      lock.unlock();
      Finish(std::move(status));
    } else if (cancelled_) {
      lock.unlock();
      tracker_.cancel(id);
    }
  }

  void OnCancel() override {
    std::string lease_to_release;
    uint64_t request_to_withdraw = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
      if (completed_) {
        lease_to_release = std::move(granted_lease_);
      } else {
        request_to_withdraw = request_id_;  // 0 before start() has its id; start() withdraws then
      }
    }
    if (!lease_to_release.empty()) tracker_.release(lease_to_release);
    if (request_to_withdraw != 0) tracker_.cancel(request_to_withdraw);
  }

  void OnDone() override { delete this; }

 private:
  void complete(AcquireOutcome outcome) {
    grpc::Status status;
    bool release_now = false;
    bool finish_now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      completed_ = true;
      switch (outcome.status) {
        case AcquireStatus::kGranted:
          if (cancelled_) {
            release_now = true;
          } else {
            granted_lease_ = outcome.lease.lease_id;
          }
          reply_->set_lease_id(outcome.lease.lease_id);
          reply_->set_runner_id(outcome.lease.runner_id);
          reply_->set_address(outcome.lease.runner.address);
          to_proto(outcome.lease.runner, reply_->mutable_target());
          status = grpc::Status::OK;
          break;
        case AcquireStatus::kDeadlineExceeded:
          status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no runner became free before the deadline");
          break;
        case AcquireStatus::kCancelled:
          status = grpc::Status(grpc::StatusCode::CANCELLED, "acquire cancelled");
          break;
        case AcquireStatus::kShutdown:
          status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the tracker is shutting down");
          break;
        case AcquireStatus::kNoRunner:
          status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, outcome.message);
          break;
      }
      finish_now = started_;
      if (!finish_now) deferred_status_ = status;
    }
    if (release_now) tracker_.release(outcome.lease.lease_id);
    if (finish_now) Finish(std::move(status));
  }

  Tracker &tracker_;
  kiln::v1::AcquireReply *reply_;
  std::mutex mutex_;
  uint64_t request_id_ = 0;
  bool started_ = false;
  grpc::Status deferred_status_;
  bool cancelled_ = false;
  bool completed_ = false;
  std::string granted_lease_;
};

// One HoldLease call: open, sending nothing, until the caller ends it. gRPC reports the end of a
// call whose caller died or whose connection broke as a cancellation, at once when the holder's
// process is gone (its connection closes with it); the lease is then released, which does nothing
// when the holder released it first.
class HoldLeaseReactor final : public grpc::ServerWriteReactor<kiln::v1::HoldLeaseReply> {
 public:
  // A refused call (`status` not OK) finishes at once and holds nothing.
  HoldLeaseReactor(Tracker &tracker, std::string lease_id, grpc::Status status)
      : tracker_(tracker), lease_id_(std::move(lease_id)), holding_(status.ok()) {
    if (!holding_) finish(std::move(status));
  }

  void OnCancel() override {
    if (holding_) tracker_.release(lease_id_);
    finish(grpc::Status(grpc::StatusCode::CANCELLED, "the lease holder went away"));
  }

  void OnDone() override { delete this; }

 private:
  void finish(grpc::Status status) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(std::move(status));
  }

  Tracker &tracker_;
  const std::string lease_id_;
  const bool holding_;
  std::mutex mutex_;
  bool finished_ = false;
};

}  // namespace

TrackerService::TrackerService(TrackerOptions options) : tracker_(std::move(options)) {}

grpc::ServerUnaryReactor *TrackerService::Register(grpc::CallbackServerContext *context,
                                                   const kiln::v1::RegisterRequest *request,
                                                   kiln::v1::RegisterReply *reply) {
  grpc::Status status = check_token(*context, tracker_.options().token);
  if (status.ok()) status = check_name("address", request->address());
  if (status.ok()) status = check_device_key("target.device_key", request->target().device_key());
  if (status.ok()) status = check_target("target.target", request->target().target());
  if (!status.ok()) return finish(context, status);
  std::string runner_id =
      tracker_.register_runner({request->address(), request->target().device_key(), request->target().target()});
  reply->set_runner_id(runner_id);
  reply->set_heartbeat_interval_ms(static_cast<uint32_t>(tracker_.options().heartbeat_interval.count()));
  reply->set_heartbeat_timeout_ms(static_cast<uint32_t>(tracker_.options().heartbeat_timeout.count()));
  reply->set_lease_idle_timeout_ms(static_cast<uint32_t>(tracker_.options().lease_idle_timeout.count()));
  return finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *TrackerService::Heartbeat(grpc::CallbackServerContext *context,
                                                    const kiln::v1::HeartbeatRequest *request,
                                                    kiln::v1::HeartbeatReply *reply) {
  grpc::Status status = check_token(*context, tracker_.options().token);
  if (status.ok()) status = check_name("runner_id", request->runner_id());
  if (status.ok() && request->active_lease().size() > kMaxNameLength) {
    status = invalid("active_lease is longer than " + std::to_string(kMaxNameLength) + " bytes");
  }
  if (!status.ok()) return finish(context, status);
  std::optional<std::string> lease = tracker_.heartbeat(request->runner_id(), request->active_lease());
  if (!lease) {
    return finish(context, grpc::Status(grpc::StatusCode::NOT_FOUND,
                                        "unknown runner " + request->runner_id() + "; register again"));
  }
  reply->set_lease_id(*lease);
  return finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor *TrackerService::Acquire(grpc::CallbackServerContext *context,
                                                  const kiln::v1::AcquireRequest *request,
                                                  kiln::v1::AcquireReply *reply) {
  grpc::Status status = check_token(*context, tracker_.options().token);
  if (status.ok()) status = check_device_key("device_key", request->device_key());
  if (status.ok() && (request->priority() < -kMaxAcquirePriority || request->priority() > kMaxAcquirePriority)) {
    status = invalid("priority " + std::to_string(request->priority()) + " is outside [-" +
                     std::to_string(kMaxAcquirePriority) + ", " + std::to_string(kMaxAcquirePriority) + "]");
  }
  const int64_t max_wait_ms = tracker_.options().max_wait.count();
  if (status.ok() && (request->wait_ms() < 0 || request->wait_ms() > max_wait_ms)) {
    status = invalid("wait_ms " + std::to_string(request->wait_ms()) + " is outside [0, " +
                     std::to_string(max_wait_ms) + "]");
  }
  if (!status.ok()) return finish(context, status);

  // The sooner of the requested wait and the call's own deadline.
  Tracker::Clock::time_point deadline = Tracker::Clock::now() + std::chrono::milliseconds(request->wait_ms());
  std::chrono::system_clock::duration call_left = context->deadline() - std::chrono::system_clock::now();
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline =
        std::min(deadline, Tracker::Clock::now() + std::chrono::duration_cast<Tracker::Clock::duration>(call_left));
  }
  auto *reactor = new AcquireReactor(tracker_, reply);
  reactor->start(request->device_key(), request->priority(), deadline);
  return reactor;
}

grpc::ServerUnaryReactor *TrackerService::Release(grpc::CallbackServerContext *context,
                                                  const kiln::v1::ReleaseRequest *request,
                                                  kiln::v1::ReleaseReply * /*reply*/) {
  grpc::Status status = check_token(*context, tracker_.options().token);
  if (status.ok()) status = check_name("lease_id", request->lease_id());
  if (!status.ok()) return finish(context, status);
  if (!tracker_.release(request->lease_id(), request->runner_failed())) {
    return finish(context,
                  grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown or revoked lease " + request->lease_id()));
  }
  return finish(context, grpc::Status::OK);
}

grpc::ServerWriteReactor<kiln::v1::HoldLeaseReply> *TrackerService::HoldLease(
    grpc::CallbackServerContext *context, const kiln::v1::HoldLeaseRequest *request) {
  grpc::Status status = check_token(*context, tracker_.options().token);
  if (status.ok()) status = check_name("lease_id", request->lease_id());
  if (status.ok() && !tracker_.lease_active(request->lease_id())) {
    status = grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown or revoked lease " + request->lease_id());
  }
  return new HoldLeaseReactor(tracker_, request->lease_id(), std::move(status));
}

grpc::ServerUnaryReactor *TrackerService::Summary(grpc::CallbackServerContext *context,
                                                  const kiln::v1::SummaryRequest * /*request*/,
                                                  kiln::v1::SummaryReply *reply) {
  grpc::Status status = check_token(*context, tracker_.options().token);
  if (!status.ok()) return finish(context, status);
  const TrackerSummary summary = tracker_.full_summary();
  for (const DeviceSummary &device : summary.devices) {
    kiln::v1::DeviceSummary *entry = reply->add_devices();
    entry->set_device_key(device.device_key);
    entry->set_free_runners(static_cast<uint32_t>(device.free_runners));
    entry->set_busy_runners(static_cast<uint32_t>(device.busy_runners));
    entry->set_queue_length(static_cast<uint32_t>(device.queue_length));
    entry->set_quarantined_runners(static_cast<uint32_t>(device.quarantined_runners));
    for (const std::string &target : device.targets) entry->add_targets(target);
  }
  for (const RunnerSummary &runner : summary.runners) {
    kiln::v1::RunnerSummary *entry = reply->add_runners();
    entry->set_runner_id(runner.runner_id);
    entry->set_address(runner.registration.address);
    entry->set_device_key(runner.registration.device_key);
    entry->set_target(runner.registration.target);
    switch (runner.state) {
      case RunnerState::kFree:
        entry->set_state(kiln::v1::RUNNER_STATE_FREE);
        break;
      case RunnerState::kBusy:
        entry->set_state(kiln::v1::RUNNER_STATE_BUSY);
        break;
      case RunnerState::kQuarantined:
        entry->set_state(kiln::v1::RUNNER_STATE_QUARANTINED);
        break;
    }
    entry->set_quarantine_reason(runner.quarantine_reason);
    entry->set_quarantine_left_ms(clamp_ms(runner.quarantine_left));
    entry->set_since_heartbeat_ms(clamp_ms(runner.since_heartbeat));
    entry->set_since_registered_ms(clamp_ms(runner.since_registered));
    entry->set_leases_served(runner.leases_served);
    entry->set_leases_failed(runner.leases_failed);
    entry->set_leases_expired(runner.leases_expired);
    entry->set_consecutive_failures(static_cast<uint32_t>(runner.consecutive_failures));
  }
  return finish(context, grpc::Status::OK);
}

}  // namespace kiln::rpc
