// The tuning service measuring on a device farm, as a user runs it: kilnd --tracker, a kiln-tracker
// and two kiln-runner processes, all on loopback, tuning tiny matmuls. Two jobs of different
// priorities run at once and record every trial once; a runner SIGKILLed in the middle of a batch
// costs nothing but a retry on the other runner; while the tracker is down the job waits (WAITING)
// and goes on when the tracker is back on its port; a pause stops a farm job within two seconds,
// mid-batch, and it resumes; kilnd serves TLS clients and refuses plaintext ones.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "db/tuning_db.h"
#include "kiln/v1/tuner.grpc.pb.h"
#include "rpc_server/credentials.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/shared_token.h"
#include "tests/rpc_server/child_process.h"
#include "tests/temp_dir.h"

#ifndef KILND_BINARY
#error "KILND_BINARY must name the kilnd executable"
#endif
#ifndef KILN_TRACKER_BINARY
#error "KILN_TRACKER_BINARY must name the kiln-tracker executable"
#endif
#ifndef KILN_RUNNER_BINARY
#error "KILN_RUNNER_BINARY must name the kiln-runner executable"
#endif
#ifndef KILN_CLI_BINARY
#error "KILN_CLI_BINARY must name the kiln executable"
#endif

namespace kiln::tuner {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using kiln::testing::ChildProcess;
namespace v1 = kiln::v1;

constexpr char kToken[] = "kilnd-farm-secret";
constexpr char kKey[] = "test-cpu";
constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kMatmul32[] = R"({"a":{"shape":[32,32]},"b":{"shape":[32,32]}})";
constexpr char kMatmul16[] = R"({"a":{"shape":[16,32]},"b":{"shape":[32,32]}})";

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct JobRecord {
  std::string workload;
  int64_t config = 0;
  db::ErrorClass error = db::ErrorClass::kOk;
  std::string message, runner;
};

struct JobOptions {
  std::string args = kMatmul32;
  int64_t trials = 24;
  int64_t batch = 4;
  int priority = 0;
  // Each repeat of a timing lasts at least this long (a slow batch for the pause).
  uint32_t min_repeat_ms = 1;
};

class KilndFarmTest : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(file("token")) << kToken << "\n"; }

  void TearDown() override {
    if (HasFailure()) std::cerr << logs();
    daemon_.reset();
    runners_.clear();
    tracker_.reset();
  }

  std::string file(const std::string &name) const { return dir_.file(name); }

  static std::string read(const std::string &path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // The address a daemon writes to `address_file` once it serves.
  std::string wait_for_address(const std::string &address_file, ChildProcess &process) {
    for (auto until = Clock::now() + 60s; Clock::now() < until;) {
      std::string address;
      std::ifstream in(address_file);
      if (in >> address && !address.empty()) return address;
      if (!process.running()) break;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "no address in " << address_file << "; its log:\n" << process.log();
    return "";
  }

  // The tracker, on any free port the first time and on the same port after that.
  void start_tracker() {
    std::filesystem::remove(file("tracker.address"));
    tracker_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{KILN_TRACKER_BINARY, "--listen",
                                 tracker_address_.empty() ? "127.0.0.1:0" : tracker_address_, "--token-file",
                                 file("token"), "--address-file", file("tracker.address"), "--heartbeat-interval-ms",
                                 "200", "--heartbeat-timeout-ms", "1500"},
        file("tracker.log"));
    tracker_address_ = wait_for_address(file("tracker.address"), *tracker_);
  }

  void start_runner() {
    const std::string n = std::to_string(runners_.size());
    runners_.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{KILN_RUNNER_BINARY, "--tracker", tracker_address_, "--key", kKey, "--target", kTarget,
                                 "--token-file", file("token"), "--address-file", file("runner" + n + ".address"),
                                 "--build-workers", "1"},
        file("runner" + n + ".log")));
    wait_for_address(file("runner" + n + ".address"), *runners_.back());
  }

  void start_farm() {
    start_tracker();
    start_runner();
    start_runner();
    ASSERT_TRUE(wait_for_runners([](const v1::DeviceSummary &d) { return d.free_runners() == 2; }));
  }

  v1::DeviceSummary summary() {
    try {
      const v1::SummaryReply reply = rpc::TrackerClient({tracker_address_, kToken, {}}).summary();
      for (const auto &d : reply.devices()) {
        if (d.device_key() == kKey) return d;
      }
    } catch (const rpc::FarmError &) {
    }
    return {};
  }

  bool wait_for_runners(const std::function<bool(const v1::DeviceSummary &)> &ready,
                        std::chrono::milliseconds timeout = 30s) {
    for (auto until = Clock::now() + timeout; Clock::now() < until; std::this_thread::sleep_for(20ms)) {
      if (ready(summary())) return true;
    }
    ADD_FAILURE() << "the tracker never showed the runners wanted: " << summary().DebugString();
    return false;
  }

  void start_daemon(const std::vector<std::string> &extra = {}) {
    std::filesystem::remove(file("kilnd.address"));
    std::vector<std::string> argv = {KILND_BINARY,
                                     "--db",
                                     file("kiln.db"),
                                     "--tracker",
                                     tracker_address_,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--token-file",
                                     file("token"),
                                     "--max-jobs",
                                     "2",
                                     "--target",
                                     kTarget,
                                     "--device-key",
                                     kKey,
                                     "--address-file",
                                     file("kilnd.address"),
                                     "--give-up-after",
                                     "120"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<ChildProcess>(argv, file("kilnd.log"));
    address_ = wait_for_address(file("kilnd.address"), *daemon_);
    if (stub_ == nullptr) {
      stub_ = v1::Tuner::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    }
  }

  std::unique_ptr<grpc::ClientContext> context() {
    auto c = std::make_unique<grpc::ClientContext>();
    rpc::attach_token(*c, kToken);
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  }

  static v1::SubmitJobRequest job_request(const JobOptions &o) {
    v1::SubmitJobRequest request;
    v1::JobSpec *spec = request.mutable_spec();
    spec->set_name("matmul");
    v1::TuneTask *task = spec->add_tasks();
    task->set_template_name("matmul.x86");
    task->set_args_json(o.args);
    spec->set_trials(o.trials);
    spec->set_batch_size(o.batch);
    spec->set_strategy("random");
    spec->set_priority(o.priority);
    spec->mutable_measure()->set_threads(1);
    spec->mutable_measure()->set_repeat(3);
    spec->mutable_measure()->set_min_repeat_ms(o.min_repeat_ms);
    return request;
  }

  int64_t submit(const JobOptions &o) {
    v1::SubmitJobReply reply;
    grpc::Status status = stub_->SubmitJob(context().get(), job_request(o), &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.job().id();
  }

  v1::JobInfo get(int64_t job) {
    v1::JobRequest request;
    request.set_job_id(job);
    v1::JobInfo info;
    grpc::Status status = stub_->GetJob(context().get(), request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  bool wait_until(int64_t job, const std::function<bool(const v1::JobInfo &)> &done,
                  std::chrono::milliseconds timeout = 120s) {
    for (auto until = Clock::now() + timeout; Clock::now() < until; std::this_thread::sleep_for(20ms)) {
      if (done(get(job))) return true;
    }
    return false;
  }

  std::vector<JobRecord> records(int64_t job) {
    db::TuningDb log = db::TuningDb::open(file("kiln.db"));
    std::vector<JobRecord> out;
    log.for_each_record({}, [&](const db::Record &r) {
      if (r.job_id && *r.job_id == job)
        out.push_back({r.workload.key, r.config.index, r.error, r.error_message, r.runner});
    });
    return out;
  }

  // Every trial the job reports is in the log, valid, and no config is there twice.
  void expect_every_trial_recorded_once(int64_t job, int64_t trials) {
    const std::vector<JobRecord> all = records(job);
    EXPECT_EQ(get(job).trials_done(), trials);
    EXPECT_EQ(static_cast<int64_t>(all.size()), trials);
    std::set<std::pair<std::string, int64_t>> configs;
    for (const JobRecord &r : all) {
      configs.insert({r.workload, r.config});
      EXPECT_EQ(r.error, db::ErrorClass::kOk) << "config " << r.config << ": " << r.message;
    }
    EXPECT_EQ(configs.size(), all.size()) << "a config recorded twice";
  }

  std::string logs() const {
    std::string out = "--- kilnd\n" + read(file("kilnd.log")) + "--- tracker\n" + read(file("tracker.log"));
    for (size_t i = 0; i < runners_.size(); ++i) {
      out += "--- runner " + std::to_string(i) + "\n" + read(file("runner" + std::to_string(i) + ".log"));
    }
    return out;
  }

  test::TempDir dir_{"kiln_kilnd_farm"};
  std::unique_ptr<ChildProcess> tracker_;
  std::string tracker_address_;
  std::vector<std::unique_ptr<ChildProcess>> runners_;
  std::unique_ptr<ChildProcess> daemon_;
  std::string address_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

TEST_F(KilndFarmTest, TwoJobsOfDifferentPrioritiesRunAtOnceAndRecordEveryTrialOnce) {
  start_farm();
  start_daemon();
  const int64_t low = submit({.args = kMatmul32, .trials = 24, .priority = 1});
  const int64_t high = submit({.args = kMatmul16, .trials = 24, .priority = 10});
  bool together = false;
  for (auto until = Clock::now() + 120s; Clock::now() < until; std::this_thread::sleep_for(20ms)) {
    const v1::JobInfo a = get(low), b = get(high);
    together = together || (a.state() == v1::JOB_STATE_RUNNING && b.state() == v1::JOB_STATE_RUNNING);
    if (a.state() == v1::JOB_STATE_DONE && b.state() == v1::JOB_STATE_DONE) break;
  }
  ASSERT_EQ(get(low).state(), v1::JOB_STATE_DONE) << get(low).DebugString();
  ASSERT_EQ(get(high).state(), v1::JOB_STATE_DONE) << get(high).DebugString();
  EXPECT_TRUE(together) << "the two jobs never ran at the same time";
  EXPECT_EQ(get(low).priority(), 1);
  EXPECT_EQ(get(high).priority(), 10);
  expect_every_trial_recorded_once(low, 24);
  expect_every_trial_recorded_once(high, 24);
  std::set<std::string> runners;
  for (int64_t job : {low, high}) {
    for (const JobRecord &r : records(job)) runners.insert(r.runner);
  }
  EXPECT_EQ(runners.size(), 2u) << "both runners measure";
}

TEST_F(KilndFarmTest, ARunnerKilledMidBatchHasItsTrialsRetriedOnTheOther) {
  start_farm();
  // Runner 1 is silenced until the kill, so that the job's batches are all on runner 0.
  runners_[1]->signal(SIGSTOP);
  ASSERT_TRUE(wait_for_runners([](const v1::DeviceSummary &d) { return d.free_runners() == 1; }));
  start_daemon();
  const int64_t job = submit({.trials = 40, .min_repeat_ms = 20});
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.trials_done() >= 8; }));
  ASSERT_TRUE(wait_for_runners([](const v1::DeviceSummary &d) { return d.busy_runners() == 1; }));
  runners_[0]->signal(SIGKILL);
  runners_[1]->signal(SIGCONT);
  const int64_t at_kill = get(job).trials_done();
  ASSERT_LT(at_kill, 40) << "the job ended before the kill; it needs more trials";

  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString();
  expect_every_trial_recorded_once(job, 40);
  std::map<std::string, int> by_runner;
  for (const JobRecord &r : records(job)) by_runner[r.runner] += 1;
  EXPECT_EQ(by_runner.size(), 2u) << "the trials after the kill are measured on the other runner";
  EXPECT_FALSE(has(read(file("kilnd.log")), "failed")) << read(file("kilnd.log"));
}

TEST_F(KilndFarmTest, WhileTheTrackerIsDownTheJobWaitsAndThenGoesOn) {
  start_farm();
  start_daemon();
  const int64_t job = submit({.trials = 40});
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.trials_done() >= 8; }));
  tracker_->signal(SIGKILL);
  tracker_->wait_for(10s);
  ASSERT_TRUE(wait_until(
      job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_WAITING; }, 30s))
      << get(job).DebugString();
  const v1::JobInfo waiting = get(job);
  EXPECT_TRUE(has(waiting.message(), "waiting for runners")) << waiting.message();
  EXPECT_LT(waiting.trials_done(), 40);
  // `kiln jobs show` says so too.
  const auto [code, shown] = kiln::testing::run_command(
      {KILN_CLI_BINARY, "jobs", "--daemon", address_, "--token-file", file("token"), "show", std::to_string(job)},
      file("show.log"));
  EXPECT_EQ(code, 0) << shown;
  EXPECT_TRUE(has(shown, "waiting")) << shown;

  std::this_thread::sleep_for(2s);
  start_tracker();  // on the same port; the runners register again
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString();
  expect_every_trial_recorded_once(job, 40);
}

TEST_F(KilndFarmTest, APausedFarmJobStopsMidBatchWithinTwoSecondsAndResumes) {
  start_farm();
  start_daemon();
  // Every config is timed for at least 3 x 100 ms: a batch of 8 takes about 3 s.
  const int64_t job = submit({.trials = 16, .batch = 8, .min_repeat_ms = 100});
  ASSERT_TRUE(wait_for_runners([](const v1::DeviceSummary &d) { return d.busy_runners() == 1; }));
  std::this_thread::sleep_for(800ms);
  const Clock::time_point paused_at = Clock::now();
  {
    v1::JobRequest request;
    request.set_job_id(job);
    v1::JobInfo info;
    ASSERT_TRUE(stub_->PauseJob(context().get(), request, &info).ok());
  }
  ASSERT_TRUE(wait_until(
      job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_PAUSED; }, 10s))
      << get(job).DebugString();
  const double took = seconds_since(paused_at);
  EXPECT_LT(took, 2.0) << "the pause waited for the batch in flight";
  EXPECT_LT(get(job).trials_done(), 8) << "the first batch was not interrupted";
  // The lease is released at once, and the runner is not blamed.
  EXPECT_TRUE(wait_for_runners([](const v1::DeviceSummary &d) { return d.free_runners() == 2; }, 2s));

  v1::JobRequest request;
  request.set_job_id(job);
  v1::JobInfo info;
  ASSERT_TRUE(stub_->ResumeJob(context().get(), request, &info).ok());
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString();
  expect_every_trial_recorded_once(job, 16);
}

TEST_F(KilndFarmTest, TlsClientsAreServedAndPlaintextOnesRefused) {
  const std::string cert = file("kilnd.pem"), key = file("kilnd.key");
  const std::string openssl =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " > " + file("openssl.log") + " 2>&1";
  if (std::system(openssl.c_str()) != 0)
    GTEST_SKIP() << "openssl cannot make a certificate: " << read(file("openssl.log"));
  start_farm();
  start_daemon({"--tls-cert", cert, "--tls-key", key});

  rpc::TlsFiles tls;
  tls.ca_file = cert;
  tls.server_name_override = "localhost";
  stub_ = v1::Tuner::NewStub(rpc::make_channel(address_, tls));
  v1::ListJobsReply list;
  grpc::Status status = stub_->ListJobs(context().get(), v1::ListJobsRequest(), &list);
  EXPECT_TRUE(status.ok()) << status.error_message();
  const int64_t job = submit({.trials = 8});
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString();
  expect_every_trial_recorded_once(job, 8);

  auto plaintext = v1::Tuner::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  auto c = context();
  c->set_deadline(std::chrono::system_clock::now() + 5s);
  status = plaintext->ListJobs(c.get(), v1::ListJobsRequest(), &list);
  EXPECT_FALSE(status.ok()) << "a plaintext client was served";

  // The kiln command: with the certificate it lists the job; without it, it fails.
  const std::vector<std::string> jobs = {KILN_CLI_BINARY, "jobs", "--daemon", address_, "--token-file", file("token")};
  std::vector<std::string> with_tls = jobs;
  with_tls.insert(with_tls.end(), {"--tls-ca", cert, "--tls-server-name", "localhost", "list"});
  auto [code, out] = kiln::testing::run_command(with_tls, file("kiln.log"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(has(out, "8/8")) << out;
  std::vector<std::string> without = jobs;
  without.push_back("list");
  std::tie(code, out) = kiln::testing::run_command(without, file("kiln.log"), 30s);
  EXPECT_EQ(code, 1) << out;
}

}  // namespace
}  // namespace kiln::tuner
