#include "rpc_server/farm_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "rpc_server/shared_token.h"

namespace kiln::rpc {

namespace {

using Clock = std::chrono::steady_clock;

FarmError to_error(const std::string &what, const grpc::Status &status) {
  return FarmError(status.error_code(),
                   what + ": " + status_code_name(status.error_code()) +
                       (status.error_message().empty() ? std::string() : ": " + status.error_message()));
}

void set_timeout(grpc::ClientContext &context, std::chrono::milliseconds timeout) {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

kiln::v1::MeasureResult infra(const std::string &message) {
  kiln::v1::MeasureResult result;
  result.set_error(kiln::v1::INFRA);
  result.set_message(message);
  return result;
}

// Calls context.TryCancel() unless disarmed before `deadline`.
class Watchdog {
 public:
  Watchdog(grpc::ClientContext &context, Clock::time_point deadline)
      : thread_([this, &context, deadline] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!wake_.wait_until(lock, deadline, [this] { return disarmed_; })) {
            fired_ = true;
            context.TryCancel();
          }
        }) {}
  ~Watchdog() { disarm(); }
  void disarm() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      disarmed_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool fired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool disarmed_ = false;
  bool fired_ = false;
  std::thread thread_;
};

// Reports a wait through `report` (FarmClientOptions::on_wait) while it lives.
class WaitReporter {
 public:
  WaitReporter(const std::function<void(const AcquireWait &)> &report, const std::string &device_key,
               std::chrono::milliseconds notice_after) {
    if (!report) return;
    thread_ = std::thread([this, report, device_key, notice_after] {
      const Clock::time_point start = Clock::now();
      Clock::time_point next = start + notice_after;
      std::unique_lock<std::mutex> lock(mutex_);
      bool reported = false;
      while (!wake_.wait_until(lock, next, [this] { return done_; })) {
        lock.unlock();
        report({device_key, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start), false});
        lock.lock();
        reported = true;
        next += std::chrono::seconds(1);
      }
      if (reported) {
        lock.unlock();
        report({device_key, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start), true});
      }
    });
  }
  ~WaitReporter() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::string status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "STATUS_" + std::to_string(static_cast<int>(code));
  }
}

// ---- CallInterrupt ----

void CallInterrupt::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  if (call_) call_->TryCancel();
}

void CallInterrupt::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = false;
}

bool CallInterrupt::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

CallInterrupt::Scope::Scope(CallInterrupt *interrupt, grpc::ClientContext &context) : interrupt_(interrupt) {
  if (!interrupt_) return;
  std::lock_guard<std::mutex> lock(interrupt_->mutex_);
  interrupt_->call_ = &context;
  if (interrupt_->cancelled_) context.TryCancel();
}

CallInterrupt::Scope::~Scope() {
  if (!interrupt_) return;
  std::lock_guard<std::mutex> lock(interrupt_->mutex_);
  interrupt_->call_ = nullptr;
}

// ---- TrackerClient ----

TrackerClient::TrackerClient(Endpoint tracker)
    : endpoint_(std::move(tracker)),
      stub_(kiln::v1::Tracker::NewStub(make_channel(endpoint_.address, endpoint_.tls))) {}

void TrackerClient::prepare(grpc::ClientContext &context, std::chrono::milliseconds timeout) const {
  attach_token(context, endpoint_.token);
  set_timeout(context, timeout);
}

kiln::v1::AcquireReply TrackerClient::acquire(const std::string &device_key, int priority,
                                              std::chrono::milliseconds wait, CallInterrupt *interrupt) {
  grpc::ClientContext context;
  CallInterrupt::Scope scope(interrupt, context);
  // The tracker answers DEADLINE_EXCEEDED itself at `wait`; the call's own deadline is a
  // backstop against a tracker that does not answer at all.
  prepare(context, wait + std::chrono::seconds(10));
  kiln::v1::AcquireRequest request;
  request.set_device_key(device_key);
  request.set_priority(priority);
  request.set_wait_ms(wait.count());
  kiln::v1::AcquireReply reply;
  grpc::Status status = stub_->Acquire(&context, request, &reply);
  if (!status.ok()) throw to_error("acquire a runner of " + device_key, status);
  return reply;
}

bool TrackerClient::release(const std::string &lease_id, bool runner_failed) {
  grpc::ClientContext context;
  prepare(context, std::chrono::seconds(10));
  kiln::v1::ReleaseRequest request;
  request.set_lease_id(lease_id);
  request.set_runner_failed(runner_failed);
  kiln::v1::ReleaseReply reply;
  grpc::Status status = stub_->Release(&context, request, &reply);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return false;
  if (!status.ok()) throw to_error("release lease " + lease_id, status);
  return true;
}

std::unique_ptr<LeaseHold> TrackerClient::hold(const std::string &lease_id) {
  return std::make_unique<LeaseHold>(*stub_, endpoint_.token, lease_id);
}

LeaseHold::LeaseHold(kiln::v1::Tracker::Stub &stub, const std::string &token, const std::string &lease_id) {
  attach_token(context_, token);
  kiln::v1::HoldLeaseRequest request;
  request.set_lease_id(lease_id);
  thread_ = std::thread([this, &stub, request] {
    std::unique_ptr<grpc::ClientReader<kiln::v1::HoldLeaseReply>> reader = stub.HoldLease(&context_, request);
    kiln::v1::HoldLeaseReply ignored;
    while (reader->Read(&ignored)) {
    }
    reader->Finish();
  });
}

LeaseHold::~LeaseHold() {
  context_.TryCancel();
  thread_.join();
}

kiln::v1::SummaryReply TrackerClient::summary() {
  grpc::ClientContext context;
  prepare(context, std::chrono::seconds(10));
  kiln::v1::SummaryReply reply;
  grpc::Status status = stub_->Summary(&context, kiln::v1::SummaryRequest(), &reply);
  if (!status.ok()) throw to_error("tracker summary", status);
  return reply;
}

kiln::v1::RegisterReply TrackerClient::register_runner(const std::string &address, const kiln::v1::Target &target) {
  grpc::ClientContext context;
  prepare(context, std::chrono::seconds(5));
  kiln::v1::RegisterRequest request;
  request.set_address(address);
  *request.mutable_target() = target;
  kiln::v1::RegisterReply reply;
  grpc::Status status = stub_->Register(&context, request, &reply);
  if (!status.ok()) throw to_error("register with the tracker at " + endpoint_.address, status);
  return reply;
}

kiln::v1::HeartbeatReply TrackerClient::heartbeat(const std::string &runner_id, const std::string &active_lease) {
  grpc::ClientContext context;
  prepare(context, std::chrono::seconds(5));
  kiln::v1::HeartbeatRequest request;
  request.set_runner_id(runner_id);
  request.set_active_lease(active_lease);
  kiln::v1::HeartbeatReply reply;
  grpc::Status status = stub_->Heartbeat(&context, request, &reply);
  if (!status.ok()) throw to_error("heartbeat", status);
  return reply;
}

kiln::v1::InfoReply runner_info(const Endpoint &runner, std::chrono::milliseconds timeout) {
  auto stub = kiln::v1::Runner::NewStub(make_channel(runner.address, runner.tls));
  grpc::ClientContext context;
  attach_token(context, runner.token);
  set_timeout(context, timeout);
  kiln::v1::InfoReply reply;
  grpc::Status status = stub->Info(&context, kiln::v1::InfoRequest(), &reply);
  if (!status.ok()) throw to_error("info of the runner at " + runner.address, status);
  return reply;
}

// ---- RunnerSession ----

struct RunnerSession::Impl {
  CallInterrupt *interrupt = nullptr;
  kiln::v1::AcquireReply lease;
  kiln::v1::MeasureOptions options;
  std::unique_ptr<kiln::v1::Runner::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<kiln::v1::MeasureRequest, kiln::v1::MeasureReply>> stream;
  uint64_t next_batch = 1;
  bool closed = false;
  grpc::Status final_status;

  // The longest a batch of `n` configs may take before the runner counts as hung: every
  // candidate at its build and run timeouts (the runner's defaults where unset), plus slack.
  std::chrono::milliseconds batch_limit(size_t n) const {
    auto or_default = [](uint32_t value, uint32_t fallback) { return value ? value : fallback; };
    uint64_t per_config = uint64_t(or_default(options.build_timeout_ms(), 10000)) +
                          or_default(options.run_timeout_ms(), 10000) + options.cooldown_ms() + 1000;
    return std::chrono::milliseconds(per_config * n + 30000);
  }
};

RunnerSession::RunnerSession(const kiln::v1::AcquireReply &lease, const std::string &token, const TlsFiles &tls,
                             const kiln::v1::MeasureOptions &options, CallInterrupt *interrupt)
    : impl_(std::make_unique<Impl>()) {
  impl_->interrupt = interrupt;
  impl_->lease = lease;
  impl_->options = options;
  impl_->stub = kiln::v1::Runner::NewStub(make_channel(lease.address(), tls));
  attach_token(impl_->context, token);
}

RunnerSession::~RunnerSession() {
  if (impl_->stream && !impl_->closed) {
    impl_->context.TryCancel();
    impl_->stream->Finish();
  }
}

std::vector<kiln::v1::MeasureResult> RunnerSession::measure(const kiln::v1::Workload &workload,
                                                            const kiln::v1::Target &target,
                                                            const std::vector<kiln::v1::Config> &configs) {
  std::vector<kiln::v1::MeasureResult> results(configs.size());
  std::vector<bool> have(configs.size(), false);
  if (configs.empty()) return results;
  const std::string where = "runner " + impl_->lease.runner_id() + " at " + impl_->lease.address();
  if (broken_ || impl_->closed) {
    for (auto &result : results) result = infra(where + ": the session is already broken");
    return results;
  }
  Watchdog watchdog(impl_->context, Clock::now() + impl_->batch_limit(configs.size()));
  std::optional<CallInterrupt::Scope> interruptible(std::in_place, impl_->interrupt, impl_->context);
  bool ok = true;
  if (!impl_->stream) {
    impl_->stream = impl_->stub->Measure(&impl_->context);
    kiln::v1::MeasureRequest open;
    open.mutable_session()->set_lease_id(impl_->lease.lease_id());
    *open.mutable_session()->mutable_options() = impl_->options;
    ok = impl_->stream->Write(open);
  }
  const uint64_t batch_id = impl_->next_batch++;
  if (ok) {
    kiln::v1::MeasureRequest request;
    kiln::v1::MeasureBatch *batch = request.mutable_batch();
    batch->set_batch_id(batch_id);
    *batch->mutable_workload() = workload;
    *batch->mutable_target() = target;
    for (const auto &config : configs) *batch->add_configs() = config;
    ok = impl_->stream->Write(request);
  }
  size_t received = 0;
  kiln::v1::MeasureReply reply;
  while (ok && received < configs.size() && impl_->stream->Read(&reply)) {
    if (reply.batch_id() != batch_id || reply.config_position() >= configs.size() || have[reply.config_position()]) {
      continue;  // not an answer this batch is waiting for
    }
    have[reply.config_position()] = true;
    results[reply.config_position()] = std::move(*reply.mutable_result());
    ++received;
  }
  watchdog.disarm();
  interruptible.reset();
  if (received == configs.size()) return results;

  // The stream ended early: find out why.
  impl_->closed = true;
  broken_ = true;
  impl_->final_status = impl_->stream->Finish();
  const grpc::Status &status = impl_->final_status;
  if (impl_->interrupt && impl_->interrupt->cancelled()) {
    for (size_t i = 0; i < configs.size(); ++i) {
      if (!have[i]) results[i] = infra("cancelled");
    }
    return results;
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
      status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
      status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    throw to_error(where + " rejected the request", status);
  }
  std::string why = watchdog.fired() ? "stopped answering within the time the options allow"
                                     : "the measurement stream broke: " + status_code_name(status.error_code()) + " " +
                                           status.error_message();
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!have[i]) results[i] = infra(where + ": " + why);
  }
  return results;
}

grpc::Status RunnerSession::close() {
  if (!impl_->stream || impl_->closed) {
    impl_->closed = true;
    return impl_->final_status;
  }
  impl_->closed = true;
  Watchdog watchdog(impl_->context, Clock::now() + std::chrono::seconds(30));
  impl_->stream->WritesDone();
  kiln::v1::MeasureReply ignored;
  while (impl_->stream->Read(&ignored)) {
  }
  impl_->final_status = impl_->stream->Finish();
  return impl_->final_status;
}

// ---- FarmClient ----

FarmClient::FarmClient(FarmClientOptions options) : options_(std::move(options)), tracker_(options_.tracker) {}

std::vector<kiln::v1::MeasureResult> FarmClient::measure(const kiln::v1::Workload &workload,
                                                         const kiln::v1::Target &target,
                                                         const std::vector<kiln::v1::Config> &configs,
                                                         const kiln::v1::MeasureOptions &options) {
  interrupt_->reset();
  std::vector<kiln::v1::MeasureResult> results(configs.size());
  std::vector<size_t> pending(configs.size());
  for (size_t i = 0; i < pending.size(); ++i) pending[i] = i;
  const int attempts = std::max(1, options_.max_attempts);
  // How the last runner failed under its lease ("runner R at ADDR: ..."); "" while none has.
  std::string lost;
  for (int attempt = 1; attempt <= attempts && !pending.empty() && !interrupt_->cancelled(); ++attempt) {
    kiln::v1::AcquireReply lease;
    const Clock::time_point asked = Clock::now();
    auto report_wait = [&] {
      if (options_.waited) options_.waited(std::chrono::duration<double>(Clock::now() - asked).count());
    };
    try {
      WaitReporter reporter(options_.on_wait, target.device_key(), options_.wait_notice_after);
      lease = tracker_.acquire(target.device_key(), options_.priority, options_.acquire_wait, interrupt_.get());
    } catch (const FarmError &e) {
      report_wait();
      if (interrupt_->cancelled()) break;
      if (lost.empty()) throw;
      throw FarmError(e.code(), "lost the lease on " + lost + "; no other runner could be had: " + e.what());
    } catch (...) {
      report_wait();
      throw;
    }
    report_wait();
    set_held(lease.lease_id());
    // Goes away after the releases below: a process that dies holding the lease frees it at once.
    std::unique_ptr<LeaseHold> hold = tracker_.hold(lease.lease_id());
    std::vector<kiln::v1::Config> subset;
    for (size_t i : pending) subset.push_back(configs[i]);
    std::vector<kiln::v1::MeasureResult> got;
    bool failed = false;
    {
      RunnerSession session(lease, options_.tracker.token, options_.runner_tls, options, interrupt_.get());
      try {
        got = session.measure(workload, target, subset);
      } catch (const FarmError &) {
        set_held("");
        tracker_.release(lease.lease_id(), false);
        throw;
      }
      // A session this client cancelled says nothing about the runner.
      failed = session.broken() && !interrupt_->cancelled();
      if (!session.broken()) failed = !session.close().ok();
    }
    set_held("");
    try {
      tracker_.release(lease.lease_id(), failed);
    } catch (const FarmError &) {
      // The tracker is unreachable; the lease expires on its own.
    }
    std::vector<size_t> again;
    if (failed) {
      lost = "runner " + lease.runner_id() + " at " + lease.address();
      for (const kiln::v1::MeasureResult &r : got) {
        if (r.error() == kiln::v1::INFRA && !r.message().empty()) {
          lost = r.message();
          break;
        }
      }
    }
    for (size_t k = 0; k < pending.size(); ++k) {
      results[pending[k]] = std::move(got[k]);
      if (results[pending[k]].error() == kiln::v1::INFRA && attempt < attempts) {
        again.push_back(pending[k]);
      }
    }
    pending = std::move(again);
  }
  if (interrupt_->cancelled()) {
    // What is still pending (not tried yet, or INFRA to retry) is cancelled, not retried.
    for (size_t i : pending) results[i] = infra("cancelled");
  }
  return results;
}

void FarmClient::cancel() { interrupt_->cancel(); }

std::string FarmClient::held_lease() const {
  std::lock_guard<std::mutex> lock(held_->mutex);
  return held_->lease;
}

void FarmClient::set_held(const std::string &lease) {
  std::lock_guard<std::mutex> lock(held_->mutex);
  held_->lease = lease;
}

}  // namespace kiln::rpc
