#include "rpc_server/runner_agent.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "rpc_server/credentials.h"
#include "rpc_server/event_log.h"

namespace kiln::rpc {

RunnerAgent::RunnerAgent(RunnerAgentOptions options) : options_(std::move(options)), client_(options_.tracker) {
  thread_ = std::thread([this] { run(); });
}

RunnerAgent::~RunnerAgent() { stop(); }

void RunnerAgent::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool RunnerAgent::wait_registered(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return wake_.wait_for(lock, timeout, [this] { return !runner_id_.empty() || stopping_; }) && !runner_id_.empty();
}

std::string RunnerAgent::runner_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return runner_id_;
}

bool RunnerAgent::holds_lease(const std::string &lease_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!lease_id.empty() && lease_id == lease_id_) return true;
  }
  step();  // the tracker may have granted it since the last heartbeat
  std::lock_guard<std::mutex> lock(mutex_);
  return !lease_id.empty() && lease_id == lease_id_;
}

std::chrono::milliseconds RunnerAgent::step() {
  std::lock_guard<std::mutex> call(call_mutex_);
  std::string id = runner_id();
  try {
    if (id.empty()) {
      kiln::v1::RegisterReply reply = client_.register_runner(options_.advertise_address, options_.target);
      std::lock_guard<std::mutex> lock(mutex_);
      runner_id_ = reply.runner_id();
      lease_id_.clear();
      interval_ = std::chrono::milliseconds(std::max<uint32_t>(reply.heartbeat_interval_ms(), 10));
      retry_ = std::chrono::milliseconds(200);
      wake_.notify_all();
      if (options_.events) {
        options_.events->info("registered", {{"tracker", options_.tracker.address}, {"runner", runner_id_}});
      }
      return interval_;
    }
    kiln::v1::HeartbeatReply reply = client_.heartbeat(id, options_.active_lease ? options_.active_lease() : "");
    std::lock_guard<std::mutex> lock(mutex_);
    lease_id_ = reply.lease_id();
    retry_ = std::chrono::milliseconds(200);
    return interval_;
  } catch (const FarmError &e) {
    if (e.code() == grpc::StatusCode::UNAUTHENTICATED || e.code() == grpc::StatusCode::PERMISSION_DENIED) {
      const std::string message = "the tracker at " + options_.tracker.address + " refused this runner (" + e.what() +
                                  "): check that --token-file (or $" + kTokenEnvironmentVariable +
                                  ") holds the farm's token, and the TLS files; not retrying";
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        first = !refused_;
        refused_ = true;
      }
      wake_.notify_all();
      if (first && options_.on_refused) options_.on_refused(message);
      return std::chrono::milliseconds(0);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (e.code() == grpc::StatusCode::NOT_FOUND) {
      // Dropped by the tracker (it restarted, or we were silent too long): register again now.
      if (options_.events) options_.events->warn("dropped_by_tracker", {{"runner", runner_id_}});
      runner_id_.clear();
      lease_id_.clear();
      return std::chrono::milliseconds(0);
    }
    if (options_.events) {
      options_.events->warn("tracker_unreachable", {{"tracker", options_.tracker.address},
                                                    {"error", std::string(e.what())},
                                                    {"retry_ms", static_cast<int64_t>(retry_.count())}});
    }
    std::chrono::milliseconds wait = retry_;
    retry_ = std::min(retry_ * 2, std::chrono::milliseconds(5000));
    return wait;
  }
}

void RunnerAgent::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    std::chrono::milliseconds wait = step();
    lock.lock();
    wake_.wait_for(lock, wait, [this] { return stopping_; });
  }
}

}  // namespace kiln::rpc
