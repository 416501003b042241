// The Tracker's book of runners, leases and waiting requests, without gRPC.
#include "rpc_server/tracker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

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
  EXPECT_THROW(Tracker{bad}, std::invalid_argument);
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
  EXPECT_EQ(outcomes.labels(), (std::vector<std::string>{"holder", "high", "low-first",
                                                         "low-second", "low-third", "negative"}));
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
  tracker.acquire("x86", 0, start + 200ms,
                  [&done](AcquireOutcome outcome) { done.set_value(std::move(outcome)); });
  std::future<AcquireOutcome> outcome = done.get_future();
  ASSERT_EQ(outcome.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(outcome.get().status, AcquireStatus::kDeadlineExceeded);
  EXPECT_GE(Clock::now() - start, 200ms);
}

}  // namespace
}  // namespace kiln::rpc
