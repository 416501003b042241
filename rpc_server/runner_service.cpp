#include "rpc_server/runner_service.h"

#include <chrono>
#include <condition_variable>
#include <optional>
#include <thread>
#include <utility>

#include "compiler/driver/target.h"
#include "contracts/error.h"
#include "deploy/version.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/shared_token.h"

namespace kiln::rpc {

namespace {

// Whether `requested` names the runner's (concrete) target in any spelling, "-mcpu=native" being
// this host's CPU (driver::concrete_target); a malformed string names none.
bool is_target(const std::string &requested, const std::string &runner_target) {
  try {
    return driver::concrete_target(requested) == runner_target;
  } catch (const UserError &) {
    return false;
  }
}

grpc::Status invalid(const std::string &message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); }

// A request the measurement pool refused, as the client sees it: the status, and the message
// after `context`. Both reasons are INVALID_ARGUMENT, which clients do not retry on another
// runner: RESOURCE_EXHAUSTED would suggest that the same request could succeed later, and a
// request over the limits never does.
grpc::Status rejected(const MeasureRejection &rejection, const std::string &context) {
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
  switch (rejection.reason) {
    case MeasureRejection::Reason::kMalformed:
    case MeasureRejection::Reason::kOverLimit:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
  }
  return grpc::Status(code, context + rejection.message);
}

// Sets `cancel` when the call is cancelled (the client went away or gave up), checking every
// few milliseconds until stopped.
class CancelWatch {
 public:
  CancelWatch(grpc::ServerContext *context, std::atomic<bool> &cancel)
      : thread_([this, context, &cancel] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_) {
            if (context->IsCancelled()) {
              cancel = true;
              return;
            }
            wake_.wait_for(lock, std::chrono::milliseconds(20));
          }
        }) {}
  ~CancelWatch() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

std::vector<std::string> host_cpu_features() {
  std::vector<std::string> features;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) features.push_back("sse4.2");
  if (__builtin_cpu_supports("avx")) features.push_back("avx");
  if (__builtin_cpu_supports("avx2")) features.push_back("avx2");
  if (__builtin_cpu_supports("fma")) features.push_back("fma");
  if (__builtin_cpu_supports("avx512f")) features.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) features.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) features.push_back("avx512vl");
  if (__builtin_cpu_supports("avx512vnni")) features.push_back("avx512vnni");
#elif defined(__aarch64__)
  features.push_back("neon");
#endif
  return features;
}

RunnerService::RunnerService(RunnerIdentity identity, MeasurePool *pool, RunnerServiceOptions options)
    : identity_(std::move(identity)), pool_(pool), options_(std::move(options)) {
  if (identity_.cpu_features.empty()) identity_.cpu_features = host_cpu_features();
  identity_.target = driver::concrete_target(identity_.target);
}

grpc::Status RunnerService::Info(grpc::ServerContext *context, const kiln::v1::InfoRequest * /*request*/,
                                 kiln::v1::InfoReply *reply) {
  if (!options_.token.empty()) {
    grpc::Status status = check_token(*context, options_.token);
    if (!status.ok()) return status;
  }
  reply->set_device_key(identity_.device_key);
  reply->set_target(identity_.target);
  reply->set_kiln_version(kiln::deploy::version());
  reply->set_cpu_cores(std::thread::hardware_concurrency());
  for (const std::string &feature : identity_.cpu_features) reply->add_cpu_features(feature);
  for (const auto &[name, version] : identity_.templates) {
    kiln::v1::TemplateVersion *entry = reply->add_templates();
    entry->set_name(name);
    entry->set_version(version);
  }
  if (identity_.gpu) *reply->mutable_gpu() = *identity_.gpu;
  return grpc::Status::OK;
}

std::string RunnerService::active_lease() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return active_lease_;
}

grpc::Status RunnerService::Measure(
    grpc::ServerContext *context, grpc::ServerReaderWriter<kiln::v1::MeasureReply, kiln::v1::MeasureRequest> *stream) {
  if (!options_.token.empty()) {
    grpc::Status status = check_token(*context, options_.token);
    if (!status.ok()) return status;
  }
  if (pool_ == nullptr && !options_.measure_batch) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this runner does not measure");
  }
  kiln::v1::MeasureRequest request;
  if (!stream->Read(&request)) return grpc::Status::OK;  // the client closed at once
  if (!request.has_session()) {
    return invalid("the first request of a measurement session must be a session, not a batch");
  }
  const kiln::v1::MeasureSession &session = request.session();
  if (session.lease_id().empty() || session.lease_id().size() > 256) {
    return invalid("session.lease_id must be 1 to 256 bytes");
  }
  if (auto rejection = check_options(session.options(), MeasureLimits{})) {
    return rejected(*rejection, "session.options: ");
  }
  if (options_.accept_lease && !options_.accept_lease(session.lease_id())) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "lease " + session.lease_id() + " is not this runner's current lease");
  }
  {
    // A session whose client cancelled it ends within tens of milliseconds (the pool stops the
    // candidate in progress); its lease may already be handed on.
    std::unique_lock<std::mutex> lock(mutex_);
    session_closed_.wait_for(lock, std::chrono::seconds(1), [this] { return !session_open_; });
    if (session_open_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the runner is serving another measurement session");
    }
    session_open_ = true;
    active_lease_ = session.lease_id();
  }
  grpc::Status status = run_session(context, stream, session);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    session_open_ = false;
    active_lease_.clear();
  }
  session_closed_.notify_all();
  return status;
}

grpc::Status RunnerService::run_session(
    grpc::ServerContext *context, grpc::ServerReaderWriter<kiln::v1::MeasureReply, kiln::v1::MeasureRequest> *stream,
    const kiln::v1::MeasureSession &session) {
  kiln::v1::MeasureRequest request;
  while (stream->Read(&request)) {
    if (!request.has_batch()) {
      return invalid("a measurement session is opened once; later requests must be batches");
    }
    const kiln::v1::MeasureBatch &batch = request.batch();
    if (batch.configs_size() == 0) return invalid("batch " + std::to_string(batch.batch_id()) + " has no configs");
    if (static_cast<uint32_t>(batch.configs_size()) > options_.max_batch) {
      return invalid("batch " + std::to_string(batch.batch_id()) + " has " + std::to_string(batch.configs_size()) +
                     " configs; at most " + std::to_string(options_.max_batch) + " are allowed");
    }
    if (!is_target(batch.target().target(), identity_.target) ||
        (!batch.target().device_key().empty() && batch.target().device_key() != identity_.device_key)) {
      return invalid("batch target \"" + batch.target().target() + "\" (device key \"" + batch.target().device_key() +
                     "\") is not this runner's \"" + identity_.target + "\" (\"" + identity_.device_key + "\")");
    }
    std::vector<Candidate> candidates(static_cast<size_t>(batch.configs_size()));
    for (size_t i = 0; i < candidates.size(); ++i) {
      candidates[i].workload = batch.workload();
      candidates[i].target = batch.target();
      candidates[i].config = batch.configs(static_cast<int>(i));
    }
    const std::string runner_id = options_.runner_id ? options_.runner_id() : "";
    std::atomic<bool> cancel{false};
    std::optional<MeasureRejection> rejection;
    {
      CancelWatch watch(context, cancel);
      auto on_result = [&](size_t position, const kiln::v1::MeasureResult &result) {
        kiln::v1::MeasureReply reply;
        reply.set_batch_id(batch.batch_id());
        reply.set_config_position(static_cast<uint32_t>(position));
        *reply.mutable_result() = result;
        if (!runner_id.empty()) reply.mutable_result()->set_runner_id(runner_id);
        if (!stream->Write(reply)) cancel = true;
      };
      rejection = options_.measure_batch ? options_.measure_batch(candidates, session.options(), on_result, &cancel)
                                         : pool_->measure(candidates, session.options(), on_result, &cancel);
    }
    if (rejection) return rejected(*rejection, "batch " + std::to_string(batch.batch_id()) + ": ");
    if (cancel || context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  }
  return grpc::Status::OK;
}

}  // namespace kiln::rpc
