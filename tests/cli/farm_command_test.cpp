// `kiln farm status` run as a user would, against a tracker served in this process: the device
// keys' counts and every runner with its state, heartbeat age, leases and why it is quarantined,
// as a table and as JSON; an unreachable tracker is an error with status 1.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rpc_server/service_host.h"
#include "rpc_server/tracker_service.h"
#include "tests/db/process_util.h"
#include "tests/temp_dir.h"

#ifndef KILN_CLI
#error "KILN_CLI must name the kiln executable"
#endif

namespace kiln::cli {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = rpc::Tracker::Clock;
namespace pt = db::testing;

constexpr char kToken[] = "farm-command-secret";

rpc::TrackerOptions tracker_options() {
  rpc::TrackerOptions options;
  options.token = kToken;
  options.heartbeat_timeout = 60s;
  options.quarantine_after = 1;
  options.quarantine_duration = 600s;
  return options;
}

class FarmCommandTest : public ::testing::Test {
 protected:
  FarmCommandTest() : service_(tracker_options()), host_(rpc::ServiceHost::start("127.0.0.1:0", {&service_})) {
    std::ofstream(dir_.file("token")) << kToken << "\n";
  }
  ~FarmCommandTest() override {
    service_.tracker().shutdown();
    host_->shutdown(1s);
    host_->wait();
  }

  rpc::Tracker &tracker() { return service_.tracker(); }
  pt::Run farm_status(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"farm",           "status",       "--tracker",
                                     host_->address(), "--token-file", dir_.file("token")};
    args.insert(args.end(), extra.begin(), extra.end());
    return pt::run_program(KILN_CLI, args, dir_.path());
  }
  // Leases a runner of `device_key`; the lease id.
  std::string lease(const std::string &device_key) {
    std::string lease_id;
    tracker().acquire(device_key, 0, Clock::now() + 1s,
                      [&](rpc::AcquireOutcome outcome) { lease_id = outcome.lease.lease_id; });
    EXPECT_FALSE(lease_id.empty()) << device_key;
    return lease_id;
  }

  test::TempDir dir_;
  rpc::TrackerService service_;
  std::unique_ptr<rpc::ServiceHost> host_;
};

// The line of `text` that holds `needle`; empty when none does.
std::string line_with(const std::string &text, const std::string &needle) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

// The whitespace-separated words of `line`.
std::vector<std::string> words(const std::string &line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST_F(FarmCommandTest, ShowsEveryRunnerWithItsStateHeartbeatAndLeases) {
  const std::string free_id = tracker().register_runner({"127.0.0.1:7001", "x86", "llvm -mcpu=znver4"});
  const std::string busy_id = tracker().register_runner({"127.0.0.1:7002", "arm", "llvm -mtriple=aarch64-linux-gnu"});
  const std::string failing_id = tracker().register_runner({"127.0.0.1:7003", "gpu", "cuda -arch=sm_80"});
  lease("arm");
  ASSERT_TRUE(tracker().release(lease("gpu"), /*runner_failed=*/true));  // one failure quarantines it
  std::this_thread::sleep_for(1200ms);
  ASSERT_TRUE(tracker().heartbeat(free_id).has_value());

  pt::Run r = farm_status();
  ASSERT_EQ(r.status, 0) << r.err;
  // The device table first, then one row per runner, sorted by device key.
  EXPECT_NE(line_with(r.out, "device key").find("quarantined"), std::string::npos) << r.out;
  const std::vector<std::string> header = words(line_with(r.out, "runner"));
  EXPECT_EQ(header, (std::vector<std::string>{"runner", "address", "device", "key", "state", "heartbeat", "leases",
                                              "failed", "expired", "why"}))
      << r.out;
  ASSERT_LT(r.out.find(busy_id), r.out.find(failing_id)) << r.out;
  ASSERT_LT(r.out.find(failing_id), r.out.find(free_id)) << r.out;

  // runner, address, device key, state, "N.N s ago" (three words), leases, failed, expired, why.
  std::vector<std::string> row = words(line_with(r.out, free_id));
  ASSERT_GE(row.size(), 10u) << r.out;
  EXPECT_EQ(row[1], "127.0.0.1:7001");
  EXPECT_EQ(row[2], "x86");
  EXPECT_EQ(row[3], "free");
  EXPECT_LT(std::stod(row[4]), 1.2) << r.out;  // heartbeat just now
  EXPECT_EQ(row[5], "s");
  EXPECT_EQ(row[6], "ago");
  EXPECT_EQ(std::vector<std::string>(row.begin() + 7, row.end()), (std::vector<std::string>{"0", "0", "0", "-"}));

  row = words(line_with(r.out, busy_id));
  ASSERT_GE(row.size(), 10u) << r.out;
  EXPECT_EQ(row[3], "busy");
  EXPECT_GE(std::stod(row[4]), 1.2) << r.out;  // no heartbeat since it registered
  EXPECT_EQ(std::vector<std::string>(row.begin() + 7, row.end()), (std::vector<std::string>{"1", "0", "0", "-"}));

  const std::string quarantined = line_with(r.out, failing_id);
  row = words(quarantined);
  ASSERT_GE(row.size(), 10u) << r.out;
  EXPECT_EQ(row[3], "quarantined");
  EXPECT_EQ(std::vector<std::string>(row.begin() + 7, row.begin() + 10), (std::vector<std::string>{"1", "1", "0"}));
  EXPECT_NE(quarantined.find("1 failure in a row, the last a lease released as failed; "), std::string::npos) << r.out;
  EXPECT_NE(quarantined.find(" s left"), std::string::npos) << r.out;

  // JSON: each device key with its runners.
  r = farm_status({"--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json status = json::parse(r.out);
  ASSERT_EQ(status.size(), 3u) << r.out;
  EXPECT_EQ(status[0]["device_key"], "arm");
  ASSERT_EQ(status[0]["runners"].size(), 1u) << r.out;
  const json &busy = status[0]["runners"][0];
  EXPECT_EQ(busy["runner"], busy_id);
  EXPECT_EQ(busy["address"], "127.0.0.1:7002");
  EXPECT_EQ(busy["target"], "llvm -mtriple=aarch64-linux-gnu");
  EXPECT_EQ(busy["state"], "busy");
  EXPECT_EQ(busy["leases_served"], 1);
  EXPECT_GE(busy["last_heartbeat_s_ago"].get<double>(), 1.2);
  const json &failing = status[1]["runners"].at(0);
  EXPECT_EQ(failing["state"], "quarantined");
  EXPECT_EQ(failing["quarantine_reason"], "1 failure in a row, the last a lease released as failed");
  EXPECT_GT(failing["quarantine_left_s"].get<double>(), 500.0);
  EXPECT_LE(failing["quarantine_left_s"].get<double>(), 600.0);
  EXPECT_EQ(failing["leases_failed"], 1);
  const json &free = status[2]["runners"].at(0);
  EXPECT_EQ(free["state"], "free");
  EXPECT_LT(free["last_heartbeat_s_ago"].get<double>(), free["registered_s_ago"].get<double>());
}

TEST_F(FarmCommandTest, AnEmptyFarmSaysSoAndAnUnreachableTrackerIsAnError) {
  pt::Run r = farm_status();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("no runners registered and no requests waiting"), std::string::npos) << r.out;

  r = pt::run_program(KILN_CLI, {"farm", "status", "--tracker", "127.0.0.1:1", "--token-file", dir_.file("token")},
                      dir_.path());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("kiln farm status: error: tracker summary: UNAVAILABLE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln::cli
