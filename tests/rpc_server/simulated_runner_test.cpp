// The simulated runner (tests and benchmarks only): it registers with a tracker like kiln-runner,
// serves measurement sessions under the tracker's leases, answers every config with a fixed
// made-up cost, and stops a batch at once when its client cancels.
#include "rpc_server/simulated_runner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "rpc_server/farm_client.h"
#include "rpc_server/service_host.h"
#include "rpc_server/tracker_service.h"

namespace kiln::rpc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "simulated-runner-test";
constexpr char kKey[] = "sim";

struct Farm {
  Farm(std::chrono::milliseconds measure_time)
      : tracker(options()), host(ServiceHost::start("127.0.0.1:0", {&tracker})) {
    for (int i = 0; i < 2; ++i) {
      SimulatedRunnerOptions o;
      o.tracker = endpoint();
      o.device_key = kKey;
      o.measure_time = measure_time;
      runners.push_back(std::make_unique<SimulatedRunner>(o));
      EXPECT_TRUE(runners.back()->wait_registered(10s));
    }
  }
  ~Farm() {
    runners.clear();
    tracker.tracker().shutdown();
    host->shutdown(1s);
  }
  static TrackerOptions options() {
    TrackerOptions o;
    o.token = kToken;
    o.heartbeat_interval = 200ms;
    return o;
  }
  Endpoint endpoint() const { return {host->address(), kToken, {}}; }
  FarmClient client() const {
    FarmClientOptions o;
    o.tracker = endpoint();
    o.acquire_wait = 10s;
    return FarmClient(o);
  }

  TrackerService tracker;
  std::unique_ptr<ServiceHost> host;
  std::vector<std::unique_ptr<SimulatedRunner>> runners;
};

kiln::v1::Target target() {
  kiln::v1::Target t;
  t.set_target("llvm -mcpu=native");
  t.set_device_key(kKey);
  return t;
}

std::vector<kiln::v1::Config> configs(int n) {
  std::vector<kiln::v1::Config> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)].set_knobs_json("[[\"k\"," + std::to_string(i) + "]]");
  return out;
}

TEST(SimulatedRunner, MeasuresUnderATrackerLeaseWithAFixedCostPerConfig) {
  Farm farm(1ms);
  FarmClient client = farm.client();
  kiln::v1::MeasureOptions options;
  options.set_repeat(2);
  const std::vector<kiln::v1::Config> batch = configs(8);
  const auto first = client.measure(kiln::v1::Workload(), target(), batch, options);
  const auto second = client.measure(kiln::v1::Workload(), target(), batch, options);
  ASSERT_EQ(first.size(), 8u);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].error(), kiln::v1::OK) << first[i].message();
    ASSERT_EQ(first[i].seconds_size(), 2);
    EXPECT_GE(first[i].seconds(0), 1e-3);
    EXPECT_LE(first[i].seconds(0), 2e-3);
    EXPECT_EQ(first[i].seconds(0), second[i].seconds(0)) << "the cost of a config is fixed";
    EXPECT_FALSE(first[i].runner_id().empty());
  }
  EXPECT_EQ(farm.runners[0]->measured() + farm.runners[1]->measured(), 16);
}

TEST(SimulatedRunner, ACancelledBatchStopsAtOnce) {
  Farm farm(200ms);  // a batch of 20 takes 4 s
  FarmClient client = farm.client();
  auto running = std::async(std::launch::async, [&] {
    return client.measure(kiln::v1::Workload(), target(), configs(20), kiln::v1::MeasureOptions());
  });
  std::this_thread::sleep_for(500ms);
  const Clock::time_point cancelled_at = Clock::now();
  client.cancel();
  const auto results = running.get();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - cancelled_at).count(), 0.5);
  int cancelled = 0;
  for (const auto &r : results) cancelled += r.error() == kiln::v1::INFRA && r.message() == "cancelled";
  EXPECT_GE(cancelled, 15);
}

}  // namespace
}  // namespace kiln::rpc
