#pragma once
// The farm's client side: TrackerClient speaks to the tracker (tuners acquire and release
// runners, runners register and heartbeat), RunnerSession drives one leased runner's measurement
// stream, and FarmClient puts them together for a tuner: acquire -> stream -> release, with the
// trials of a runner that fails retried on another one.
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "kiln/v1/runner.grpc.pb.h"
#include "contracts/error.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "rpc_server/credentials.h"

namespace kiln::rpc {

// A farm call that failed, with its gRPC status code: the farm is unreachable or refused the
// caller (a wrong token, no runner in time, a request it rejects). The caller can act on each, so
// it is a user error.
class FarmError : public UserError {
 public:
  FarmError(grpc::StatusCode code, const std::string &message) : UserError(message), code_(code) {}
  grpc::StatusCode code() const { return code_; }

 private:
  grpc::StatusCode code_;
};

// "UNAVAILABLE", "DEADLINE_EXCEEDED", ...
std::string status_code_name(grpc::StatusCode code);

// Lets another thread cancel the gRPC call a client is making: the client names each call's
// context while the call runs (a Scope), and cancel() cancels the call running, and every call
// entered after it until reset(). Thread-safe.
class CallInterrupt {
 public:
  void cancel();
  void reset();
  bool cancelled() const;

  // Names `context` as the call running for the scope's life; cancels it at once when the
  // interrupt is already cancelled. A null interrupt does nothing.
  class Scope {
   public:
    Scope(CallInterrupt *interrupt, grpc::ClientContext &context);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

   private:
    CallInterrupt *interrupt_;
  };

 private:
  mutable std::mutex mutex_;
  bool cancelled_ = false;
  grpc::ClientContext *call_ = nullptr;
};

// Where a farm service is and how to reach it.
struct Endpoint {
  std::string address;
  std::string token;
  TlsFiles tls;
};

class LeaseHold;

class TrackerClient {
 public:
  explicit TrackerClient(Endpoint tracker);

  // Waits up to `wait` for a runner of `device_key`. Throws FarmError (DEADLINE_EXCEEDED when
  // none frees up in time; CANCELLED when `interrupt` cancels the wait).
  kiln::v1::AcquireReply acquire(const std::string &device_key, int priority, std::chrono::milliseconds wait,
                                 CallInterrupt *interrupt = nullptr);
  // Gives the runner back; false when the tracker no longer knows the lease (revoked). Throws
  // FarmError for other failures.
  bool release(const std::string &lease_id, bool runner_failed = false);
  // Ties the lease to this process's connection until the returned object goes away (see
  // LeaseHold). Never throws for a failure of the tracker: the lease idle timeout still applies.
  std::unique_ptr<LeaseHold> hold(const std::string &lease_id);
  kiln::v1::SummaryReply summary();
  kiln::v1::RegisterReply register_runner(const std::string &address, const kiln::v1::Target &target);
  // Throws FarmError; NOT_FOUND when the tracker has dropped the runner.
  kiln::v1::HeartbeatReply heartbeat(const std::string &runner_id, const std::string &active_lease);

  const Endpoint &endpoint() const { return endpoint_; }

 private:
  void prepare(grpc::ClientContext &context, std::chrono::milliseconds timeout) const;

  Endpoint endpoint_;
  std::unique_ptr<kiln::v1::Tracker::Stub> stub_;
};

// While a LeaseHold lives, its HoldLease call to the tracker stays open: if this process dies with
// the lease (a crash, SIGKILL), the tracker sees the call end and releases the lease at once.
// Release the lease before the hold goes away: destroying the hold ends the call, which releases a
// lease still held, as a clean release.
class LeaseHold {
 public:
  LeaseHold(kiln::v1::Tracker::Stub &stub, const std::string &token, const std::string &lease_id);
  ~LeaseHold();
  LeaseHold(const LeaseHold &) = delete;
  LeaseHold &operator=(const LeaseHold &) = delete;

 private:
  grpc::ClientContext context_;
  std::thread thread_;
};

// Describes a runner (its Info).
kiln::v1::InfoReply runner_info(const Endpoint &runner, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// One measurement session on a leased runner: one stream for many batches.
class RunnerSession {
 public:
  // Opens the stream to lease.address() under the lease. Nothing is sent over the network
  // until the first measure(). `interrupt`, when given, can cancel the stream from another
  // thread: the configs without a result then come back INFRA "cancelled".
  RunnerSession(const kiln::v1::AcquireReply &lease, const std::string &token, const TlsFiles &tls,
                const kiln::v1::MeasureOptions &options, CallInterrupt *interrupt = nullptr);
  ~RunnerSession();
  RunnerSession(const RunnerSession &) = delete;
  RunnerSession &operator=(const RunnerSession &) = delete;

  // Measures `configs` of `workload`; one result per config, in order. When the stream breaks
  // (the runner died, the network failed, the runner refused the lease or stopped answering
  // within the time the options allow) the configs without a result come back as INFRA and the
  // session is broken(). Throws FarmError when the runner rejects the request itself
  // (INVALID_ARGUMENT, UNAUTHENTICATED, RESOURCE_EXHAUSTED for a message over the size limit):
  // retrying elsewhere would not help.
  std::vector<kiln::v1::MeasureResult> measure(const kiln::v1::Workload &workload, const kiln::v1::Target &target,
                                               const std::vector<kiln::v1::Config> &configs);
  bool broken() const { return broken_; }
  // Closes the stream; returns the runner's final status (OK after a clean session).
  grpc::Status close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool broken_ = false;
};

// Where a FarmClient's wait for a lease stands (FarmClientOptions::on_wait).
struct AcquireWait {
  std::string device_key;
  std::chrono::milliseconds waited{0};
  bool done = false;  // the wait has ended, with a lease or not
};

struct FarmClientOptions {
  Endpoint tracker;
  // The farm's TLS settings for runners (the token is the tracker's).
  TlsFiles runner_tls;
  int priority = 0;
  // How long to wait for a runner.
  std::chrono::milliseconds acquire_wait{std::chrono::seconds(60)};
  // A trial answered INFRA is measured again on another lease, up to this many attempts in all.
  int max_attempts = 3;
  // Called with the seconds each acquire waited for a runner (granted or not); none when empty.
  std::function<void(double seconds)> waited;
  // Called while measure() waits for a lease: when no lease has come after `wait_notice_after`,
  // then about every second, and once with `done` set when the wait ends; never for a lease
  // granted sooner. Called on a thread of the client's, never concurrently.
  std::function<void(const AcquireWait &)> on_wait;
  std::chrono::milliseconds wait_notice_after{300};
};

class FarmClient {
 public:
  explicit FarmClient(FarmClientOptions options);

  // Measures `configs` on runners of target.device_key(): acquires a runner, streams the
  // configs, releases it (reporting a failed runner), and retries the trials that came back
  // INFRA on another lease. One result per config, in order. Throws FarmError when no runner can
  // be had (DEADLINE_EXCEEDED; after a runner failed under a lease, the message names that runner
  // and how it failed) or a runner rejects the request (INVALID_ARGUMENT, UNAUTHENTICATED).
  std::vector<kiln::v1::MeasureResult> measure(const kiln::v1::Workload &workload, const kiln::v1::Target &target,
                                               const std::vector<kiln::v1::Config> &configs,
                                               const kiln::v1::MeasureOptions &options);

  TrackerClient &tracker() { return tracker_; }

  // Stops a measure() running on another thread soon: the Acquire it waits in or the measurement
  // stream it reads from is cancelled, the lease is released (the runner is not reported as
  // failed), nothing is retried, and every config without a result comes back INFRA "cancelled".
  // A no-op when no measure() runs (the next one starts afresh). Thread-safe.
  void cancel();

  // The lease a measure() holds at the moment, "" when none. Safe to call from another thread: a
  // command interrupted by a signal releases it (`kiln measure`), so that the runner is free at
  // once rather than after the tracker's lease idle timeout.
  std::string held_lease() const;

 private:
  struct Held {
    mutable std::mutex mutex;
    std::string lease;
  };
  void set_held(const std::string &lease);

  FarmClientOptions options_;
  TrackerClient tracker_;
  std::shared_ptr<Held> held_ = std::make_shared<Held>();
  std::shared_ptr<CallInterrupt> interrupt_ = std::make_shared<CallInterrupt>();
};

}  // namespace kiln::rpc
