#pragma once
// RunnerAgent: a runner's side of its tracker registration. A background thread registers the
// runner, heartbeats at the interval the tracker asks for (reporting the lease of the open
// measurement session), registers again when the tracker has dropped it, and keeps trying while
// the tracker is unreachable. A tracker that refuses the runner's credentials (UNAUTHENTICATED,
// PERMISSION_DENIED) is not retried: that is a configuration error, not a transient one.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/v1/workload.pb.h"
#include "rpc_server/farm_client.h"

namespace kiln::rpc {

class EventLog;

struct RunnerAgentOptions {
  Endpoint tracker;
  // Where tuners reach this runner's Runner service.
  std::string advertise_address;
  kiln::v1::Target target;
  // The lease of the open measurement session, "" when none.
  std::function<std::string()> active_lease;
  // Called once, on the thread that made the call, when the tracker refuses the runner's
  // credentials; the agent has stopped heartbeating by then. `message` says what happened and what to check.
  std::function<void(const std::string &message)> on_refused;
  // Where the agent logs its registrations and the tracker's failures; none when null. Must
  // outlive the agent.
  EventLog *events = nullptr;
};

class RunnerAgent {
 public:
  explicit RunnerAgent(RunnerAgentOptions options);
  // Stops the thread.
  ~RunnerAgent();
  RunnerAgent(const RunnerAgent &) = delete;
  RunnerAgent &operator=(const RunnerAgent &) = delete;

  // Waits until the runner is registered; false when `timeout` passes first.
  bool wait_registered(std::chrono::milliseconds timeout);
  // The id the tracker gave this runner ("" while unregistered).
  std::string runner_id() const;
  // True when `lease_id` is the lease the tracker has given this runner. A lease the agent has
  // not heard of yet (granted since the last heartbeat) is checked with a heartbeat at once.
  bool holds_lease(const std::string &lease_id);
  // Stops heartbeating (the tracker drops the runner after its heartbeat timeout).
  void stop();

 private:
  void run();
  // One heartbeat (or registration when unregistered); returns the wait until the next one.
  std::chrono::milliseconds step();

  RunnerAgentOptions options_;
  TrackerClient client_;
  mutable std::mutex mutex_;
  std::mutex call_mutex_;  // one tracker call at a time
  std::condition_variable wake_;
  bool stopping_ = false;
  bool refused_ = false;
  std::string runner_id_;
  std::string lease_id_;
  std::chrono::milliseconds interval_{1000};
  std::chrono::milliseconds retry_{200};
  std::thread thread_;
};

}  // namespace kiln::rpc
