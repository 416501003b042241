// The dashboard end to end, as a user opens it: a kiln-tracker, a kiln-runner and kilnd --tracker
// --http on loopback, a small matmul job, and the page in headless Chromium driven over the
// DevTools protocol (dashboard_e2e.cjs, playwright-core from the dashboard's npm build). The page
// asks for the token, shows the job with its progress and a tuning curve with points, its Pause
// button pauses the job (as the service reports it), the farm view shows the runner's device
// class and the runner with its state, last heartbeat and trials, and no request leaves the service or carries the
// token in its URL. A screenshot of the page is left in the build directory. Skipped when Chromium, node or the npm
// build is missing.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/v1/tracker.grpc.pb.h"
#include "kiln/v1/tuner.grpc.pb.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/shared_token.h"
#include "tests/rpc_server/child_process.h"
#include "tests/rpc_server/http_get.h"
#include "tests/temp_dir.h"

#ifndef KILND_BINARY
#error "KILND_BINARY must name the kilnd executable"
#endif

namespace kiln::tuner {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using kiln::testing::ChildProcess;
namespace v1 = kiln::v1;

constexpr char kToken[] = "dashboard-e2e-secret";
constexpr char kKey[] = "e2e-cpu";
constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kChromium[] = "/usr/bin/chromium";

std::string read(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class DashboardE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kChromium)) GTEST_SKIP() << "no Chromium at " << kChromium << " (Debian's chromium)";
    if (std::string(KILN_NODE).empty()) GTEST_SKIP() << "node was not found at build time";
    if (!std::filesystem::exists(std::string(KILN_DASHBOARD_NODE_MODULES) + "/playwright-core")) {
      GTEST_SKIP() << "the dashboard was not built with npm (no playwright-core in " << KILN_DASHBOARD_NODE_MODULES
                   << ")";
    }
    std::ofstream(dir_.file("token")) << kToken << "\n";
  }

  std::string wait_for_address(const std::string &file, ChildProcess &process) {
    for (auto until = Clock::now() + 60s; Clock::now() < until; std::this_thread::sleep_for(10ms)) {
      std::string address;
      std::ifstream in(file);
      if (in >> address && !address.empty()) return address;
      if (!process.running()) break;
    }
    ADD_FAILURE() << "no address in " << file << "; its log:\n" << process.log();
    return "";
  }

  v1::JobInfo get(int64_t job) {
    grpc::ClientContext context;
    rpc::attach_token(context, kToken);
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::JobRequest request;
    request.set_job_id(job);
    v1::JobInfo info;
    const grpc::Status status = stub_->GetJob(&context, request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  test::TempDir dir_{"kiln_dashboard_e2e"};
  std::unique_ptr<ChildProcess> tracker_, runner_, daemon_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

TEST_F(DashboardE2eTest, ThePageShowsARunningJobItsProgressAndCurvesAndItsPauseButtonPausesIt) {
  tracker_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{KILN_TRACKER_BINARY, "--listen", "127.0.0.1:0", "--token-file", dir_.file("token"),
                               "--address-file", dir_.file("tracker.address")},
      dir_.file("tracker.log"));
  const std::string tracker = wait_for_address(dir_.file("tracker.address"), *tracker_);
  runner_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{KILN_RUNNER_BINARY, "--tracker", tracker, "--key", kKey, "--target", kTarget,
                               "--token-file", dir_.file("token"), "--address-file", dir_.file("runner.address"),
                               "--build-workers", "1"},
      dir_.file("runner.log"));
  wait_for_address(dir_.file("runner.address"), *runner_);
  daemon_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{KILND_BINARY, "--db", dir_.file("kiln.db"), "--tracker", tracker, "--listen",
                               "127.0.0.1:0", "--token-file", dir_.file("token"), "--target", kTarget, "--device-key",
                               kKey, "--address-file", dir_.file("kilnd.address"), "--http", "127.0.0.1:0"},
      dir_.file("kilnd.log"));
  const std::string address = wait_for_address(dir_.file("kilnd.address"), *daemon_);
  ASSERT_FALSE(address.empty());
  int port = 0;
  for (auto until = Clock::now() + 30s; port == 0 && Clock::now() < until; std::this_thread::sleep_for(10ms)) {
    port = testing::metrics_port(read(dir_.file("kilnd.log")));
  }
  ASSERT_NE(port, 0) << read(dir_.file("kilnd.log"));
  EXPECT_NE(read(dir_.file("kilnd.log")).find("dashboard at http://127.0.0.1:" + std::to_string(port) + "/"),
            std::string::npos);

  // Two tiny matmuls, enough trials that the job still runs when the page presses Pause.
  stub_ = v1::Tuner::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::SubmitJobRequest request;
  v1::JobSpec *spec = request.mutable_spec();
  spec->set_name("e2e-matmuls");
  for (const char *args :
       {R"({"a":{"shape":[32,32]},"b":{"shape":[32,32]}})", R"({"a":{"shape":[16,32]},"b":{"shape":[32,32]}})"}) {
    v1::TuneTask *task = spec->add_tasks();
    task->set_template_name("matmul.x86");
    task->set_args_json(args);
  }
  spec->set_trials(4000);
  spec->set_batch_size(4);
  spec->set_strategy("random");
  spec->mutable_measure()->set_threads(1);
  spec->mutable_measure()->set_repeat(3);
  spec->mutable_measure()->set_min_repeat_ms(2);
  v1::SubmitJobReply submitted;
  {
    grpc::ClientContext context;
    rpc::attach_token(context, kToken);
    const grpc::Status status = stub_->SubmitJob(&context, request, &submitted);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const int64_t job = submitted.job().id();

  // The id the tracker knows the runner by.
  std::string registered_runner;
  {
    auto tracker_stub = v1::Tracker::NewStub(grpc::CreateChannel(tracker, grpc::InsecureChannelCredentials()));
    v1::SummaryReply summary;
    for (auto until = Clock::now() + 10s; summary.runners_size() == 0 && Clock::now() < until;
         std::this_thread::sleep_for(50ms)) {
      grpc::ClientContext context;
      rpc::attach_token(context, kToken);
      const grpc::Status status = tracker_stub->Summary(&context, v1::SummaryRequest(), &summary);
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
    ASSERT_EQ(summary.runners_size(), 1) << summary.DebugString();
    registered_runner = summary.runners(0).runner_id();
  }

  const std::string out = dir_.file("browser.json");
  const std::string command = std::string("NODE_PATH='") + KILN_DASHBOARD_NODE_MODULES + "' '" + KILN_NODE + "' '" +
                              KILN_DASHBOARD_E2E_SCRIPT + "' 'http://127.0.0.1:" + std::to_string(port) + "/' '" +
                              kToken + "' " + std::to_string(job) + " '" + KILN_DASHBOARD_SCREENSHOT + "' > '" + out +
                              "' 2>&1";
  const int rc = std::system(command.c_str());
  const std::string said = read(out);
  ASSERT_EQ(rc, 0) << said << "\nkilnd:\n" << read(dir_.file("kilnd.log"));
  const nlohmann::json seen =
      nlohmann::json::parse(said.substr(said.rfind("\n{") == std::string::npos ? 0 : said.rfind("\n{") + 1));
  EXPECT_EQ(seen["asked_for_token"], true);
  EXPECT_EQ(seen["job_name"], "e2e-matmuls");
  EXPECT_GT(seen["progress"].get<double>(), 0.0);
  EXPECT_LT(seen["progress"].get<double>(), 1.0);
  EXPECT_NE(seen["progress_text"].get<std::string>().find(" / 4000 "), std::string::npos) << said;
  EXPECT_GT(seen["curve_points"].get<int>(), 1);
  EXPECT_EQ(seen["curve_series"], 2);
  EXPECT_EQ(seen["task_rows"], 2);
  EXPECT_EQ(seen["paused_row"], true);
  EXPECT_EQ(seen["farm_devices"], nlohmann::json::array({kKey}));
  // The one runner is listed once: the tracker's runner, with its state and last heartbeat, and the
  // trials it measured (from the tuning log, matched by its runner id).
  ASSERT_EQ(seen["runners"].size(), 1u) << said;
  const nlohmann::json &runner = seen["runners"][0];
  EXPECT_EQ(runner["runner"], registered_runner) << said;
  EXPECT_TRUE(runner["state"] == "free" || runner["state"] == "busy") << said;
  EXPECT_EQ(runner["badge"], runner["state"]) << said;
  const std::string heartbeat = runner["heartbeat"];
  ASSERT_GT(heartbeat.size(), 6u) << said;
  EXPECT_EQ(heartbeat.substr(heartbeat.size() - 6), " s ago") << said;
  EXPECT_LT(std::stod(heartbeat), 10.0) << said;  // the runner heartbeats every second
  EXPECT_GE(runner["trials"].get<int64_t>(), 1);
  EXPECT_EQ(seen["log_workloads"], 2);
  // The token stays in the tab's session storage, never in a URL; nothing is fetched elsewhere.
  EXPECT_EQ(seen["session_token"], kToken);
  EXPECT_EQ(seen["page_url"].get<std::string>().find(kToken), std::string::npos);
  EXPECT_EQ(seen["token_in_url"], false);
  EXPECT_TRUE(seen["foreign_requests"].empty()) << said;

  // The service itself says the job is paused, and it measures no more.
  const v1::JobInfo info = get(job);
  EXPECT_EQ(info.state(), v1::JOB_STATE_PAUSED) << info.DebugString();
  EXPECT_LT(info.trials_done(), 4000);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(get(job).trials_done(), info.trials_done());

  const std::string png = read(KILN_DASHBOARD_SCREENSHOT);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace kiln::tuner
