// The Tracker's book of runners, leases and waiting requests, without gRPC.
#include "rpc_server/tracker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "contracts/error.h"

namespace kiln::rpc {
namespace {

using namespace std::chrono_literals;
using Clock = Tracker::Clock;

TrackerOptions options(std::chrono::milliseconds heartbeat_timeout = 10s) {
  TrackerOptions out;
  out.token = "secret";
  out.heartbeat_interval = 50ms;
  out.heartbeat_timeout = heartbeat_timeout;
  return out;
}

// Collects the outcomes of acquires, labelled, in the order they complete.
struct Outcomes {
  std::mutex mutex;
  std::vector<std::pair<std::string, AcquireOutcome>> list;

  Tracker::AcquireDone record(std::string label) {
    return [this, label](AcquireOutcome outcome) {
      std::lock_guard<std::mutex> lock(mutex);
      list.emplace_back(label, std::move(outcome));
    };
  }
  std::vector<std::string> labels() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> out;
    for (const auto &entry : list) out.push_back(entry.first);
    return out;
  }
  AcquireOutcome at(size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    return list.at(i).second;
  }
};

TEST(TrackerTest, RefusesAnEmptyToken) {
  TrackerOptions bad = options();
  bad.token.clear();
  EXPECT_THROW(Tracker{bad}, kiln::UserError);
}

TEST(TrackerTest, ServesHigherPriorityFirstAndArrivalOrderWithinAPriority) {
  Tracker tracker(options());
  Outcomes outcomes;
  Clock::time_point later = Clock::now() + 10s;
  tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, later, outcomes.record("holder"));
  tracker.acquire("x86", 0, later, outcomes.record("low-first"));
  tracker.acquire("x86", 0, later, outcomes.record("low-second"));
  tracker.acquire("x86", 7, later, outcomes.record("high"));
  tracker.acquire("x86", -3, later, outcomes.record("negative"));
  tracker.acquire("x86", 0, later, outcomes.record("low-third"));
  ASSERT_EQ(outcomes.labels(), std::vector<std::string>{"holder"});
  for (size_t i = 0; i < 5; ++i) {
    AcquireOutcome held = outcomes.at(i);
    ASSERT_EQ(held.status, AcquireStatus::kGranted);
    EXPECT_TRUE(tracker.release(held.lease.lease_id));
  }
  EXPECT_EQ(outcomes.labels(),
            (std::vector<std::string>{"holder", "high", "low-first", "low-second", "low-third", "negative"}));
}

TEST(TrackerTest, ZeroWaitTakesOnlyAFreeRunner) {
  Tracker tracker(options());
  Outcomes outcomes;
  tracker.acquire("x86", 0, Clock::now(), outcomes.record("none-free"));
  tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, Clock::now(), outcomes.record("one-free"));
  ASSERT_EQ(outcomes.labels(), (std::vector<std::string>{"none-free", "one-free"}));
  EXPECT_EQ(outcomes.at(0).status, AcquireStatus::kDeadlineExceeded);
  EXPECT_EQ(outcomes.at(1).status, AcquireStatus::kGranted);
  EXPECT_EQ(outcomes.at(1).lease.runner.address, "127.0.0.1:1");
}

TEST(TrackerTest, CancelWithdrawsAWaitingRequest) {
  Tracker tracker(options());
  Outcomes outcomes;
  uint64_t id = tracker.acquire("x86", 0, Clock::now() + 10s, outcomes.record("waiter"));
  ASSERT_EQ(tracker.summary().at(0).queue_length, 1);
  tracker.cancel(id);
  tracker.cancel(id);  // a second cancel is harmless
  ASSERT_EQ(outcomes.labels(), std::vector<std::string>{"waiter"});
  EXPECT_EQ(outcomes.at(0).status, AcquireStatus::kCancelled);
  EXPECT_TRUE(tracker.summary().empty());
}

TEST(TrackerTest, ReregisteringAnAddressReplacesTheOldRunnerAndRevokesItsLease) {
  Tracker tracker(options());
  Outcomes outcomes;
  std::string old_id = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, Clock::now() + 10s, outcomes.record("holder"));
  std::string old_lease = outcomes.at(0).lease.lease_id;
  std::string new_id = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  EXPECT_NE(new_id, old_id);
  EXPECT_FALSE(tracker.heartbeat(old_id).has_value());
  EXPECT_EQ(tracker.heartbeat(new_id), std::optional<std::string>(""));
  EXPECT_FALSE(tracker.release(old_lease));
  ASSERT_EQ(tracker.summary().size(), 1u);
  EXPECT_EQ(tracker.summary()[0].free_runners, 1);
  EXPECT_EQ(tracker.summary()[0].busy_runners, 0);
}

TEST(TrackerTest, SummaryShowsEachKeysTargets) {
  Tracker tracker(options());
  tracker.register_runner({"127.0.0.1:1", "x86", "llvm -mcpu=znver4"});
  tracker.register_runner({"127.0.0.1:2", "x86", "llvm -mcpu=skylake"});
  tracker.register_runner({"127.0.0.1:3", "x86", "llvm -mcpu=znver4"});
  tracker.register_runner({"127.0.0.1:4", "arm", "llvm -mtriple=aarch64-linux-gnu"});
  const std::vector<DeviceSummary> summary = tracker.summary();
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[0].device_key, "arm");
  EXPECT_EQ(summary[0].targets, std::vector<std::string>{"llvm -mtriple=aarch64-linux-gnu"});
  EXPECT_EQ(summary[1].device_key, "x86");
  EXPECT_EQ(summary[1].targets, (std::vector<std::string>{"llvm -mcpu=skylake", "llvm -mcpu=znver4"}));
  EXPECT_EQ(summary[1].free_runners, 3);
}

TEST(TrackerTest, AKeyWithoutRunnersIsRefusedAtOnceAfterTheStartUpGrace) {
  Tracker tracker(options(/*heartbeat_timeout=*/300ms));
  Outcomes outcomes;
  const Clock::time_point later = Clock::now() + 30s;
  const std::string runner = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  std::atomic<bool> done{false};
  std::thread heartbeats([&] {
    while (!done) {
      tracker.heartbeat(runner);
      std::this_thread::sleep_for(20ms);
    }
  });
  // In the start-up grace a request waits: runners of a restarted tracker register again.
  tracker.acquire("arm", 0, later, outcomes.record("early"));
  EXPECT_TRUE(outcomes.labels().empty());
  // At the end of the grace it is told there is no runner, long before its deadline.
  const auto start = Clock::now();
  while (outcomes.labels().empty() && Clock::now() - start < 5s) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(outcomes.labels(), std::vector<std::string>{"early"});
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(outcomes.at(0).status, AcquireStatus::kNoRunner);
  EXPECT_EQ(outcomes.at(0).message, "no runner is registered under device key \"arm\" (device keys with runners: x86)");
  // After it, at once.
  tracker.acquire("arm", 0, later, outcomes.record("late"));
  ASSERT_EQ(outcomes.labels().size(), 2u);
  EXPECT_EQ(outcomes.at(1).status, AcquireStatus::kNoRunner);
  // A key with runners, all busy, waits.
  tracker.acquire("x86", 0, later, outcomes.record("holder"));
  tracker.acquire("x86", 0, later, outcomes.record("waiter"));
  EXPECT_EQ(outcomes.labels(), (std::vector<std::string>{"early", "late", "holder"}));
  EXPECT_EQ(outcomes.at(2).status, AcquireStatus::kGranted);
  EXPECT_TRUE(tracker.release(outcomes.at(2).lease.lease_id));  // to the waiter
  EXPECT_EQ(outcomes.labels().size(), 4u);
  done = true;
  heartbeats.join();
}

TEST(TrackerTest, RequestsWaitingForAKeyWhoseLastRunnerDiesAreToldAtOnce) {
  Tracker tracker(options(/*heartbeat_timeout=*/300ms));
  Outcomes outcomes;
  std::this_thread::sleep_for(350ms);  // past the start-up grace
  const std::string id = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, Clock::now() + 30s, outcomes.record("holder"));
  tracker.acquire("x86", 0, Clock::now() + 30s, outcomes.record("waiter"));
  ASSERT_EQ(outcomes.labels(), std::vector<std::string>{"holder"});
  // The runner stops heartbeating and is dropped after the timeout: the waiter learns it then.
  const auto start = Clock::now();
  while (outcomes.labels().size() < 2 && Clock::now() - start < 5s) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(outcomes.labels().size(), 2u);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(outcomes.at(1).status, AcquireStatus::kNoRunner);
  EXPECT_EQ(outcomes.at(1).message,
            "no runner is registered under device key \"x86\" (no runner is registered at all)");
  (void)id;
}

TEST(TrackerTest, ShutdownAnswersEveryWaitingRequest) {
  Outcomes outcomes;
  {
    Tracker tracker(options());
    tracker.acquire("x86", 0, Clock::now() + 10s, outcomes.record("waiter"));
    tracker.shutdown();
    ASSERT_EQ(outcomes.labels(), std::vector<std::string>{"waiter"});
    EXPECT_EQ(outcomes.at(0).status, AcquireStatus::kShutdown);
    tracker.acquire("x86", 0, Clock::now() + 10s, outcomes.record("late"));
  }
  ASSERT_EQ(outcomes.labels(), (std::vector<std::string>{"waiter", "late"}));
  EXPECT_EQ(outcomes.at(1).status, AcquireStatus::kShutdown);
}

TEST(TrackerTest, DeadlineIsMetByTheTrackerThread) {
  Tracker tracker(options());
  std::promise<AcquireOutcome> done;
  Clock::time_point start = Clock::now();
  tracker.acquire("x86", 0, start + 200ms, [&done](AcquireOutcome outcome) { done.set_value(std::move(outcome)); });
  std::future<AcquireOutcome> outcome = done.get_future();
  ASSERT_EQ(outcome.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(outcome.get().status, AcquireStatus::kDeadlineExceeded);
  EXPECT_GE(Clock::now() - start, 200ms);
}

// Waits up to `limit` for `condition`, polling.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = 5s) {
  Clock::time_point until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

TEST(TrackerTest, RepeatedFailuresQuarantineARunnerForAWhile) {
  TrackerOptions opts = options();
  opts.quarantine_after = 2;
  opts.quarantine_duration = 400ms;
  Tracker tracker(opts);
  Outcomes outcomes;
  std::string runner = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  // A failure, then a clean release: the count starts again. A runner reported failed is not
  // handed out again until it heartbeats.
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("a"));
  ASSERT_TRUE(tracker.release(outcomes.at(0).lease.lease_id, /*runner_failed=*/true));
  EXPECT_EQ(tracker.summary().at(0).free_runners, 0);
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("b"));
  EXPECT_EQ(outcomes.labels().size(), 1u);
  // Alive: "b" gets it at once (the heartbeat answers with b's lease).
  ASSERT_FALSE(tracker.heartbeat(runner).value_or("").empty());
  ASSERT_EQ(outcomes.labels().size(), 2u);
  ASSERT_TRUE(tracker.release(outcomes.at(1).lease.lease_id, false));
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("c"));
  ASSERT_TRUE(tracker.release(outcomes.at(2).lease.lease_id, true));
  tracker.heartbeat(runner);
  EXPECT_EQ(tracker.summary().at(0).free_runners, 1);
  // Two in a row: held back, even across a re-registration of the same address.
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("d"));
  ASSERT_TRUE(tracker.release(outcomes.at(3).lease.lease_id, true));
  tracker.heartbeat(runner);
  std::vector<DeviceSummary> summary = tracker.summary();
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].free_runners, 0);
  EXPECT_EQ(summary[0].quarantined_runners, 1);
  tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  EXPECT_EQ(tracker.summary().at(0).quarantined_runners, 1);
  Clock::time_point asked = Clock::now();
  tracker.acquire("x86", 0, Clock::now() + 5s, outcomes.record("after-quarantine"));
  ASSERT_TRUE(eventually([&] { return outcomes.labels().size() == 5; }));
  EXPECT_EQ(outcomes.at(4).status, AcquireStatus::kGranted);
  EXPECT_GE(Clock::now() - asked, 300ms);
  // A runner at another address is not affected.
  tracker.register_runner({"127.0.0.1:2", "x86", "llvm"});
  EXPECT_EQ(tracker.summary().at(0).free_runners, 1);
}

TEST(TrackerTest, AnUnusedLeaseIsRevokedButAnActiveSessionKeepsItAlive) {
  TrackerOptions opts = options();
  opts.lease_idle_timeout = 300ms;
  Tracker tracker(opts);
  Outcomes outcomes;
  std::string runner = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("kept"));
  std::string lease = outcomes.at(0).lease.lease_id;
  // The runner reports a session under the lease: the lease outlives the idle timeout.
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(100ms);
    ASSERT_EQ(tracker.heartbeat(runner, lease), lease);
  }
  // The session ends and nobody releases: the lease is revoked and the runner free again.
  ASSERT_TRUE(eventually([&] { return tracker.heartbeat(runner).value_or("?").empty(); }));
  EXPECT_FALSE(tracker.release(lease));
  tracker.acquire("x86", 0, Clock::now(), outcomes.record("next"));
  EXPECT_EQ(outcomes.at(1).status, AcquireStatus::kGranted);
}

// The runner of `summary` at `address`; fails the test when there is none.
RunnerSummary runner_at(const TrackerSummary &summary, const std::string &address) {
  for (const RunnerSummary &r : summary.runners) {
    if (r.registration.address == address) return r;
  }
  ADD_FAILURE() << "no runner at " << address;
  return {};
}

TEST(TrackerTest, FullSummaryShowsEachRunnersStateHeartbeatAndLeases) {
  TrackerOptions opts = options();
  opts.quarantine_after = 1;
  opts.quarantine_duration = 60s;
  Tracker tracker(opts);
  Outcomes outcomes;
  const std::string beating = tracker.register_runner({"127.0.0.1:1", "x86", "llvm -mcpu=znver4"});
  const std::string busy = tracker.register_runner({"127.0.0.1:2", "arm", "llvm -mtriple=aarch64-linux-gnu"});
  const std::string failing = tracker.register_runner({"127.0.0.1:3", "cuda", "cuda -arch=sm_80"});
  tracker.acquire("arm", 0, Clock::now() + 1s, outcomes.record("arm"));
  tracker.acquire("cuda", 0, Clock::now() + 1s, outcomes.record("cuda"));
  ASSERT_EQ(outcomes.labels(), (std::vector<std::string>{"arm", "cuda"}));
  // The cuda runner fails under its lease: one failure quarantines it.
  ASSERT_TRUE(tracker.release(outcomes.at(1).lease.lease_id, /*runner_failed=*/true));
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(tracker.heartbeat(beating), std::optional<std::string>(""));

  const TrackerSummary summary = tracker.full_summary();
  ASSERT_EQ(summary.runners.size(), 3u);
  // Sorted by device key.
  EXPECT_EQ(summary.runners[0].registration.device_key, "arm");
  EXPECT_EQ(summary.runners[1].registration.device_key, "cuda");
  EXPECT_EQ(summary.runners[2].registration.device_key, "x86");

  const RunnerSummary b = runner_at(summary, "127.0.0.1:1");
  EXPECT_EQ(b.runner_id, beating);
  EXPECT_EQ(b.registration.target, "llvm -mcpu=znver4");
  EXPECT_EQ(b.state, RunnerState::kFree);
  EXPECT_EQ(b.quarantine_reason, "");
  EXPECT_EQ(b.leases_served, 0u);
  EXPECT_GE(b.since_registered, 300ms);
  // It heartbeat just now; the others not since they registered.
  EXPECT_LT(b.since_heartbeat, b.since_registered);

  const RunnerSummary l = runner_at(summary, "127.0.0.1:2");
  EXPECT_EQ(l.runner_id, busy);
  EXPECT_EQ(l.state, RunnerState::kBusy);
  EXPECT_EQ(l.leases_served, 1u);
  EXPECT_EQ(l.leases_failed, 0u);
  EXPECT_GE(l.since_heartbeat, 300ms);
  EXPECT_GT(l.since_heartbeat, b.since_heartbeat);

  const RunnerSummary q = runner_at(summary, "127.0.0.1:3");
  EXPECT_EQ(q.runner_id, failing);
  EXPECT_EQ(q.state, RunnerState::kQuarantined);
  EXPECT_EQ(q.quarantine_reason, "1 failure in a row, the last a lease released as failed");
  EXPECT_GT(q.quarantine_left, 50s);
  EXPECT_LE(q.quarantine_left, 60s);
  EXPECT_EQ(q.leases_served, 1u);
  EXPECT_EQ(q.leases_failed, 1u);
  EXPECT_GE(q.since_heartbeat, 300ms);

  // The device counts agree with the runners' states.
  ASSERT_EQ(summary.devices.size(), 3u);
  EXPECT_EQ(summary.devices[0].busy_runners, 1);
  EXPECT_EQ(summary.devices[1].quarantined_runners, 1);
  EXPECT_EQ(summary.devices[2].free_runners, 1);

  // The lease given back cleanly: free again, and the count of leases stays.
  ASSERT_TRUE(tracker.release(outcomes.at(0).lease.lease_id));
  EXPECT_EQ(runner_at(tracker.full_summary(), "127.0.0.1:2").state, RunnerState::kFree);
  EXPECT_EQ(runner_at(tracker.full_summary(), "127.0.0.1:2").leases_served, 1u);
}

TEST(TrackerTest, ARunnerReportedFailedIsHeldBackUntilItsHeartbeatAndSaysWhy) {
  TrackerOptions opts = options();
  opts.quarantine_after = 3;
  Tracker tracker(opts);
  Outcomes outcomes;
  const std::string runner = tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("a"));
  ASSERT_TRUE(tracker.release(outcomes.at(0).lease.lease_id, /*runner_failed=*/true));
  RunnerSummary r = tracker.full_summary().runners.at(0);
  EXPECT_EQ(r.state, RunnerState::kQuarantined);
  EXPECT_NE(r.quarantine_reason.find("held back until its next heartbeat"), std::string::npos) << r.quarantine_reason;
  EXPECT_EQ(r.quarantine_left, 0ms);
  EXPECT_EQ(r.consecutive_failures, 1);
  tracker.heartbeat(runner);
  r = tracker.full_summary().runners.at(0);
  EXPECT_EQ(r.state, RunnerState::kFree);
  EXPECT_EQ(r.quarantine_reason, "");
  EXPECT_EQ(r.consecutive_failures, 1);
}

TEST(TrackerTest, AnExpiredLeaseIsCountedOnItsRunner) {
  TrackerOptions opts = options();
  opts.lease_idle_timeout = 100ms;
  Tracker tracker(opts);
  Outcomes outcomes;
  tracker.register_runner({"127.0.0.1:1", "x86", "llvm"});
  tracker.acquire("x86", 0, Clock::now() + 1s, outcomes.record("forgotten"));
  ASSERT_TRUE(eventually([&] { return tracker.full_summary().runners.at(0).state == RunnerState::kFree; }));
  const RunnerSummary r = tracker.full_summary().runners.at(0);
  EXPECT_EQ(r.leases_served, 1u);
  EXPECT_EQ(r.leases_expired, 1u);
  EXPECT_EQ(r.leases_failed, 0u);
}

}  // namespace
}  // namespace kiln::rpc
