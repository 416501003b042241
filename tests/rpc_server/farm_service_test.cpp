// The device farm end to end: a kiln-tracker and runner daemons in separate processes on loopback,
// driven through the farm client library and the kiln command. The runners are kiln-runner-test
// (the runner with the fault-injection templates) unless a test asks for the production
// kiln-runner.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "http_get.h"
#include "prometheus_text.h"
#include "contracts/json.h"
#include "contracts/target.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "kiln/v1/runner.grpc.pb.h"
#include "kiln/v1/tracker.grpc.pb.h"
#include "rpc_server/credentials.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/shared_token.h"
#include "rpc_server/wire.h"
#include "test_templates.h"

namespace kiln::rpc {
namespace {

using namespace std::chrono_literals;
using contracts::Json;
using testing::ChildProcess;
namespace fs = std::filesystem;

constexpr char kKey[] = "test-cpu";
constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kToken[] = "farm-test-token";

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

// The operator library plus the fault-injection templates, as kiln-runner-test has it.
const ops::Registry &registry() {
  static const ops::Registry with_tests = [] {
    ops::Registry r = ops::Registry::builtin();
    add_test_templates(r);
    return r;
  }();
  return with_tests;
}

// A workload of the operator library, and configs of it as the wire carries them.
struct TestWorkload {
  std::unique_ptr<ops::Task> task;
  kiln::v1::Workload workload;

  TestWorkload(const std::string &name, const Json &args) {
    task = std::make_unique<ops::Task>(name, args, driver::resolve_target(kTarget), registry());
    workload = workload_to_proto(task->workload());
  }
  kiln::v1::Config to_proto(const autotune::Config &config) const { return config_to_proto(config); }
  // `n` configs: the valid ones in index order, repeated as needed.
  std::vector<kiln::v1::Config> configs(size_t n) const {
    std::vector<autotune::Config> all = task->space().enumerate(64);
    std::vector<kiln::v1::Config> out;
    for (size_t i = 0; i < n; ++i) out.push_back(to_proto(all[i % all.size()]));
    return out;
  }
  kiln::v1::Config with_knob(const std::string &knob, const Json &value) const {
    return to_proto(task->space().from_values({{knob, value}}));
  }
};

TestWorkload small_matmul() {
  return TestWorkload("matmul.x86", Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}));
}

kiln::v1::Target target() {
  kiln::v1::Target out;
  out.set_target(kTarget);
  out.set_device_key(kKey);
  return out;
}

kiln::v1::MeasureOptions quick_options() {
  kiln::v1::MeasureOptions options;
  options.set_number(1);
  options.set_repeat(2);
  options.set_min_repeat_ms(1);
  options.set_threads(1);
  options.set_build_timeout_ms(20000);
  options.set_run_timeout_ms(10000);
  return options;
}

std::string read_address(const fs::path &file, ChildProcess &process) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in(file);
    std::string address;
    if (in >> address && !address.empty()) return address;
    if (!process.running()) break;
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "no address from " << file << "; its log:\n" << process.log();
  return "";
}

// A tracker and runners, each in its own process, in a temporary folder.
class Farm {
 public:
  struct Options {
    int runners = 3;
    std::vector<std::string> tracker_flags = {};
    std::vector<std::string> runner_flags = {};
    TlsFiles tls = {};  // for the daemons and the clients alike
    std::string runner_binary = KILN_RUNNER_TEST_BINARY;
  };

  explicit Farm(Options options) : options_(std::move(options)) {
    char pattern[] = "/tmp/kiln-farm-test-XXXXXX";
    dir_ = mkdtemp(pattern);
    std::ofstream(dir_ / "token") << kToken << "\n";
    std::vector<std::string> argv = {KILN_TRACKER_BINARY,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--token-file",
                                     (dir_ / "token").string(),
                                     "--address-file",
                                     (dir_ / "tracker.address").string(),
                                     "--heartbeat-interval-ms",
                                     "200",
                                     "--heartbeat-timeout-ms",
                                     "1500"};
    add_tls(argv, /*server=*/true);
    argv.insert(argv.end(), options_.tracker_flags.begin(), options_.tracker_flags.end());
    tracker_ = std::make_unique<ChildProcess>(argv, (dir_ / "tracker.log").string());
    tracker_address_ = read_address(dir_ / "tracker.address", *tracker_);
    for (int i = 0; i < options_.runners; ++i) start_runner();
    wait_for_free(options_.runners);
  }
  ~Farm() {
    runners_.clear();
    tracker_.reset();
    if (!::testing::Test::HasFailure()) fs::remove_all(dir_);
  }

  void start_runner() {
    size_t i = runners_.size();
    fs::path address_file = dir_ / ("runner" + std::to_string(i) + ".address");
    std::vector<std::string> argv = {options_.runner_binary,
                                     "--tracker",
                                     tracker_address_,
                                     "--key",
                                     kKey,
                                     "--target",
                                     kTarget,
                                     "--token-file",
                                     (dir_ / "token").string(),
                                     "--address-file",
                                     address_file.string(),
                                     "--build-workers",
                                     "1"};
    add_tls(argv, /*server=*/true);
    argv.insert(argv.end(), options_.runner_flags.begin(), options_.runner_flags.end());
    runners_.push_back(std::make_unique<ChildProcess>(argv, (dir_ / ("runner" + std::to_string(i) + ".log")).string()));
    runner_addresses_.push_back(read_address(address_file, *runners_.back()));
  }

  Endpoint tracker_endpoint(const std::string &token = kToken) const { return {tracker_address_, token, client_tls()}; }
  TlsFiles client_tls() const {
    TlsFiles tls = options_.tls;
    tls.server_name_override = tls.enabled() ? "localhost" : "";
    return tls;
  }
  FarmClient client(int max_attempts = 3) const {
    FarmClientOptions options;
    options.tracker = tracker_endpoint();
    options.runner_tls = client_tls();
    options.acquire_wait = 30s;
    options.max_attempts = max_attempts;
    return FarmClient(options);
  }
  kiln::v1::DeviceSummary summary() const {
    TrackerClient tracker(tracker_endpoint());
    kiln::v1::SummaryReply reply = tracker.summary();
    for (const auto &device : reply.devices()) {
      if (device.device_key() == kKey) return device;
    }
    return {};
  }
  bool wait_for_free(uint32_t n, std::chrono::milliseconds limit = 20s) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (summary().free_runners() == n) return true;
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the tracker does not show " << n << " free runners; runner logs:\n" << logs();
    return false;
  }
  std::string logs() const {
    std::string out = "--- tracker\n" + tracker_->log();
    for (size_t i = 0; i < runners_.size(); ++i) {
      out += "--- runner " + std::to_string(i) + "\n" + runners_[i]->log();
    }
    return out;
  }

  ChildProcess &tracker() { return *tracker_; }
  ChildProcess &runner(size_t i) { return *runners_.at(i); }
  const std::string &runner_address(size_t i) const { return runner_addresses_.at(i); }
  size_t runner_index(const std::string &address) const {
    return static_cast<size_t>(std::find(runner_addresses_.begin(), runner_addresses_.end(), address) -
                               runner_addresses_.begin());
  }
  const fs::path &dir() const { return dir_; }
  const std::string &tracker_address() const { return tracker_address_; }

 private:
  void add_tls(std::vector<std::string> &argv, bool server) const {
    if (!options_.tls.enabled()) return;
    (void)server;
    argv.insert(argv.end(), {"--tls-cert", options_.tls.cert_file, "--tls-key", options_.tls.key_file, "--tls-ca",
                             options_.tls.ca_file});
  }

  Options options_;
  fs::path dir_;
  std::unique_ptr<ChildProcess> tracker_;
  std::string tracker_address_;
  std::vector<std::unique_ptr<ChildProcess>> runners_;
  std::vector<std::string> runner_addresses_;
};

size_t count_ok(const std::vector<kiln::v1::MeasureResult> &results) {
  return static_cast<size_t>(
      std::count_if(results.begin(), results.end(), [](const auto &r) { return r.error() == kiln::v1::OK; }));
}

std::string describe(const std::vector<kiln::v1::MeasureResult> &results) {
  std::map<std::string, int> count;
  std::string first_error;
  for (const auto &r : results) {
    count[kiln::v1::ErrorClass_Name(r.error())] += 1;
    if (r.error() != kiln::v1::OK && first_error.empty()) first_error = r.message();
  }
  std::string out;
  for (const auto &[name, n] : count) out += name + "=" + std::to_string(n) + " ";
  return out + (first_error.empty() ? "" : "first error: " + first_error);
}

// The metrics a port given by --metrics-listen serves (the address is in the process's output),
// read with the strict parser.
kiln::testing::Exposition scrape(ChildProcess &process) {
  int port = 0;
  for (int i = 0; i < 1000 && !(port = kiln::testing::metrics_port(process.log())); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  if (port == 0) throw std::runtime_error("no metrics address in:\n" + process.log());
  const kiln::testing::HttpReply reply = kiln::testing::http_get(port, "/metrics");
  if (reply.status != 200) throw std::runtime_error("/metrics answered " + std::to_string(reply.status));
  if (!reply.has_header("Content-Type: text/plain; version=0.0.4")) throw std::runtime_error(reply.head);
  return kiln::testing::parse_exposition(reply.body);
}

// With --metrics-listen the tracker shows its registered runner and the leases it granted, the
// runner the candidates it built and ran; a garbage request gets an HTTP error and /metrics still
// answers; with --log-format json each event line is a JSON object with the required keys.
TEST(FarmServiceTest, TheTrackerAndRunnerServeMetricsAndLogJson) {
  Farm farm({.runners = 1,
             .tracker_flags = {"--metrics-listen", "127.0.0.1:0", "--log-format", "json"},
             .runner_flags = {"--metrics-listen", "127.0.0.1:0", "--log-format", "json"}});
  TestWorkload wl = small_matmul();
  const std::vector<kiln::v1::MeasureResult> results =
      farm.client().measure(wl.workload, target(), wl.configs(4), quick_options());
  ASSERT_EQ(count_ok(results), 4u) << describe(results) << farm.logs();

  kiln::testing::Exposition tracker = scrape(farm.tracker());
  EXPECT_EQ(tracker.value("kiln_tracker_runners", {{"device_key", kKey}, {"state", "free"}}), 1) << farm.logs();
  EXPECT_EQ(tracker.value("kiln_tracker_runners", {{"device_key", kKey}, {"state", "busy"}}), 0);
  EXPECT_EQ(tracker.value("kiln_tracker_queue_length", {{"device_key", kKey}}), 0);
  EXPECT_EQ(tracker.value("kiln_tracker_runners_registered_total"), 1);
  EXPECT_GE(tracker.value("kiln_tracker_leases_granted_total"), 1);
  EXPECT_EQ(tracker.value("kiln_tracker_leases_granted_total"), tracker.value("kiln_tracker_leases_released_total"));
  EXPECT_EQ(tracker.value("kiln_tracker_leases_active"), 0);
  EXPECT_EQ(tracker.find("kiln_build_info", {{"component", "tracker"}}).size(), 1u);

  kiln::testing::Exposition runner = scrape(farm.runner(0));
  EXPECT_EQ(runner.value("kiln_runner_candidates_total", {{"result", "ok"}}), 4);
  EXPECT_GE(runner.value("kiln_runner_builds_total"), 4);
  EXPECT_GE(runner.value("kiln_runner_runs_total"), 4);
  EXPECT_GE(runner.value("kiln_runner_workers_started_total"), 1);
  EXPECT_EQ(runner.value("kiln_runner_worker_restarts_total"), 0);
  EXPECT_EQ(runner.find("kiln_build_info", {{"component", "runner"}}).size(), 1u);

  const int port = kiln::testing::metrics_port(farm.tracker().log());
  EXPECT_GE(kiln::testing::http_exchange(port, std::string("\x16\x03\x01 hello\r\n\r\n")).status, 400);
  EXPECT_EQ(kiln::testing::http_get(port, "/").status, 404);
  EXPECT_NO_THROW(scrape(farm.tracker()));

  for (ChildProcess *process : {&farm.tracker(), &farm.runner(0)}) {
    std::istringstream lines(process->log());
    int events = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("metrics listening on ", 0) == 0 || line.empty() || line[0] != '{') continue;
      Json event;
      ASSERT_NO_THROW(event = Json::parse(line)) << line;
      for (const char *key : {"ts", "level", "component", "event"}) EXPECT_TRUE(event.contains(key)) << line;
      ++events;
    }
    EXPECT_GE(events, 2) << process->log();
  }
  EXPECT_NE(farm.tracker().log().find("\"event\":\"runner_registered\""), std::string::npos) << farm.logs();
  EXPECT_NE(farm.runner(0).log().find("\"event\":\"registered\""), std::string::npos) << farm.logs();
}

TEST(FarmServiceTest, ABatchOf200TrialsOnThreeRunnersAccountsForEveryTrial) {
  Farm farm({});
  TestWorkload wl = small_matmul();
  std::vector<kiln::v1::Config> configs = wl.configs(200);
  // Three tuners at once, one per runner, each with a third of the trials.
  std::vector<std::future<std::vector<kiln::v1::MeasureResult>>> parts;
  for (size_t part = 0; part < 3; ++part) {
    std::vector<kiln::v1::Config> mine;
    for (size_t i = part; i < configs.size(); i += 3) mine.push_back(configs[i]);
    parts.push_back(std::async(std::launch::async, [&farm, &wl, mine] {
      return farm.client().measure(wl.workload, target(), mine, quick_options());
    }));
  }
  std::vector<kiln::v1::MeasureResult> results;
  std::set<std::string> runners;
  for (auto &part : parts) {
    for (auto &r : part.get()) {
      runners.insert(r.runner_id());
      results.push_back(std::move(r));
    }
  }
  ASSERT_EQ(results.size(), 200u);
  EXPECT_EQ(count_ok(results), 200u) << describe(results) << "\n" << farm.logs();
  for (const auto &r : results) {
    if (r.error() != kiln::v1::OK) continue;
    EXPECT_EQ(r.seconds_size(), 2);
    EXPECT_GT(r.seconds(0), 0.0);
    EXPECT_GT(r.compile_seconds(), 0.0);
    EXPECT_FALSE(r.kiln_version().empty());
  }
  EXPECT_EQ(runners.size(), 3u) << "every runner should have served one tuner";
  EXPECT_TRUE(farm.wait_for_free(3));
}

TEST(FarmServiceTest, ARunnerKilledMidBatchReportsInfraAndItsTrialsSucceedElsewhere) {
  Farm farm({});
  TestWorkload wl = small_matmul();
  std::vector<kiln::v1::Config> configs = wl.configs(30);
  kiln::v1::MeasureOptions slow = quick_options();
  slow.set_min_repeat_ms(100);  // each trial takes at least 0.3 s: the batch lasts 9 s or more
  slow.set_repeat(3);

  TrackerClient tracker(farm.tracker_endpoint());
  kiln::v1::AcquireReply lease = tracker.acquire(kKey, 0, 5s);
  size_t victim = farm.runner_index(lease.address());
  ASSERT_LT(victim, 3u);
  RunnerSession session(lease, kToken, farm.client_tls(), slow);
  // A first batch completes, so the session is under way; the second is killed in the middle.
  std::vector<kiln::v1::MeasureResult> first = session.measure(wl.workload, target(), wl.configs(2));
  ASSERT_EQ(count_ok(first), 2u) << describe(first);
  auto pending = std::async(std::launch::async, [&] { return session.measure(wl.workload, target(), configs); });
  std::this_thread::sleep_for(1500ms);
  farm.runner(victim).signal(SIGKILL);
  ASSERT_EQ(pending.wait_for(20s), std::future_status::ready) << "the client hangs on a dead runner";
  std::vector<kiln::v1::MeasureResult> results = pending.get();
  EXPECT_TRUE(session.broken());
  tracker.release(lease.lease_id(), /*runner_failed=*/true);

  std::vector<kiln::v1::Config> retry;
  size_t finished = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].error() == kiln::v1::INFRA) {
      retry.push_back(configs[i]);
    } else {
      EXPECT_EQ(results[i].error(), kiln::v1::OK) << results[i].message();
      ++finished;
    }
  }
  ASSERT_FALSE(retry.empty()) << "the kill came after the batch";
  EXPECT_LT(finished, configs.size());
  EXPECT_NE(results.back().message().find("stream broke"), std::string::npos) << results.back().message();

  // The unfinished trials succeed on the other runners; the dead one is never handed out again.
  std::vector<kiln::v1::MeasureResult> again = farm.client().measure(wl.workload, target(), retry, quick_options());
  EXPECT_EQ(count_ok(again), retry.size()) << describe(again);
  for (const auto &r : again) EXPECT_NE(r.runner_id(), lease.runner_id());

  // The tracker drops the dead runner within its heartbeat timeout (1.5 s).
  auto killed_at = std::chrono::steady_clock::now();
  bool dropped = false;
  while (std::chrono::steady_clock::now() - killed_at < 5s) {
    kiln::v1::DeviceSummary s = farm.summary();
    if (s.free_runners() + s.busy_runners() + s.quarantined_runners() == 2) {
      dropped = true;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(dropped);
}

TEST(FarmServiceTest, AFarmClientRetriesTheTrialsOfARunnerThatDies) {
  Farm farm({});
  TestWorkload wl = small_matmul();
  std::vector<kiln::v1::Config> configs = wl.configs(30);
  kiln::v1::MeasureOptions slow = quick_options();
  slow.set_min_repeat_ms(100);
  slow.set_repeat(3);
  // Hold two runners so the client gets the third, then kill that one mid-batch and free the
  // others.
  TrackerClient tracker(farm.tracker_endpoint());
  kiln::v1::AcquireReply held1 = tracker.acquire(kKey, 0, 5s);
  kiln::v1::AcquireReply held2 = tracker.acquire(kKey, 0, 5s);
  std::set<size_t> free_ones = {0, 1, 2};
  free_ones.erase(farm.runner_index(held1.address()));
  free_ones.erase(farm.runner_index(held2.address()));
  ASSERT_EQ(free_ones.size(), 1u);
  size_t victim = *free_ones.begin();
  auto pending =
      std::async(std::launch::async, [&] { return farm.client().measure(wl.workload, target(), configs, slow); });
  // Kill the runner once the tracker shows the client's lease (all three runners busy) and a
  // moment more, so that the kill comes in the middle of its batch (9 s or more).
  auto until = std::chrono::steady_clock::now() + 20s;
  while (farm.summary().busy_runners() < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(1500ms);
  farm.runner(victim).signal(SIGKILL);
  tracker.release(held1.lease_id());
  tracker.release(held2.lease_id());
  ASSERT_EQ(pending.wait_for(60s), std::future_status::ready);
  std::vector<kiln::v1::MeasureResult> results = pending.get();
  EXPECT_EQ(count_ok(results), configs.size()) << describe(results) << farm.logs();
}

TEST(FarmServiceTest, EveryFaultYieldsItsErrorClassAndTheRunnerKeepsServing) {
  // A 1 GiB address-space limit per worker, so that exhausting it is quick.
  Farm farm({.runners = 1, .runner_flags = {"--memory-limit-mb", "1024"}});
  kiln::v1::MeasureOptions options = quick_options();
  options.set_build_timeout_ms(2000);
  options.set_run_timeout_ms(2000);
  const std::vector<std::pair<std::string, kiln::v1::ErrorClass>> faults = {
      {"test.segfault", kiln::v1::RUNTIME_DEVICE},   {"test.abort", kiln::v1::RUNTIME_DEVICE},
      {"test.infinite_loop", kiln::v1::RUN_TIMEOUT}, {"test.huge_alloc", kiln::v1::RUNTIME_DEVICE},
      {"test.wrong_answer", kiln::v1::WRONG_ANSWER}, {"test.small_error", kiln::v1::WRONG_ANSWER},
      {"test.slow_compile", kiln::v1::BUILD_TIMEOUT}};
  FarmClient client = farm.client();
  for (const auto &[name, expected] : faults) {
    // Touching 1 GiB page by page takes over 2 s on some machines (a VM's page faults): the
    // allocation's own timeout is long enough that only running out of memory ends it.
    options.set_run_timeout_ms(name == "test.huge_alloc" ? 15000 : 2000);
    TestWorkload wl(name, Json::object({{"n", 1024}}));
    // The faulty config between two good ones, in one batch.
    std::vector<kiln::v1::Config> configs = {wl.with_knob("fault", "off"), wl.with_knob("fault", "on"),
                                             wl.with_knob("fault", "off")};
    std::vector<kiln::v1::MeasureResult> results = client.measure(wl.workload, target(), configs, options);
    ASSERT_EQ(results.size(), 3u);
    EXPECT_EQ(results[0].error(), kiln::v1::OK) << name << ": " << results[0].message();
    EXPECT_EQ(results[1].error(), expected)
        << name << ": " << kiln::v1::ErrorClass_Name(results[1].error()) << " " << results[1].message();
    EXPECT_FALSE(results[1].message().empty()) << name;
    EXPECT_EQ(results[2].error(), kiln::v1::OK) << name << ": " << results[2].message();
  }
  // Still the same runner process, serving.
  EXPECT_TRUE(farm.runner(0).running());
  TestWorkload wl = small_matmul();
  EXPECT_EQ(count_ok(client.measure(wl.workload, target(), wl.configs(3), options)), 3u);
}

TEST(FarmServiceTest, AWrongOrMissingTokenIsUnauthenticatedEverywhere) {
  Farm farm({.runners = 1});
  for (const std::string token : {"", "not-the-token"}) {
    TrackerClient tracker(farm.tracker_endpoint(token));
    try {
      tracker.summary();
      ADD_FAILURE() << "the tracker answered a call with token '" << token << "'";
    } catch (const FarmError &e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAUTHENTICATED) << e.what();
    }
    try {
      runner_info({farm.runner_address(0), token, {}});
      ADD_FAILURE() << "the runner answered Info with token '" << token << "'";
    } catch (const FarmError &e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAUTHENTICATED) << e.what();
    }
    kiln::v1::AcquireReply fake;
    fake.set_lease_id("lease-x");
    fake.set_address(farm.runner_address(0));
    RunnerSession session(fake, token, {}, quick_options());
    TestWorkload wl = small_matmul();
    try {
      session.measure(wl.workload, target(), wl.configs(1));
      ADD_FAILURE() << "the runner measured with token '" << token << "'";
    } catch (const FarmError &e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAUTHENTICATED) << e.what();
    }
  }
  kiln::v1::InfoReply info = runner_info({farm.runner_address(0), kToken, {}});
  EXPECT_EQ(info.device_key(), kKey);
  EXPECT_EQ(info.target(), driver::concrete_target(kTarget));
  EXPECT_FALSE(info.kiln_version().empty());
  EXPECT_GT(info.cpu_cores(), 0u);
  EXPECT_FALSE(info.has_gpu()) << "a CPU runner reports no GPU";
  bool has_matmul = false, has_test = false;
  for (const auto &t : info.templates()) {
    has_matmul |= t.name() == "matmul.x86" && t.version() >= 1;
    has_test |= t.name() == "test.segfault";
  }
  EXPECT_TRUE(has_matmul);
  EXPECT_TRUE(has_test) << "kiln-runner-test has the fault-injection templates";
}

std::string file_contents(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(FarmServiceTest, TheProductionRunnerRefusesTheFaultTemplates) {
  Farm farm({.runners = 1, .runner_binary = KILN_RUNNER_BINARY});
  // A fault template is an unknown template to kiln-runner: the request is refused, nothing runs.
  TestWorkload segfault("test.segfault", Json::object({{"n", 1024}}));
  FarmClient client = farm.client(/*max_attempts=*/1);
  try {
    client.measure(segfault.workload, target(), {segfault.with_knob("fault", "on")}, quick_options());
    ADD_FAILURE() << "kiln-runner measured test.segfault";
  } catch (const FarmError &e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown operator template 'test.segfault'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(farm.runner(0).running());
  kiln::v1::InfoReply info = runner_info({farm.runner_address(0), kToken, {}});
  EXPECT_GT(info.templates_size(), 0);
  for (const auto &t : info.templates()) EXPECT_NE(t.name().rfind("test.", 0), 0u) << t.name();
  TestWorkload wl = small_matmul();
  EXPECT_EQ(count_ok(client.measure(wl.workload, target(), wl.configs(2), quick_options())), 2u);

  // No flag turns them on.
  auto [code, out] = testing::run_command({KILN_RUNNER_BINARY, "--tracker", farm.tracker_address(), "--key", kKey,
                                           "--token-file", (farm.dir() / "token").string(), "--enable-test-templates"},
                                          (farm.dir() / "flag.log").string());
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--enable-test-templates"), std::string::npos) << out;

  // The executable holds neither the templates nor their faults; the test runner holds both.
  const std::string production = file_contents(KILN_RUNNER_BINARY);
  const std::string test_build = file_contents(KILN_RUNNER_TEST_BINARY);
  ASSERT_FALSE(production.empty());
  for (const char *text : {"test.segfault", "fault injection"}) {
    EXPECT_EQ(production.find(text), std::string::npos) << text;
    EXPECT_NE(test_build.find(text), std::string::npos) << text;
  }
}

// An authentication failure is not transient: a runner whose token the tracker refuses exits at
// once with a message that says what to check, instead of retrying forever.
TEST(FarmServiceTest, ARunnerWithTheWrongTokenExitsWithAClearError) {
  Farm farm({.runners = 0});
  std::ofstream(farm.dir() / "wrong.token") << "not-the-farm-token\n";
  const auto start = std::chrono::steady_clock::now();
  auto [code, out] = testing::run_command({KILN_RUNNER_BINARY, "--tracker", farm.tracker_address(), "--key", kKey,
                                           "--token-file", (farm.dir() / "wrong.token").string()},
                                          (farm.dir() / "wrong-token.log").string(), 20s);
  EXPECT_EQ(code, 1) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(out.find("refused this runner"), std::string::npos) << out;
  EXPECT_NE(out.find("UNAUTHENTICATED: wrong farm token"), std::string::npos) << out;
  EXPECT_NE(out.find("--token-file"), std::string::npos) << out;
  EXPECT_EQ(out.find("; retrying"), std::string::npos) << out;
  EXPECT_EQ(farm.summary().free_runners(), 0u);
}

// A runner whose --target its host cannot run refuses to start, rather than registering and
// failing every measurement.
TEST(FarmServiceTest, ARunnerForATargetItsHostCannotRunRefusesToStart) {
  Farm farm({.runners = 0});
#if defined(__aarch64__)
  const std::string cross = "llvm -mtriple=x86_64-linux-gnu";
#else
  const std::string cross = "llvm -mtriple=aarch64-linux-gnu";
#endif
  auto [code, out] = testing::run_command({KILN_RUNNER_BINARY, "--tracker", farm.tracker_address(), "--key", kKey,
                                           "--token-file", (farm.dir() / "token").string(), "--target", cross},
                                          (farm.dir() / "cross.log").string(), 20s);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("event=fatal"), std::string::npos) << out;
  EXPECT_NE(out.find("cannot run on this host"), std::string::npos) << out;
  EXPECT_EQ(out.find("serving"), std::string::npos) << out;
  EXPECT_EQ(farm.summary().free_runners(), 0u);

  // A CUDA runner on a host without the CUDA driver stops at start, saying so.
  if (void *driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(driver);
  } else {
    auto [cuda_code, cuda_out] =
        testing::run_command({KILN_RUNNER_BINARY, "--tracker", farm.tracker_address(), "--key", "h100", "--token-file",
                              (farm.dir() / "token").string(), "--target", "cuda -arch=sm_90"},
                             (farm.dir() / "cuda.log").string(), 20s);
    EXPECT_EQ(cuda_code, 1) << cuda_out;
    EXPECT_NE(cuda_out.find("target \\\"cuda -arch=sm_90\\\" cannot run on this host: no CUDA driver on this host: "
                            "libcuda.so.1 not found"),
              std::string::npos)
        << cuda_out;
  }
}

TEST(FarmServiceTest, MalformedAndAbsurdRequestsAreInvalidArgumentsAndTheRunnerLives) {
  Farm farm({.runners = 1});
  TestWorkload wl = small_matmul();
  FarmClient client = farm.client(/*max_attempts=*/1);
  auto expect_invalid = [&](const std::string &what, const kiln::v1::Workload &workload,
                            const std::vector<kiln::v1::Config> &configs, const kiln::v1::MeasureOptions &options,
                            const kiln::v1::Target &tgt = target()) {
    try {
      client.measure(workload, tgt, configs, options);
      ADD_FAILURE() << what << ": accepted";
    } catch (const FarmError &e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << what << ": " << e.what();
    }
  };
  kiln::v1::MeasureOptions absurd = quick_options();
  absurd.set_repeat(100000000);
  expect_invalid("repeat 1e8", wl.workload, wl.configs(1), absurd);
  absurd = quick_options();
  absurd.set_run_timeout_ms(4000000000u);
  expect_invalid("run timeout of 46 days", wl.workload, wl.configs(1), absurd);
  expect_invalid("5000 configs in a batch", wl.workload, wl.configs(5000), quick_options());
  kiln::v1::Workload bad = wl.workload;
  bad.set_template_name("no_such_template");
  expect_invalid("unknown template", bad, wl.configs(1), quick_options());
  bad = wl.workload;
  bad.set_args_json("{\"a\": [1, 2");
  expect_invalid("malformed args", bad, wl.configs(1), quick_options());
  bad = wl.workload;
  bad.set_args_json(Json::object({{"a", tensor({100000, 100000})}, {"b", tensor({100000, 100000})}}).dump());
  bad.clear_key();
  expect_invalid("80 GB of tensors", bad, wl.configs(1), quick_options());
  // A message over the 16 MiB limit is refused by gRPC itself.
  bad = wl.workload;
  bad.set_args_json(std::string(20 << 20, ' ') + wl.workload.args_json());
  try {
    client.measure(bad, target(), wl.configs(1), quick_options());
    ADD_FAILURE() << "a 20 MiB request was accepted";
  } catch (const FarmError &e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << e.what();
  }
  bad.set_args_json(std::string(100000, ' ') + wl.workload.args_json());
  expect_invalid("100 kB of arguments", bad, wl.configs(1), quick_options());
  kiln::v1::Target other = target();
  other.set_target("llvm -mcpu=cortex-a72 -mtriple=aarch64-linux-gnu");
  expect_invalid("another target", wl.workload, wl.configs(1), quick_options(), other);

  // A stream that starts with a batch instead of a session.
  {
    auto stub = kiln::v1::Runner::NewStub(make_channel(farm.runner_address(0), {}));
    grpc::ClientContext context;
    attach_token(context, kToken);
    auto stream = stub->Measure(&context);
    kiln::v1::MeasureRequest request;
    request.mutable_batch()->set_batch_id(1);
    stream->Write(request);
    stream->WritesDone();
    kiln::v1::MeasureReply reply;
    EXPECT_FALSE(stream->Read(&reply));
    grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  }
  // A config that is not one of the space's is a result, not a refused request.
  kiln::v1::Config stale = wl.configs(1)[0];
  stale.set_space_fingerprint(std::string(64, 'a'));
  kiln::v1::Config garbage;
  garbage.set_knobs_json("[[\"no_such_knob\", 3]]");
  garbage.set_space_fingerprint(wl.task->space().fingerprint());
  std::vector<kiln::v1::MeasureResult> results =
      client.measure(wl.workload, target(), {stale, garbage, wl.configs(1)[0]}, quick_options());
  EXPECT_EQ(results[0].error(), kiln::v1::INSTANTIATION) << results[0].message();
  EXPECT_EQ(results[1].error(), kiln::v1::INSTANTIATION) << results[1].message();
  EXPECT_EQ(results[2].error(), kiln::v1::OK) << results[2].message();
  EXPECT_TRUE(farm.runner(0).running());
  EXPECT_TRUE(farm.wait_for_free(1));
}

TEST(FarmServiceTest, ALeaseRequestForAKeyWithoutRunnersIsToldAtOnce) {
  Farm farm({.runners = 1});
  // Past the tracker's start-up grace (its heartbeat timeout, 1.5 s), in which runners register.
  std::this_thread::sleep_for(1600ms);
  TrackerClient tracker(farm.tracker_endpoint());
  auto start = std::chrono::steady_clock::now();
  try {
    tracker.acquire("no-such-device", 0, 30s);
    ADD_FAILURE() << "a runner of a key nobody serves was granted";
  } catch (const FarmError &e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::FAILED_PRECONDITION) << e.what();
    EXPECT_NE(std::string(e.what()).find("no runner is registered under device key \"no-such-device\" (device keys "
                                         "with runners: " +
                                         std::string(kKey) + ")"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  // `kiln measure` says so too, at once.
  start = std::chrono::steady_clock::now();
  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  auto [code, out] = testing::run_command(
      {KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file", (farm.dir() / "token").string(),
       "--template", "matmul.x86", "--args", args, "--target", kTarget, "--device", "no-such-device"},
      (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("kiln measure: error: "), std::string::npos) << out;
  EXPECT_NE(out.find("no runner is registered under device key \"no-such-device\""), std::string::npos) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // All runners busy: the request waits until its deadline.
  kiln::v1::AcquireReply held = tracker.acquire(kKey, 0, 5s);
  try {
    tracker.acquire(kKey, 0, 200ms);
    ADD_FAILURE() << "a busy runner was granted twice";
  } catch (const FarmError &e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::DEADLINE_EXCEEDED) << e.what();
  }
  EXPECT_TRUE(tracker.release(held.lease_id()));
}

TEST(FarmServiceTest, ALeaseForgottenByACrashedTunerExpires) {
  Farm farm({.runners = 1, .tracker_flags = {"--lease-idle-timeout-ms", "800"}});
  TrackerClient tracker(farm.tracker_endpoint());
  kiln::v1::AcquireReply forgotten = tracker.acquire(kKey, 0, 5s);
  EXPECT_EQ(farm.summary().busy_runners(), 1u);
  // A measurement session under a lease keeps it, however long it lasts.
  TestWorkload wl = small_matmul();
  kiln::v1::MeasureOptions slow = quick_options();
  slow.set_min_repeat_ms(100);
  slow.set_repeat(3);
  {
    RunnerSession session(forgotten, kToken, farm.client_tls(), slow);
    std::vector<kiln::v1::MeasureResult> results = session.measure(wl.workload, target(), wl.configs(6));
    EXPECT_EQ(count_ok(results), 6u) << describe(results);
    EXPECT_TRUE(session.close().ok());
  }
  // Then nobody releases it: the tracker takes it back.
  kiln::v1::AcquireReply next = tracker.acquire(kKey, 0, 5s);
  EXPECT_NE(next.lease_id(), forgotten.lease_id());
  EXPECT_FALSE(tracker.release(forgotten.lease_id()));
  EXPECT_TRUE(tracker.release(next.lease_id()));
}

TEST(FarmServiceTest, DaemonsShutDownCleanlyOnSigtermAndSigint) {
  Farm farm({.runners = 2});
  farm.runner(0).signal(SIGTERM);
  farm.runner(1).signal(SIGINT);
  for (size_t i = 0; i < 2; ++i) {
    std::optional<int> status = farm.runner(i).wait_for(10s);
    ASSERT_TRUE(status.has_value()) << "runner " << i << " did not stop";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << farm.runner(i).log();
  }
  farm.tracker().signal(SIGTERM);
  std::optional<int> status = farm.tracker().wait_for(10s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << farm.tracker().log();
}

TEST(FarmServiceTest, MutualTlsFarmServesTlsClientsAndRefusesPlaintextOnes) {
  const std::string data = KILN_TEST_DATA_DIR;
  TlsFiles tls{data + "/server.pem", data + "/server.key", data + "/ca.pem", ""};
  Farm farm({.runners = 1, .tls = tls});
  TestWorkload wl = small_matmul();
  std::vector<kiln::v1::MeasureResult> results =
      farm.client().measure(wl.workload, target(), wl.configs(2), quick_options());
  EXPECT_EQ(count_ok(results), 2u) << describe(results) << farm.logs();
  // Plaintext, and TLS without a client certificate: refused.
  TrackerClient plaintext({farm.tracker_address(), kToken, {}});
  EXPECT_THROW(plaintext.summary(), FarmError);
  TlsFiles no_client_cert{"", "", data + "/ca.pem", "localhost"};
  TrackerClient anonymous({farm.tracker_address(), kToken, no_client_cert});
  EXPECT_THROW(anonymous.summary(), FarmError);
}

// `kiln measure --config` in the forms a user writes, and `--db` recording the result as a job of
// its own, which `kiln db best --template` then finds with the arguments as the user wrote them.
TEST(FarmServiceTest, KilnMeasureTakesConfigFormsAndRecordsInTheLog) {
  Farm farm({.runners = 1});
  const std::string token_file = (farm.dir() / "token").string();
  const std::string log = (farm.dir() / "measured.db").string();
  const std::string cli_log = (farm.dir() / "cli.log").string();
  // The arguments as a user writes them; the log keeps their canonical form.
  const std::string args = R"({"a":{"shape":[16,32]},"b":{"shape":[32,32]}})";
  TestWorkload wl = small_matmul();
  const autotune::Config base = wl.task->default_config();
  // A valid config that differs from the default in one knob, named in the knob=value form.
  std::mt19937_64 rng(3);
  const std::optional<autotune::Config> neighbour = wl.task->space().neighbour(base, rng);
  ASSERT_TRUE(neighbour.has_value());
  const autotune::Config want = *neighbour;
  std::string changed;
  for (const auto &k : wl.task->space().knobs()) {
    if (want.value(k.name) != base.value(k.name)) changed = k.name + "=" + want.value(k.name).dump() + ";";
  }
  const Json want_json = Json::parse(want.to_json());
  const Json no_space = Json::object({{"knobs", want_json["knobs"]}});
  int64_t job = 0;
  for (const std::string &config : {changed, no_space.dump()}) {
    SCOPED_TRACE(config);
    auto [code, out] =
        testing::run_command({KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file",
                              token_file, "--template", "matmul.x86", "--args", args, "--target", kTarget, "--device",
                              kKey, "--config", config, "--db", log, "--json"},
                             cli_log);
    ASSERT_EQ(code, 0) << out;
    const size_t json_at = out.find("{\n");
    ASSERT_NE(json_at, std::string::npos) << out;
    const Json result = Json::parse(out.substr(json_at));
    EXPECT_EQ(result["config"]["index"].as_int(), want.index()) << out;
    EXPECT_EQ(result["job_id"].as_int(), ++job) << out;
    EXPECT_EQ(result["record_id"].as_int(), job) << out;
    EXPECT_EQ(out.find("created new tuning log") != std::string::npos, job == 1) << out;
  }
  auto [code, out] = testing::run_command({KILN_CLI_BINARY, "db", "best", "--db", log, "--template", "matmul.x86",
                                           "--args", args, "-t", kTarget, "-d", kKey, "--json"},
                                          cli_log);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"index\": " + std::to_string(want.index())), std::string::npos) << out;
  std::tie(code, out) = testing::run_command({KILN_CLI_BINARY, "db", "jobs", "--db", log}, cli_log);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("measure matmul.x86"), std::string::npos) << out;
  EXPECT_NE(out.find("done"), std::string::npos) << out;

  // A config that is not of the template: an error before anything is measured or recorded.
  std::tie(code, out) =
      testing::run_command({KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file", token_file,
                            "--template", "matmul.x86", "--args", args, "--target", kTarget, "--device", kKey,
                            "--config", "no_such_knob=1", "--db", (farm.dir() / "other.db").string()},
                           cli_log);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("kiln measure: error: config for template matmul.x86: unknown knob 'no_such_knob'"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(farm.dir() / "other.db"));
}

// Ctrl-C of `kiln measure` releases its lease: the runner is free at once, not after the tracker's
// lease idle timeout (60 s here).
TEST(FarmServiceTest, AnInterruptedKilnMeasureReleasesItsLease) {
  Farm farm({.runners = 1});
  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    // At least 20 repeats of 200 ms: the measurement lasts 4 s or more.
    ChildProcess measure({KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file",
                          (farm.dir() / "token").string(), "--template", "matmul.x86", "--args", args, "--target",
                          kTarget, "--device", kKey, "--repeat", "20", "--min-repeat-ms", "200"},
                         (farm.dir() / "interrupted.log").string());
    auto until = std::chrono::steady_clock::now() + 20s;
    while (farm.summary().busy_runners() != 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_EQ(farm.summary().busy_runners(), 1u) << measure.log();
    std::this_thread::sleep_for(300ms);  // the session is under way
    measure.signal(sig);
    std::optional<int> status = measure.wait_for(10s);
    ASSERT_TRUE(status.has_value()) << measure.log();
    EXPECT_TRUE(WIFEXITED(*status)) << measure.log();
    EXPECT_EQ(WEXITSTATUS(*status), 128 + sig) << measure.log();
    EXPECT_NE(measure.log().find("kiln measure: interrupted"), std::string::npos) << measure.log();
    EXPECT_NE(measure.log().find("released lease"), std::string::npos) << measure.log();
    // Free again within a second or two.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(farm.wait_for_free(1, 3s));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  }
}

TEST(FarmServiceTest, KilnFarmStatusAndKilnMeasure) {
  Farm farm({});
  const std::string token_file = (farm.dir() / "token").string();
  auto [code, out] = testing::run_command(
      {KILN_CLI_BINARY, "farm", "status", "--tracker", farm.tracker_address(), "--token-file", token_file},
      (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(kKey), std::string::npos) << out;
  EXPECT_NE(out.find("free"), std::string::npos) << out;
  EXPECT_NE(out.find("targets"), std::string::npos) << out;
  EXPECT_NE(out.find("\"" + driver::concrete_target(kTarget) + "\""), std::string::npos) << out;

  std::tie(code, out) = testing::run_command(
      {KILN_CLI_BINARY, "farm", "status", "--json", "--tracker", farm.tracker_address(), "--token-file", token_file},
      (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"free_runners\": 3"), std::string::npos) << out;
  // Each key's targets, the runners' canonical strings.
  const Json status = Json::parse(out);
  ASSERT_EQ(status.size(), 1u) << out;
  ASSERT_EQ(status[0]["targets"].size(), 1u) << out;
  EXPECT_EQ(status[0]["targets"][0].as_string(), driver::concrete_target(kTarget)) << out;

  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  std::tie(code, out) = testing::run_command(
      {KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file", token_file, "--template",
       "matmul.x86", "--args", args, "--target", kTarget, "--device", kKey, "--repeat", "3", "--json"},
      (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"error\": \"OK\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"gflops\""), std::string::npos) << out;

  // A result other than OK is printed, and the exit status is 1.
  std::tie(code, out) = testing::run_command({KILN_CLI_BINARY,   "measure",  "--tracker",        farm.tracker_address(),
                                              "--token-file",    token_file, "--template",       "matmul.x86",
                                              "--args",          args,       "--target",         kTarget,
                                              "--device",        kKey,       "--repeat",         "3",
                                              "--min-repeat-ms", "100",      "--run-timeout-ms", "5"},
                                             (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("RUN_TIMEOUT"), std::string::npos) << out;
  EXPECT_EQ(out.find("error:"), std::string::npos) << out;

  // No token: a clear error, exit status 1.
  std::tie(code, out) = testing::run_command({KILN_CLI_BINARY, "farm", "status", "--tracker", farm.tracker_address(),
                                              "--token-file", (farm.dir() / "missing").string()},
                                             (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("kiln farm status: error: cannot read the token file"), std::string::npos) << out;

  // No tracker at the address: the farm's error, exit status 1, not an internal error.
  std::tie(code, out) =
      testing::run_command({KILN_CLI_BINARY, "farm", "status", "--tracker", "127.0.0.1:1", "--token-file", token_file},
                           (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("kiln farm status: error: tracker summary: UNAVAILABLE"), std::string::npos) << out;
}

TEST(FarmServiceTest, TheLeaseOfAClientKilledWithSigkillIsFreeWithinTwoSeconds) {
  // The idle timeout is the default minute: only the tracker noticing that the client is gone
  // frees the runner in time.
  Farm farm({.runners = 1});
  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  ChildProcess measure({KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file",
                        (farm.dir() / "token").string(), "--template", "matmul.x86", "--args", args, "--target",
                        kTarget, "--device", kKey, "--repeat", "50", "--min-repeat-ms", "200"},
                       (farm.dir() / "killed.log").string());
  auto until = std::chrono::steady_clock::now() + 20s;
  while (farm.summary().busy_runners() != 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(farm.summary().busy_runners(), 1u) << measure.log();
  std::this_thread::sleep_for(500ms);  // the session is under way
  measure.signal(SIGKILL);
  ASSERT_TRUE(measure.wait_for(5s).has_value());
  const auto killed_at = std::chrono::steady_clock::now();
  TrackerClient tracker(farm.tracker_endpoint());
  try {
    kiln::v1::AcquireReply next = tracker.acquire(kKey, 0, 5s);
    EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 2s);
    EXPECT_TRUE(tracker.release(next.lease_id()));
  } catch (const FarmError &e) {
    ADD_FAILURE() << "the runner of a killed client is still leased: " << e.what() << "\n" << farm.logs();
  }
}

TEST(FarmServiceTest, KilnMeasureSaysOnceThatItWaitsForABusyRunner) {
  Farm farm({.runners = 1});
  TrackerClient tracker(farm.tracker_endpoint());
  kiln::v1::AcquireReply held = tracker.acquire(kKey, 0, 5s);
  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  // Not a terminal: one plain line when the wait starts, then the outcome.
  auto [code, out] = testing::run_command(
      {KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file", (farm.dir() / "token").string(),
       "--template", "matmul.x86", "--args", args, "--target", kTarget, "--device", kKey, "--wait-ms", "2500"},
      (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 1) << out;
  const std::string line = std::string("waiting for a runner of ") + kKey + ": 1 busy, 1 in queue";
  const size_t at = out.find(line);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find(line, at + 1), std::string::npos) << "the line is printed once\n" << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_NE(out.find("DEADLINE_EXCEEDED"), std::string::npos) << out;
  EXPECT_TRUE(tracker.release(held.lease_id()));
}

TEST(FarmServiceTest, KilnMeasureNamesTheRunnerThatDiedUnderItsLease) {
  Farm farm({.runners = 1});
  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  ChildProcess measure({KILN_CLI_BINARY,   "measure",
                        "--tracker",       farm.tracker_address(),
                        "--token-file",    (farm.dir() / "token").string(),
                        "--template",      "matmul.x86",
                        "--args",          args,
                        "--target",        kTarget,
                        "--device",        kKey,
                        "--repeat",        "50",
                        "--min-repeat-ms", "200",
                        "--wait-ms",       "3000"},
                       (farm.dir() / "orphaned.log").string());
  auto until = std::chrono::steady_clock::now() + 20s;
  while (farm.summary().busy_runners() != 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(farm.summary().busy_runners(), 1u) << measure.log();
  std::this_thread::sleep_for(500ms);
  farm.runner(0).signal(SIGKILL);
  std::optional<int> status = measure.wait_for(30s);
  ASSERT_TRUE(status.has_value()) << measure.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << measure.log();
  const std::string out = measure.log();
  EXPECT_NE(out.find("kiln measure: error: "), std::string::npos) << out;
  EXPECT_NE(out.find("runner-"), std::string::npos) << out;
  EXPECT_NE(out.find(farm.runner_address(0)), std::string::npos) << "the dead runner is named\n" << out;
}

TEST(FarmServiceTest, ANativeTargetIsTheRunnersOwnCpuInResultsAndRecords) {
  Farm farm({.runners = 1});
  const std::string concrete = driver::concrete_target(kTarget);
  EXPECT_EQ(contracts::Target::parse(concrete).value("mcpu"), driver::host_cpu_name());
  EXPECT_EQ(concrete.find("native"), std::string::npos) << concrete;
  // The runner registers and describes itself with the concrete target.
  EXPECT_EQ(farm.summary().targets_size(), 1);
  EXPECT_EQ(farm.summary().targets(0), concrete);
  // A request for "-mcpu=native" is measured; the result names the CPU.
  TestWorkload wl = small_matmul();
  std::vector<kiln::v1::MeasureResult> results =
      farm.client().measure(wl.workload, target(), wl.configs(1), quick_options());
  ASSERT_EQ(count_ok(results), 1u) << describe(results);
  EXPECT_EQ(results[0].target(), concrete);
  // kiln measure prints it and records under it.
  const std::string log = (farm.dir() / "native.db").string();
  const std::string args = Json::object({{"a", tensor({16, 32})}, {"b", tensor({32, 32})}}).dump();
  auto [code, out] =
      testing::run_command({KILN_CLI_BINARY, "measure", "--tracker", farm.tracker_address(), "--token-file",
                            (farm.dir() / "token").string(), "--template", "matmul.x86", "--args", args, "--target",
                            kTarget, "--device", kKey, "--repeat", "2", "--json", "--db", log},
                           (farm.dir() / "cli.log").string());
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(Json::parse(out.substr(out.find('{')))["target"].as_string(), concrete) << out;
  std::tie(code, out) = testing::run_command({KILN_CLI_BINARY, "db", "best", "--db", log, "--template", "matmul.x86",
                                              "--args", args, "-t", concrete, "-d", kKey, "--json"},
                                             (farm.dir() / "cli.log").string());
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(concrete), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln::rpc
