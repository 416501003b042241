#pragma once
// Tracker: the device farm's book of runners and leases, with no gRPC in it.
//
// Runners register under a device key and must heartbeat; one that stays silent for longer than
// the heartbeat timeout is dropped and its lease revoked. A lease must be used: when its runner
// reports no open measurement session under it for longer than the lease idle timeout (its holder
// crashed or forgot it), it is revoked. A runner whose leases end in failure several times in a
// row (reported on release, or by going silent) is quarantined: it stays registered but is not
// handed out until the quarantine ends; failures are counted per runner address, so they survive
// a re-registration. A runner reported failed is also held back until its next heartbeat proves
// it alive, so that a runner that died is not handed out again while the tracker waits for its
// heartbeat timeout. Tuners ask for a runner of a device key
// with a priority and a deadline; per device key, waiting requests are served highest priority
// first and in arrival order within a priority, and a request that no runner picks up before its
// deadline is answered "deadline exceeded", never left waiting. A background thread enforces both
// timeouts. Every method is thread-safe. Completion callbacks run without the tracker's lock held,
// either on the calling thread or on the tracker's thread.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace kiln::rpc {

class EventLog;

struct TrackerOptions {
  // The farm's shared token, required on every call of the gRPC service. Must not be empty.
  std::string token;
  // How often runners are asked to heartbeat.
  std::chrono::milliseconds heartbeat_interval{1000};
  // A runner that has not heartbeaten for this long is dropped.
  std::chrono::milliseconds heartbeat_timeout{5000};
  // The longest wait an acquire may ask for.
  std::chrono::milliseconds max_wait{std::chrono::hours(1)};
  // A lease not used by a measurement session for this long is revoked.
  std::chrono::milliseconds lease_idle_timeout{std::chrono::seconds(60)};
  // Consecutive failed leases after which a runner is quarantined, and for how long.
  int quarantine_after = 3;
  std::chrono::milliseconds quarantine_duration{std::chrono::seconds(60)};
  // Where the tracker logs runners registered, lost and quarantined and leases expired; none when
  // null. Must outlive the tracker.
  EventLog *events = nullptr;
};

// What the tracker has done since it started, for its metrics.
struct TrackerCounts {
  uint64_t runners_registered = 0;
  uint64_t runners_lost = 0;  // dropped for a heartbeat timeout
  uint64_t leases_granted = 0;
  uint64_t leases_released = 0;  // given back by their holder
  uint64_t leases_expired = 0;   // revoked: unused for the idle timeout, or their runner was lost
};

// What a runner tells the tracker when it registers.
struct RunnerRegistration {
  std::string address;     // where tuners reach its Runner service
  std::string device_key;  // its class of identical devices
  std::string target;      // its canonical target string
};

// A runner handed to a tuner.
struct Lease {
  std::string lease_id;
  std::string runner_id;
  RunnerRegistration runner;
};

// How an acquire ended.
enum class AcquireStatus {
  kGranted,           // `lease` holds the runner
  kDeadlineExceeded,  // no runner freed up before the deadline
  kCancelled,         // the caller withdrew the request
  kShutdown,          // the tracker is shutting down
  kNoRunner,          // no runner is registered under the device key (see acquire())
};

struct AcquireOutcome {
  AcquireStatus status = AcquireStatus::kShutdown;
  Lease lease;          // set when status is kGranted
  std::string message{};  // for kNoRunner: the device key, and the keys that have runners
};

struct DeviceSummary {
  std::string device_key;
  int free_runners = 0;
  int busy_runners = 0;
  int queue_length = 0;
  int quarantined_runners = 0;
  // The targets its registered runners serve, sorted, each once.
  std::vector<std::string> targets;
};

// What a registered runner is doing now.
enum class RunnerState {
  kFree,         // registered, holds no lease, may be handed out
  kBusy,         // holds a lease
  kQuarantined,  // held back: quarantined after failed leases, or reported failed and not yet heartbeaten
};

// One registered runner, as the tracker sees it.
struct RunnerSummary {
  std::string runner_id;
  RunnerRegistration registration;
  RunnerState state = RunnerState::kFree;
  // Why it is held back (empty unless quarantined), and for how much longer (zero when it waits
  // for a heartbeat rather than for the end of a quarantine).
  std::string quarantine_reason;
  std::chrono::milliseconds quarantine_left{0};
  std::chrono::milliseconds since_heartbeat{0};
  std::chrono::milliseconds since_registered{0};
  // Leases granted to it since it registered, and how those that ended ended: released with
  // `runner_failed`, or revoked as unused for the lease idle timeout.
  uint64_t leases_served = 0;
  uint64_t leases_failed = 0;
  uint64_t leases_expired = 0;
  // Failures of its address in a row (failed leases and lost heartbeats) since the last clean
  // release or the last quarantine; reaching `quarantine_after` quarantines it.
  int consecutive_failures = 0;
};

// The tracker's state at one moment: the device keys and every registered runner.
struct TrackerSummary {
  std::vector<DeviceSummary> devices;  // as Tracker::summary()
  std::vector<RunnerSummary> runners;  // sorted by device key, then address
};

class Tracker {
 public:
  using Clock = std::chrono::steady_clock;
  using AcquireDone = std::function<void(AcquireOutcome)>;

  // Throws kiln::UserError when the options are unusable (empty token, non-positive intervals).
  explicit Tracker(TrackerOptions options);
  Tracker(const Tracker &) = delete;
  Tracker &operator=(const Tracker &) = delete;
  // Shuts down (see shutdown()).
  ~Tracker();

  const TrackerOptions &options() const { return options_; }

  // Registers a runner and returns its new runner id. A runner already registered at the same
  // address is dropped first, and its lease revoked.
  std::string register_runner(RunnerRegistration runner);
  // Renews a runner's registration; `active_lease` is the lease of the measurement session it is
  // serving ("" when none), which keeps that lease from expiring as idle. Returns the lease it
  // holds ("" while free), or nullopt when the runner is unknown (never registered, or dropped).
  std::optional<std::string> heartbeat(const std::string &runner_id, const std::string &active_lease = "");

  // Asks for a runner of `device_key`. `done` is called exactly once: at once when a runner is
  // free, later when one frees up, or with kDeadlineExceeded at `deadline`. When no runner at all
  // is registered under the key (none ever was, or all of them died), waiting is pointless:
  // `done` gets kNoRunner at once, or as soon as the last runner of the key is dropped. In the
  // tracker's first heartbeat timeout, while the runners of a restarted tracker register again,
  // requests wait instead. Returns a request id for cancel().
  uint64_t acquire(const std::string &device_key, int priority, Clock::time_point deadline, AcquireDone done);
  // Withdraws a waiting request; its `done` gets kCancelled. No effect once it has completed.
  void cancel(uint64_t request_id);
  // Returns a leased runner to the free runners. `runner_failed` reports that the runner failed
  // under the lease (counts toward its quarantine); a clean release resets the count. False when
  // the lease is unknown or revoked.
  bool release(const std::string &lease_id, bool runner_failed = false);
  // Whether `lease_id` is a lease the tracker has granted and not yet taken back.
  bool lease_active(const std::string &lease_id) const;

  // One entry per device key that has runners or waiting requests, sorted by device key.
  std::vector<DeviceSummary> summary() const;
  // The device keys and every registered runner, taken under one lock.
  TrackerSummary full_summary() const;
  TrackerCounts counts() const;

  // Answers every waiting request with kShutdown and stops the background thread; later acquires
  // complete with kShutdown at once. Safe to call more than once.
  void shutdown();

 private:
  struct Runner {
    std::string id;
    RunnerRegistration registration;
    Clock::time_point last_heartbeat;
    std::string lease_id;                   // "" while free
    Clock::time_point lease_used;           // grant, or the last heartbeat reporting a session under it
    Clock::time_point quarantined_until{};  // held back until then
    bool suspect = false;                   // reported failed; held back until it heartbeats
    Clock::time_point registered;
    uint64_t leases_served = 0;
    uint64_t leases_failed = 0;
    uint64_t leases_expired = 0;
  };
  // Failure history of a runner address.
  struct Health {
    int consecutive_failures = 0;
    Clock::time_point quarantined_until{};
    std::string quarantine_reason;  // why the last quarantine began
  };
  struct Request {
    uint64_t id;
    std::string device_key;
    int priority;
    Clock::time_point deadline;
    AcquireDone done;
  };
  // Waiting requests of one device key in service order: higher priority first, then arrival.
  using QueueKey = std::tuple<int, uint64_t>;  // (-priority, request id)
  struct DeviceQueue {
    std::deque<std::string> free_runners;  // runner ids, longest free first
    std::map<QueueKey, uint64_t> waiting;  // -> request id
  };
  using Completion = std::pair<AcquireDone, AcquireOutcome>;

  std::string new_id(const char *prefix);
  // Each of these runs with mutex_ held and collects callbacks to run after unlocking.
  void drop_runner(const std::string &runner_id);
  // Takes the lease off its runner; the runner becomes free (or stays held back if quarantined).
  void end_lease(Runner &runner, bool failed, std::vector<Completion> &completions);
  // `what` names the failure for the quarantine's reason ("a lease released as failed").
  void record_failure(const std::string &address, Clock::time_point now, const char *what);
  bool quarantined(const Runner &runner, Clock::time_point now) const {
    return runner.suspect || runner.quarantined_until > now;
  }
  void dispatch(const std::string &device_key, std::vector<Completion> &completions);
  void finish_request(uint64_t request_id, AcquireStatus status, std::vector<Completion> &out,
                      std::string message = "");
  // Answers the waiting requests of `device_key` with kNoRunner when no runner is registered
  // under it and the start-up grace (a heartbeat timeout) is over.
  void refuse_without_runners(const std::string &device_key, Clock::time_point now,
                              std::vector<Completion> &completions);
  void expire(Clock::time_point now, std::vector<Completion> &completions);
  Clock::time_point next_wakeup() const;
  void run_timer();
  static void run(std::vector<Completion> &completions);

  const TrackerOptions options_;
  const Clock::time_point started_ = Clock::now();
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::mt19937_64 random_;
  uint64_t next_request_id_ = 1;
  std::map<std::string, Runner> runners_;                       // by runner id
  std::map<std::string, std::string> leases_;                   // lease id -> runner id
  std::map<std::string, DeviceQueue> devices_;                  // by device key
  std::map<std::string, Health> health_;                        // by runner address
  std::map<uint64_t, Request> requests_;                        // waiting requests by id
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;  // (deadline, request id)
  TrackerCounts counts_;
  std::thread timer_;
};

}  // namespace kiln::rpc
