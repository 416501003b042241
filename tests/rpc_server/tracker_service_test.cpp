// The Tracker service over gRPC on loopback: leases, queue order, deadlines, silent runners, the
// shared token, argument checks, Summary and the standard health service.
#include "rpc_server/tracker_service.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc_server/service_host.h"
#include "rpc_server/shared_token.h"

namespace kiln::rpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace v1 = kiln::v1;

constexpr char kToken[] = "farm-secret";

// A tracker served on a loopback port, and a client for it.
class Farm {
 public:
  explicit Farm(std::chrono::milliseconds heartbeat_timeout = 10s)
      : service_(make_options(heartbeat_timeout)),
        host_(ServiceHost::start("127.0.0.1:0", {&service_})),
        stub_(v1::Tracker::NewStub(grpc::CreateChannel(host_->address(), grpc::InsecureChannelCredentials()))) {}

  ~Farm() {
    shutdown_tracker();
    host_->shutdown(1s);
    host_->wait();
  }

  // Answers every waiting Acquire with UNAVAILABLE.
  void shutdown_tracker() { service_.tracker().shutdown(); }

  const std::string &address() const { return host_->address(); }
  v1::Tracker::Stub &stub() { return *stub_; }

  // A client context carrying `token` (none when empty) and a deadline.
  static std::unique_ptr<grpc::ClientContext> context(const std::string &token = kToken,
                                                      std::chrono::milliseconds deadline = 10s) {
    auto out = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) attach_token(*out, token);
    out->set_deadline(std::chrono::system_clock::now() + deadline);
    return out;
  }

  std::string register_runner(const std::string &address, const std::string &device_key) {
    v1::RegisterRequest request;
    request.set_address(address);
    request.mutable_target()->set_device_key(device_key);
    request.mutable_target()->set_target("llvm -mcpu=generic");
    v1::RegisterReply reply;
    grpc::Status status = stub_->Register(context().get(), request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.runner_id();
  }

  grpc::Status heartbeat(const std::string &runner_id, v1::HeartbeatReply *reply = nullptr) {
    v1::HeartbeatRequest request;
    request.set_runner_id(runner_id);
    v1::HeartbeatReply ignored;
    return stub_->Heartbeat(context().get(), request, reply ? reply : &ignored);
  }

  grpc::Status acquire(const std::string &device_key, int priority, int64_t wait_ms, v1::AcquireReply *reply) {
    v1::AcquireRequest request;
    request.set_device_key(device_key);
    request.set_priority(priority);
    request.set_wait_ms(wait_ms);
    return stub_->Acquire(context().get(), request, reply);
  }

  grpc::Status release(const std::string &lease_id) {
    v1::ReleaseRequest request;
    request.set_lease_id(lease_id);
    v1::ReleaseReply reply;
    return stub_->Release(context().get(), request, &reply);
  }

  v1::SummaryReply summary() {
    v1::SummaryReply reply;
    grpc::Status status = stub_->Summary(context().get(), v1::SummaryRequest(), &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply;
  }

  // The summary entry of `device_key`, zeros when it has none.
  v1::DeviceSummary device(const std::string &device_key) {
    v1::SummaryReply reply = summary();
    for (const v1::DeviceSummary &entry : reply.devices()) {
      if (entry.device_key() == device_key) return entry;
    }
    return v1::DeviceSummary();
  }

  // Polls Summary until `done` holds for `device_key`'s entry; false after 5 s.
  bool wait_for(const std::string &device_key, const std::function<bool(const v1::DeviceSummary &)> &done) {
    Clock::time_point give_up = Clock::now() + 5s;
    while (Clock::now() < give_up) {
      if (done(device(device_key))) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  static TrackerOptions make_options(std::chrono::milliseconds heartbeat_timeout) {
    TrackerOptions options;
    options.token = kToken;
    options.heartbeat_interval = 50ms;
    options.heartbeat_timeout = heartbeat_timeout;
    options.max_wait = 60s;
    return options;
  }

  TrackerService service_;
  std::unique_ptr<ServiceHost> host_;
  std::unique_ptr<v1::Tracker::Stub> stub_;
};

// Heartbeats for a runner every 50 ms until destroyed.
class Heartbeater {
 public:
  Heartbeater(Farm &farm, std::string runner_id)
      : thread_([this, &farm, runner_id] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_) {
            lock.unlock();
            farm.heartbeat(runner_id);
            lock.lock();
            wake_.wait_for(lock, 50ms, [this] { return stop_; });
          }
        }) {}
  ~Heartbeater() {
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

TEST(TrackerServiceTest, RegisterAcquireRelease) {
  Farm farm;
  std::string runner = farm.register_runner("127.0.0.1:9190", "x86-test");
  ASSERT_FALSE(runner.empty());

  v1::AcquireReply lease;
  grpc::Status status = farm.acquire("x86-test", 1, 1000, &lease);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(lease.lease_id().empty());
  EXPECT_EQ(lease.runner_id(), runner);
  EXPECT_EQ(lease.address(), "127.0.0.1:9190");
  EXPECT_EQ(lease.target().device_key(), "x86-test");
  EXPECT_EQ(lease.target().target(), "llvm -mcpu=generic");

  v1::HeartbeatReply beat;
  ASSERT_TRUE(farm.heartbeat(runner, &beat).ok());
  EXPECT_EQ(beat.lease_id(), lease.lease_id());
  EXPECT_EQ(farm.device("x86-test").busy_runners(), 1u);

  ASSERT_TRUE(farm.release(lease.lease_id()).ok());
  ASSERT_TRUE(farm.heartbeat(runner, &beat).ok());
  EXPECT_EQ(beat.lease_id(), "");
  EXPECT_EQ(farm.device("x86-test").free_runners(), 1u);
  EXPECT_EQ(farm.release(lease.lease_id()).error_code(), grpc::StatusCode::NOT_FOUND);

  // The runner can be leased again.
  v1::AcquireReply again;
  ASSERT_TRUE(farm.acquire("x86-test", 1, 0, &again).ok());
  EXPECT_NE(again.lease_id(), lease.lease_id());
}

TEST(TrackerServiceTest, WaitersAreServedByPriorityThenInArrivalOrder) {
  Farm farm;
  farm.register_runner("127.0.0.1:9190", "x86-test");
  v1::AcquireReply first;
  ASSERT_TRUE(farm.acquire("x86-test", 0, 1000, &first).ok());

  struct Waiter {
    std::string name;
    int priority;
  };
  const std::vector<Waiter> waiters = {{"low-a", 0}, {"low-b", 0}, {"high", 5}, {"low-c", 0}, {"lowest", -1}};
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> granted;  // (waiter, lease id)
  std::vector<std::thread> threads;
  for (size_t i = 0; i < waiters.size(); ++i) {
    threads.emplace_back([&, i] {
      v1::AcquireReply reply;
      grpc::Status status = farm.acquire("x86-test", waiters[i].priority, 10000, &reply);
      EXPECT_TRUE(status.ok()) << status.error_message();
      std::lock_guard<std::mutex> lock(mutex);
      granted.emplace_back(waiters[i].name, reply.lease_id());
    });
    // Each waiter is queued before the next one starts, so arrival order is known.
    ASSERT_TRUE(
        farm.wait_for("x86-test", [&](const v1::DeviceSummary &entry) { return entry.queue_length() == i + 1; }));
  }

  std::string held = first.lease_id();
  for (size_t i = 0; i < waiters.size(); ++i) {
    ASSERT_TRUE(farm.release(held).ok());
    Clock::time_point give_up = Clock::now() + 5s;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (granted.size() == i + 1) {
          held = granted.back().second;
          break;
        }
      }
      ASSERT_LT(Clock::now(), give_up) << "no waiter got the released runner";
      std::this_thread::sleep_for(5ms);
    }
  }
  for (std::thread &thread : threads) thread.join();
  std::vector<std::string> order;
  for (const auto &entry : granted) order.push_back(entry.first);
  EXPECT_EQ(order, (std::vector<std::string>{"high", "low-a", "low-b", "low-c", "lowest"}));
}

TEST(TrackerServiceTest, AcquireWithNoRunnerEndsAtItsDeadline) {
  Farm farm;
  v1::AcquireReply reply;
  Clock::time_point start = Clock::now();
  grpc::Status status = farm.acquire("nobody-home", 0, 300, &reply);
  std::chrono::nanoseconds took = Clock::now() - start;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 2s);

  // Zero wait answers at once.
  start = Clock::now();
  EXPECT_EQ(farm.acquire("nobody-home", 0, 0, &reply).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(Clock::now() - start, 1s);

  // The call's own deadline ends a long wait too, and the request leaves the queue.
  v1::AcquireRequest request;
  request.set_device_key("nobody-home");
  request.set_wait_ms(60000);
  start = Clock::now();
  status = farm.stub().Acquire(Farm::context(kToken, 300ms).get(), request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_TRUE(farm.wait_for("nobody-home", [](const v1::DeviceSummary &entry) { return entry.queue_length() == 0; }));
}

TEST(TrackerServiceTest, ACancelledAcquireLeavesTheQueue) {
  Farm farm;
  v1::AcquireRequest request;
  request.set_device_key("nobody-home");
  request.set_wait_ms(60000);
  std::unique_ptr<grpc::ClientContext> context = Farm::context(kToken, 30s);
  std::future<grpc::Status> waiter = std::async(std::launch::async, [&] {
    v1::AcquireReply reply;
    return farm.stub().Acquire(context.get(), request, &reply);
  });
  ASSERT_TRUE(farm.wait_for("nobody-home", [](const v1::DeviceSummary &entry) { return entry.queue_length() == 1; }));
  context->TryCancel();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(waiter.get().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(farm.wait_for("nobody-home", [](const v1::DeviceSummary &entry) { return entry.queue_length() == 0; }));

  // A runner registered afterwards stays free: nobody is waiting for it.
  farm.register_runner("127.0.0.1:9001", "nobody-home");
  EXPECT_EQ(farm.device("nobody-home").free_runners(), 1u);
}

TEST(TrackerServiceTest, SilentRunnerIsDroppedAndItsLeaseRevoked) {
  Farm farm(1000ms);
  std::string silent = farm.register_runner("127.0.0.1:9001", "x86-test");
  std::string alive = farm.register_runner("127.0.0.1:9002", "x86-test");
  Heartbeater keep_alive(farm, alive);
  v1::AcquireReply on_silent, on_alive;
  ASSERT_TRUE(farm.acquire("x86-test", 0, 1000, &on_silent).ok());
  ASSERT_TRUE(farm.acquire("x86-test", 0, 1000, &on_alive).ok());
  ASSERT_EQ(on_silent.runner_id(), silent);  // the longest free runner goes first
  ASSERT_EQ(on_alive.runner_id(), alive);

  // A waiter queues behind both leases.
  std::future<std::pair<grpc::Status, v1::AcquireReply>> waiter = std::async(std::launch::async, [&] {
    v1::AcquireReply reply;
    grpc::Status status = farm.acquire("x86-test", 0, 10000, &reply);
    return std::make_pair(status, reply);
  });
  ASSERT_TRUE(farm.wait_for("x86-test", [](const v1::DeviceSummary &entry) { return entry.queue_length() == 1; }));

  // Within a few heartbeat timeouts the silent runner is gone; the live one stays.
  Clock::time_point start = Clock::now();
  ASSERT_TRUE(farm.wait_for("x86-test", [](const v1::DeviceSummary &entry) {
    return entry.busy_runners() == 1 && entry.free_runners() == 0;
  }));
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(farm.heartbeat(silent).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(farm.release(on_silent.lease_id()).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(farm.heartbeat(alive).ok());
  EXPECT_EQ(farm.device("x86-test").queue_length(), 1u);  // the waiter is not handed a dead runner

  // The waiter gets the other runner once it frees up.
  ASSERT_TRUE(farm.release(on_alive.lease_id()).ok());
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  auto [status, reply] = waiter.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.runner_id(), alive);
}

TEST(TrackerServiceTest, AcquireIsRefusedAtOnceWhenTheOnlyRunnerFellSilent) {
  Farm farm(300ms);
  farm.register_runner("127.0.0.1:9001", "x86-test");
  ASSERT_TRUE(farm.wait_for("x86-test", [](const v1::DeviceSummary &entry) { return entry.free_runners() == 0; }));
  v1::AcquireReply reply;
  const Clock::time_point start = Clock::now();
  const grpc::Status status = farm.acquire("x86-test", 0, 10000, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(),
            "no runner is registered under device key \"x86-test\" (no runner is registered at all)");
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(TrackerServiceTest, EveryMethodNeedsTheToken) {
  Farm farm;
  std::string runner = farm.register_runner("127.0.0.1:9190", "x86-test");
  for (const std::string token : {"", "wrong-secret"}) {
    SCOPED_TRACE("token '" + token + "'");
    v1::RegisterRequest register_request;
    register_request.set_address("127.0.0.1:9191");
    register_request.mutable_target()->set_device_key("x86-test");
    register_request.mutable_target()->set_target("llvm");
    v1::RegisterReply register_reply;
    EXPECT_EQ(farm.stub().Register(Farm::context(token).get(), register_request, &register_reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::HeartbeatRequest heartbeat_request;
    heartbeat_request.set_runner_id(runner);
    v1::HeartbeatReply heartbeat_reply;
    EXPECT_EQ(farm.stub().Heartbeat(Farm::context(token).get(), heartbeat_request, &heartbeat_reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::AcquireRequest acquire_request;
    acquire_request.set_device_key("x86-test");
    acquire_request.set_wait_ms(1000);
    v1::AcquireReply acquire_reply;
    EXPECT_EQ(farm.stub().Acquire(Farm::context(token).get(), acquire_request, &acquire_reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::ReleaseRequest release_request;
    release_request.set_lease_id("lease-0");
    v1::ReleaseReply release_reply;
    EXPECT_EQ(farm.stub().Release(Farm::context(token).get(), release_request, &release_reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    v1::SummaryReply summary_reply;
    EXPECT_EQ(farm.stub().Summary(Farm::context(token).get(), v1::SummaryRequest(), &summary_reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // Nothing was registered or leased by the refused calls.
  v1::DeviceSummary entry = farm.device("x86-test");
  EXPECT_EQ(entry.free_runners(), 1u);
  EXPECT_EQ(entry.busy_runners(), 0u);
}

TEST(TrackerServiceTest, AbsurdRequestsAreInvalidArguments) {
  Farm farm;
  farm.register_runner("127.0.0.1:9190", "x86-test");
  v1::AcquireReply reply;
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  EXPECT_EQ(farm.acquire("", 0, 100, &reply).error_code(), invalid);
  EXPECT_EQ(farm.acquire(std::string(10000, 'k'), 0, 100, &reply).error_code(), invalid);
  EXPECT_EQ(farm.acquire("x86-test", 0, -1, &reply).error_code(), invalid);
  EXPECT_EQ(farm.acquire("x86-test", 0, int64_t{1} << 50, &reply).error_code(), invalid);
  EXPECT_EQ(farm.acquire("x86-test", 1000000, 100, &reply).error_code(), invalid);
  EXPECT_EQ(farm.acquire("x86-test", -1000000, 100, &reply).error_code(), invalid);
  EXPECT_EQ(farm.heartbeat("").error_code(), invalid);
  EXPECT_EQ(farm.release("").error_code(), invalid);

  v1::RegisterRequest request;
  request.mutable_target()->set_device_key("x86-test");
  request.mutable_target()->set_target("llvm");
  v1::RegisterReply register_reply;
  EXPECT_EQ(farm.stub().Register(Farm::context().get(), request, &register_reply).error_code(),
            invalid);  // no address
  request.set_address("127.0.0.1:9191");
  request.mutable_target()->clear_device_key();
  EXPECT_EQ(farm.stub().Register(Farm::context().get(), request, &register_reply).error_code(), invalid);
  // The device-key rule and the target grammar of contracts/target.h.
  request.mutable_target()->set_device_key("x86 test");
  grpc::Status spaced = farm.stub().Register(Farm::context().get(), request, &register_reply);
  EXPECT_EQ(spaced.error_code(), invalid);
  EXPECT_EQ(spaced.error_message(), "target.device_key: device key \"x86 test\" contains whitespace");
  request.mutable_target()->set_device_key("x86-test");
  request.mutable_target()->set_target("llvm -mcpu=a --mcpu=b");
  grpc::Status twice = farm.stub().Register(Farm::context().get(), request, &register_reply);
  EXPECT_EQ(twice.error_code(), invalid);
  EXPECT_NE(twice.error_message().find("option -mcpu is given twice"), std::string::npos) << twice.error_message();
  EXPECT_EQ(farm.acquire("x86\ttest", 0, 100, &reply).error_code(), invalid);

  // None of them changed anything.
  v1::DeviceSummary entry = farm.device("x86-test");
  EXPECT_EQ(entry.free_runners(), 1u);
  EXPECT_EQ(entry.busy_runners(), 0u);
  EXPECT_EQ(entry.queue_length(), 0u);
}

// A native target on a CPU the compiler cannot name lists every feature of the host: such a runner
// registers; a target beyond any such list is refused, naming the field.
TEST(TrackerServiceTest, ALongFeatureListRegistersAndAnAbsurdTargetIsRefused) {
  Farm farm;
  std::string features;
  for (int i = 0; i < 60; ++i) features += (features.empty() ? "+feature" : ",+feature") + std::to_string(i);
  v1::RegisterRequest request;
  request.set_address("127.0.0.1:9191");
  request.mutable_target()->set_device_key("x86-test");
  request.mutable_target()->set_target("llvm -mcpu=generic -mattr=" + features);
  ASSERT_GT(request.target().target().size(), 600u);
  v1::RegisterReply reply;
  const grpc::Status ok = farm.stub().Register(Farm::context().get(), request, &reply);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(farm.device("x86-test").free_runners(), 1u);
  request.mutable_target()->set_target("llvm -mcpu=generic -mattr=" + features + "," + std::string(3000, 'x'));
  const grpc::Status absurd = farm.stub().Register(Farm::context().get(), request, &reply);
  EXPECT_EQ(absurd.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(absurd.error_message(), "target.target is longer than 2048 bytes");
  EXPECT_EQ(farm.device("x86-test").free_runners(), 1u);
}

TEST(TrackerServiceTest, SummaryCountsRunnersAndWaitersPerDeviceKey) {
  Farm farm;
  EXPECT_EQ(farm.summary().devices_size(), 0);
  farm.register_runner("127.0.0.1:9001", "x86-b");
  farm.register_runner("127.0.0.1:9002", "x86-b");
  farm.register_runner("127.0.0.1:9003", "x86-b");
  v1::AcquireReply lease;
  ASSERT_TRUE(farm.acquire("x86-b", 0, 0, &lease).ok());

  std::vector<std::future<grpc::Status>> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.push_back(std::async(std::launch::async, [&farm] {
      v1::AcquireReply reply;
      return farm.acquire("cuda-a", 0, 10000, &reply);
    }));
  }
  ASSERT_TRUE(farm.wait_for("cuda-a", [](const v1::DeviceSummary &entry) { return entry.queue_length() == 2; }));

  v1::SummaryReply summary = farm.summary();
  ASSERT_EQ(summary.devices_size(), 2);
  EXPECT_EQ(summary.devices(0).device_key(), "cuda-a");
  EXPECT_EQ(summary.devices(0).free_runners(), 0u);
  EXPECT_EQ(summary.devices(0).busy_runners(), 0u);
  EXPECT_EQ(summary.devices(0).queue_length(), 2u);
  EXPECT_EQ(summary.devices(1).device_key(), "x86-b");
  EXPECT_EQ(summary.devices(1).free_runners(), 2u);
  EXPECT_EQ(summary.devices(1).busy_runners(), 1u);
  EXPECT_EQ(summary.devices(1).queue_length(), 0u);
  // Every runner, with its state: the leased one busy, the others free.
  ASSERT_EQ(summary.runners_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const v1::RunnerSummary &runner = summary.runners(i);
    EXPECT_EQ(runner.address(), "127.0.0.1:900" + std::to_string(i + 1));
    EXPECT_EQ(runner.device_key(), "x86-b");
    EXPECT_EQ(runner.target(), "llvm -mcpu=generic");
    const bool leased = runner.runner_id() == lease.runner_id();
    EXPECT_EQ(runner.state(), leased ? v1::RUNNER_STATE_BUSY : v1::RUNNER_STATE_FREE) << runner.address();
    EXPECT_EQ(runner.leases_served(), leased ? 1u : 0u) << runner.address();
    EXPECT_LT(runner.since_heartbeat_ms(), 10000u);
  }

  // A runner for the waiting key serves one waiter; the other keeps waiting.
  farm.register_runner("127.0.0.1:9004", "cuda-a");
  ASSERT_TRUE(farm.wait_for(
      "cuda-a", [](const v1::DeviceSummary &entry) { return entry.queue_length() == 1 && entry.busy_runners() == 1; }));

  // Shutting the tracker down answers the last waiter at once.
  farm.shutdown_tracker();
  std::vector<grpc::StatusCode> codes;
  for (std::future<grpc::Status> &waiter : waiters) {
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    codes.push_back(waiter.get().error_code());
  }
  std::sort(codes.begin(), codes.end());
  EXPECT_EQ(codes, (std::vector<grpc::StatusCode>{grpc::StatusCode::OK, grpc::StatusCode::UNAVAILABLE}));
}

TEST(TrackerServiceTest, ServesTheStandardHealthCheckWithoutToken) {
  Farm farm;
  auto channel = grpc::CreateChannel(farm.address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  // grpc.health.v1.HealthCheckRequest{service: ""} encodes to no bytes.
  grpc::ByteBuffer request;
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(status); });
  grpc::Status status = done.get_future().get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice &slice : slices) {
    bytes.append(reinterpret_cast<const char *>(slice.begin()), slice.size());
  }
  // HealthCheckResponse{status: SERVING (1)}: field 1, varint 1.
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace kiln::rpc
