// The dashboard's JSON API (tuner/dashboard_api.h) in process, over a JobManager with a synthetic
// measurer (a known cost per config): every /api/v1/ route refuses a request without the token or
// with another one, and a refused action changes nothing; the shapes and values of jobs, tasks,
// curves, the farm and the tuning log against the log's own records; pause, resume and cancel;
// errors for unknown jobs, bad ids, refused state changes and unknown routes; and the routes
// through kilnd's HTTP server, next to /metrics.
#include "tuner/dashboard_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "db/tuning_db.h"
#include "rpc_server/metrics.h"
#include "rpc_server/metrics_http.h"
#include "tests/rpc_server/http_get.h"
#include "tests/temp_dir.h"
#include "tuner/job_manager.h"
#include "tuner/job_wire.h"

namespace kiln::tuner {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace v1 = kiln::v1;

constexpr char kToken[] = "dashboard-secret";
constexpr char kTarget[] = "llvm -mcpu=skylake-avx512";
constexpr char kDevice[] = "test-cpu";

// The mean cost of a config: known, and different across configs.
double cost_of(int64_t index) { return 1e-3 * (1 + static_cast<double>(index % 97)); }

class SyntheticMeasurer : public Measurer {
 public:
  explicit SyntheticMeasurer(const std::atomic<int> &delay_ms) : delay_ms_(delay_ms) {}
  std::string name() const override { return "synthetic"; }
  std::vector<MeasureOutcome> measure(const ops::Task &, const std::string &,
                                      const std::vector<autotune::Config> &configs) override {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    std::vector<MeasureOutcome> out;
    for (const autotune::Config &c : configs) {
      MeasureOutcome o;
      // Every fifth config fails on the second runner.
      o.runner = c.index() % 2 == 0 ? "runner-even" : "runner-odd";
      if (c.index() % 10 == 5) {
        o.error = db::ErrorClass::kRuntimeDevice;
        o.message = "synthetic failure";
      } else {
        o.costs = {cost_of(c.index())};
      }
      out.push_back(o);
    }
    return out;
  }

 private:
  const std::atomic<int> &delay_ms_;
};

v1::TuneTask dense_task(int64_t m, const std::string &name) {
  v1::TuneTask t;
  t.set_template_name("dense_pack.x86");
  t.set_args_json(R"({"data":{"shape":[)" + std::to_string(m) +
                  R"(,64],"dtype":"float32"},"weight":{"shape":[64,64],"dtype":"float32"}})");
  t.set_name(name);
  return t;
}

JobSubmission submission(const std::string &name, int64_t trials, int64_t batch = 8) {
  v1::JobSpec s;
  s.set_name(name);
  *s.add_tasks() = dense_task(64, "a");
  *s.add_tasks() = dense_task(32, "b");
  s.mutable_tasks(1)->set_weight(3);
  s.set_trials(trials);
  s.set_batch_size(batch);
  s.set_strategy("random");
  return submission_from_proto(s);
}

struct Reply {
  int status = 0;
  json body;
  std::string raw, content_type;
};

class DashboardApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobManagerOptions o;
    o.log_path = dir_.file("kiln.db");
    o.target = kTarget;
    o.device_key = kDevice;
    o.max_running = 1;
    o.measurer = [this](const MeasurerRequest &) -> std::unique_ptr<Measurer> {
      return std::make_unique<SyntheticMeasurer>(delay_ms_);
    };
    manager_ = std::make_unique<JobManager>(o);
    manager_->start();
    DashboardOptions d;
    d.log_path = o.log_path;
    d.token = kToken;
    d.measuring = "on the farm of test";
    d.farm_summary = [this] {
      if (!farm_up_) throw std::runtime_error("the tracker cannot be reached (test)");
      v1::SummaryReply reply;
      v1::DeviceSummary *device = reply.add_devices();
      device->set_device_key(kDevice);
      device->set_free_runners(2);
      device->set_busy_runners(1);
      device->set_quarantined_runners(1);
      device->set_queue_length(4);
      device->add_targets(kTarget);
      // One runner the tuning log knows (it measures the even configs), one it does not.
      v1::RunnerSummary *even = reply.add_runners();
      even->set_runner_id("runner-even");
      even->set_address("10.0.0.1:9190");
      even->set_device_key(kDevice);
      even->set_target(kTarget);
      even->set_state(v1::RUNNER_STATE_BUSY);
      even->set_since_heartbeat_ms(400);
      even->set_leases_served(7);
      v1::RunnerSummary *fresh = reply.add_runners();
      fresh->set_runner_id("runner-new");
      fresh->set_address("10.0.0.2:9190");
      fresh->set_device_key(kDevice);
      fresh->set_target(kTarget);
      fresh->set_state(v1::RUNNER_STATE_QUARANTINED);
      fresh->set_quarantine_reason("3 failures in a row, the last a heartbeat timeout");
      fresh->set_quarantine_left_ms(42500);
      fresh->set_since_heartbeat_ms(2250);
      fresh->set_leases_served(3);
      fresh->set_leases_failed(2);
      fresh->set_leases_expired(1);
      fresh->set_consecutive_failures(0);
      return reply;
    };
    api_ = std::make_unique<DashboardApi>(*manager_, d);
  }
  void TearDown() override { manager_->shutdown(); }

  Reply call(const std::string &method, const std::string &path, const std::string &token = kToken,
             std::map<std::string, std::string> query = {}) {
    rpc::HttpRequest request;
    request.method = method;
    request.path = path;
    request.query = std::move(query);
    if (!token.empty()) request.headers["authorization"] = "Bearer " + token;
    const rpc::HttpResponse response = api_->handle(request);
    Reply reply{response.status, json(), response.body, response.content_type};
    if (response.content_type == "application/json") reply.body = json::parse(response.body);
    return reply;
  }
  Reply get(const std::string &path, std::map<std::string, std::string> query = {}) {
    return call("GET", path, kToken, std::move(query));
  }

  JobReport wait_for(int64_t job, const std::function<bool(const JobReport &)> &done) {
    JobReport report;
    for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
      report = manager_->get(job);
      if (done(report)) return report;
      std::this_thread::sleep_for(5ms);
    }
    ADD_FAILURE() << "job " << job << " stayed " << report.status.state;
    return report;
  }

  int64_t run_to_done(const std::string &name, int64_t trials) {
    const int64_t job = manager_->submit(submission(name, trials)).status.job_id;
    wait_for(job, [](const JobReport &r) { return r.status.state == "done"; });
    return job;
  }

  // The job's records in the log, by workload key, in the order recorded: the mean cost of each,
  // nullopt for a failed one.
  std::map<std::string, std::vector<std::optional<double>>> logged(int64_t job) {
    db::TuningDb log = db::TuningDb::open(dir_.file("kiln.db"));
    std::map<std::string, std::vector<std::optional<double>>> out;
    log.for_each_record({}, [&](const db::Record &r) {
      if (r.job_id && *r.job_id == job)
        out[r.workload.key].push_back(r.valid() ? std::optional(r.mean()) : std::nullopt);
    });
    return out;
  }
  // The valid costs of each workload.
  std::map<std::string, std::vector<double>> logged_costs(int64_t job) {
    std::map<std::string, std::vector<double>> out;
    for (const auto &[key, records] : logged(job)) {
      for (const auto &cost : records) {
        if (cost) out[key].push_back(*cost);
      }
    }
    return out;
  }

  test::TempDir dir_{"kiln_dashboard"};
  std::atomic<int> delay_ms_{0};
  std::atomic<bool> farm_up_{true};
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<DashboardApi> api_;
};

TEST_F(DashboardApiTest, EveryApiRouteRefusesARequestWithoutTheTokenOrWithAnother) {
  const int64_t job = run_to_done("done-job", 16);
  const std::string id = std::to_string(job);
  const std::vector<std::pair<std::string, std::string>> routes = {{"GET", "/api/v1/service"},
                                                                   {"GET", "/api/v1/jobs"},
                                                                   {"GET", "/api/v1/jobs/" + id},
                                                                   {"GET", "/api/v1/jobs/" + id + "/curves"},
                                                                   {"GET", "/api/v1/farm"},
                                                                   {"GET", "/api/v1/log"},
                                                                   {"GET", "/api/v1/log/best"},
                                                                   {"GET", "/api/v1/log/export"},
                                                                   {"GET", "/api/v1/no-such-route"},
                                                                   {"POST", "/api/v1/jobs/" + id + "/pause"},
                                                                   {"POST", "/api/v1/jobs/" + id + "/resume"},
                                                                   {"POST", "/api/v1/jobs/" + id + "/cancel"}};
  for (const auto &[method, path] : routes) {
    for (const std::string token : {"", "wrong-token", "dashboard-secre"}) {
      const Reply reply = call(method, path, token);
      EXPECT_EQ(reply.status, 401) << method << " " << path << " with '" << token << "'";
      ASSERT_TRUE(reply.body.is_object()) << reply.raw;
      EXPECT_EQ(reply.body.size(), 1u) << "data without the token: " << reply.raw;
      EXPECT_TRUE(reply.body.contains("error"));
    }
  }
  // The refused cancel changed nothing.
  EXPECT_EQ(manager_->get(job).status.state, "done");
  // A token in the query string is no token.
  EXPECT_EQ(call("GET", "/api/v1/jobs", "", {{"token", kToken}}).status, 401);
  // The page itself is public.
  EXPECT_EQ(call("GET", "/", "").status, 200);
}

TEST_F(DashboardApiTest, ARefusedPauseLeavesTheJobRunningAndTheTokenPausesResumesAndCancelsIt) {
  delay_ms_ = 20;
  const int64_t job = manager_->submit(submission("long", 4000, 4)).status.job_id;
  wait_for(job, [](const JobReport &r) { return r.status.state == "running" && r.status.trials_done > 0; });
  const std::string path = "/api/v1/jobs/" + std::to_string(job);

  EXPECT_EQ(call("POST", path + "/pause", "").status, 401);
  EXPECT_EQ(call("POST", path + "/pause", "nope").status, 401);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(manager_->get(job).status.state, "running");

  Reply paused = call("POST", path + "/pause");
  EXPECT_EQ(paused.status, 200) << paused.raw;
  EXPECT_EQ(paused.body["id"], job);
  wait_for(job, [](const JobReport &r) { return r.status.state == "paused"; });
  EXPECT_EQ(get(path).body["state"], "paused");

  EXPECT_EQ(call("POST", path + "/resume").status, 200);
  wait_for(job, [](const JobReport &r) { return r.status.state == "running"; });
  EXPECT_EQ(call("POST", path + "/cancel").status, 200);
  wait_for(job, [](const JobReport &r) { return r.status.state == "cancelled"; });
  const Reply again = call("POST", path + "/resume");
  EXPECT_EQ(again.status, 409) << again.raw;
  EXPECT_NE(again.body["error"].get<std::string>().find("cancelled"), std::string::npos) << again.raw;
  // A read is not an action.
  EXPECT_EQ(call("GET", path + "/pause").status, 405);
}

TEST_F(DashboardApiTest, JobsAndTasksShowTheLoggedTrialsBestLatenciesAndSpeedups) {
  const int64_t job = run_to_done("dense", 24);
  const Reply list = get("/api/v1/jobs");
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.body["jobs"].size(), 1u) << list.raw;
  const json &listed = list.body["jobs"][0];
  EXPECT_EQ(listed["id"], job);
  EXPECT_EQ(listed["name"], "dense");
  EXPECT_EQ(listed["state"], "done");
  EXPECT_EQ(listed["target"], kTarget);
  EXPECT_EQ(listed["device_key"], kDevice);
  EXPECT_EQ(listed["trials_done"], 24);
  EXPECT_EQ(listed["trials_total"], 24);
  EXPECT_DOUBLE_EQ(listed["progress"].get<double>(), 1.0);
  EXPECT_EQ(listed["tasks"], 2);

  const Reply detail = get("/api/v1/jobs/" + std::to_string(job));
  ASSERT_EQ(detail.status, 200) << detail.raw;
  ASSERT_EQ(detail.body["tasks"].size(), 2u);
  const auto all = logged(job);
  const auto valid = logged_costs(job);
  double weighted_default = 0, weighted_best = 0;
  std::map<std::string, int64_t> failures;
  for (const json &task : detail.body["tasks"]) {
    const std::string key = task["workload_key"];
    ASSERT_TRUE(valid.count(key)) << key;
    const std::vector<double> &costs = valid.at(key);
    // The scheduler shares the job's trials between its tasks; each one's are its records.
    EXPECT_EQ(task["trials"], all.at(key).size());
    EXPECT_EQ(task["valid"], costs.size());
    EXPECT_DOUBLE_EQ(task["valid_fraction"].get<double>(), static_cast<double>(costs.size()) / all.at(key).size());
    const int64_t failed = static_cast<int64_t>(all.at(key).size() - costs.size());
    if (failed > 0) {
      EXPECT_EQ(task["errors"], json({{"RUNTIME_DEVICE", failed}})) << task.dump();
      failures["RUNTIME_DEVICE"] += failed;
    } else {
      EXPECT_TRUE(task["errors"].empty()) << task.dump();
    }
    // The best is the fastest record of the task in the log; the default is one of its records.
    const double best = *std::min_element(costs.begin(), costs.end());
    EXPECT_NEAR(task["best_s"].get<double>(), best, 1e-12);
    ASSERT_TRUE(task["default_s"].is_number()) << task.dump();
    const double default_s = task["default_s"];
    EXPECT_NEAR(task["speedup"].get<double>(), default_s / best, 1e-9);
    const double weight = task["name"] == "b" ? 3 : 1;
    EXPECT_EQ(task["weight"].get<double>(), weight);
    weighted_default += weight * default_s;
    weighted_best += weight * best;
  }
  EXPECT_NEAR(detail.body["weighted_speedup"].get<double>(), weighted_default / weighted_best, 1e-9);
  EXPECT_NEAR(listed["weighted_speedup"].get<double>(), weighted_default / weighted_best, 1e-9);
  EXPECT_EQ(listed["errors"], json(failures));
}

TEST_F(DashboardApiTest, CurvesAreTheBestSoFarOfEachTaskAfterEachTrial) {
  const int64_t job = run_to_done("curves", 24);
  const Reply detail = get("/api/v1/jobs/" + std::to_string(job));
  const Reply reply = get("/api/v1/jobs/" + std::to_string(job) + "/curves");
  ASSERT_EQ(reply.status, 200) << reply.raw;
  ASSERT_EQ(reply.body["curves"].size(), 2u);
  const auto all = logged(job);
  for (const json &curve : reply.body["curves"]) {
    const json *task = nullptr;
    for (const json &t : detail.body["tasks"]) {
      if (t["name"] == curve["name"]) task = &t;
    }
    ASSERT_NE(task, nullptr) << curve["name"];
    EXPECT_EQ(curve["workload_key"], (*task)["workload_key"]);
    const std::vector<std::optional<double>> &costs = all.at((*task)["workload_key"]);
    const json &best_s = curve["best_s"];
    ASSERT_EQ(best_s.size(), costs.size());
    ASSERT_EQ(curve["best_gflops"].size(), costs.size());
    // Independently: the running minimum of the logged costs, in the order recorded; none before
    // the first valid trial.
    std::optional<double> running;
    for (size_t i = 0; i < costs.size(); ++i) {
      if (costs[i]) running = running ? std::min(*running, *costs[i]) : *costs[i];
      if (!running) {
        EXPECT_TRUE(best_s[i].is_null()) << "trial " << i + 1;
        continue;
      }
      EXPECT_NEAR(best_s[i].get<double>(), *running, *running * 1e-9) << "trial " << i + 1;
      const double flop = (*task)["flop"];
      EXPECT_NEAR(curve["best_gflops"][i].get<double>(), flop / *running / 1e9, 1e-6);
    }
    EXPECT_NEAR(best_s.back().get<double>(), (*task)["best_s"].get<double>(), 1e-12);
  }
}

TEST_F(DashboardApiTest, UnknownJobsBadIdsRefusedActionsAndUnknownRoutesGetClearErrors) {
  const int64_t job = run_to_done("done", 8);
  Reply r = get("/api/v1/jobs/999");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body["error"].get<std::string>().find("999"), std::string::npos) << r.raw;
  EXPECT_EQ(get("/api/v1/jobs/999/curves").status, 404);
  EXPECT_EQ(call("POST", "/api/v1/jobs/999/pause").status, 404);
  r = get("/api/v1/jobs/abc");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body["error"].get<std::string>().find("abc"), std::string::npos) << r.raw;
  EXPECT_EQ(get("/api/v1/jobs/-1").status, 400);
  r = call("POST", "/api/v1/jobs/" + std::to_string(job) + "/pause");
  EXPECT_EQ(r.status, 409) << r.raw;
  EXPECT_NE(r.body["error"].get<std::string>().find("done"), std::string::npos) << r.raw;
  EXPECT_EQ(get("/api/v1/nothing").status, 404);
  EXPECT_EQ(get("/api/v1/jobs/1/nothing").status, 404);
  EXPECT_EQ(get("/api/v1/log/best").status, 400);
  EXPECT_EQ(get("/api/v1/log/best", {{"workload", "no-such-key"}}).status, 404);
  EXPECT_EQ(get("/no-such-file.js").status, 404);
}

TEST_F(DashboardApiTest, TheFarmShowsTheTrackersSummaryOrWhyItCannot) {
  const int64_t job = run_to_done("runners", 40);
  Reply r = get("/api/v1/farm");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["farm"], true);
  EXPECT_EQ(r.body["reachable"], true);
  ASSERT_EQ(r.body["devices"].size(), 1u);
  const json &d = r.body["devices"][0];
  EXPECT_EQ(d["device_key"], kDevice);
  EXPECT_EQ(d["free"], 2);
  EXPECT_EQ(d["busy"], 1);
  EXPECT_EQ(d["quarantined"], 1);
  EXPECT_EQ(d["queue_length"], 4);
  EXPECT_EQ(d["targets"], json::array({kTarget}));

  // Per runner, from the log: its trials, failures by class and last measurement.
  std::map<std::string, int64_t> trials, failed;
  db::TuningDb log = db::TuningDb::open(dir_.file("kiln.db"));
  std::map<std::string, double> last;
  log.for_each_record({}, [&](const db::Record &rec) {
    if (!rec.job_id || *rec.job_id != job) return;
    ++trials[rec.runner];
    if (!rec.valid()) ++failed[rec.runner];
    last[rec.runner] = std::max(last[rec.runner], rec.timestamp);
  });
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(failed.count("runner-even"), 0u) << "only odd configs fail";
  // The tracker's runners first, in its order, then the one only the log knows.
  ASSERT_EQ(r.body["runners"].size(), 3u) << r.raw;
  const json &even = r.body["runners"][0];
  const json &fresh = r.body["runners"][1];
  const json &odd = r.body["runners"][2];
  EXPECT_EQ(even["runner"], "runner-even");
  EXPECT_EQ(fresh["runner"], "runner-new");
  EXPECT_EQ(odd["runner"], "runner-odd");
  for (const json *runner : {&even, &odd}) {
    const std::string name = (*runner)["runner"];
    EXPECT_EQ((*runner)["trials"], trials[name]) << name;
    EXPECT_EQ((*runner)["failures"], failed[name] ? json({{"RUNTIME_DEVICE", failed[name]}}) : json::object()) << name;
    EXPECT_DOUBLE_EQ((*runner)["last_measured"].get<double>(), last[name]) << name;
  }
  // What the tracker says of them.
  EXPECT_EQ(even["state"], "busy");
  EXPECT_EQ(even["address"], "10.0.0.1:9190");
  EXPECT_EQ(even["device_key"], kDevice);
  EXPECT_EQ(even["target"], kTarget);
  EXPECT_DOUBLE_EQ(even["last_heartbeat_s_ago"].get<double>(), 0.4);
  EXPECT_EQ(even["leases_served"], 7);
  EXPECT_EQ(even["quarantine_reason"], "");
  EXPECT_EQ(fresh["state"], "quarantined");
  EXPECT_EQ(fresh["quarantine_reason"], "3 failures in a row, the last a heartbeat timeout");
  EXPECT_DOUBLE_EQ(fresh["quarantine_left_s"].get<double>(), 42.5);
  EXPECT_DOUBLE_EQ(fresh["last_heartbeat_s_ago"].get<double>(), 2.25);
  EXPECT_EQ(fresh["leases_served"], 3);
  EXPECT_EQ(fresh["leases_failed"], 2);
  EXPECT_EQ(fresh["leases_expired"], 1);
  EXPECT_EQ(fresh["trials"], 0);
  EXPECT_EQ(fresh["failures"], json::object());
  EXPECT_TRUE(fresh["last_measured"].is_null());
  // The tracker does not have the odd runner: no state, no tracker fields.
  EXPECT_TRUE(odd["state"].is_null()) << odd;
  EXPECT_TRUE(odd["address"].is_null()) << odd;
  EXPECT_TRUE(odd["last_heartbeat_s_ago"].is_null()) << odd;

  farm_up_ = false;
  r = get("/api/v1/farm");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body["reachable"], false);
  EXPECT_NE(r.body["error"].get<std::string>().find("cannot be reached"), std::string::npos) << r.raw;
  EXPECT_TRUE(r.body["devices"].empty());
  // Without the tracker, the log's runners, busiest first, without a state.
  ASSERT_EQ(r.body["runners"].size(), 2u) << r.raw;
  EXPECT_GE(r.body["runners"][0]["trials"].get<int64_t>(), r.body["runners"][1]["trials"].get<int64_t>());
  for (const json &runner : r.body["runners"]) EXPECT_TRUE(runner["state"].is_null()) << runner;
}

TEST_F(DashboardApiTest, TheTuningLogListsWorkloadsTheirBestPerTargetAndExportsRecords) {
  const int64_t job = run_to_done("log", 16);
  const auto all = logged(job);
  const auto logged = logged_costs(job);
  const size_t valid = logged.begin()->second.size() + logged.rbegin()->second.size();
  Reply r = get("/api/v1/log");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["records"], 16);
  EXPECT_EQ(r.body["valid"], valid);
  if (valid < 16) {
    EXPECT_EQ(r.body["errors"], json({{"RUNTIME_DEVICE", 16 - valid}}));
  }
  EXPECT_EQ(r.body["jobs"], 1);
  ASSERT_EQ(r.body["workloads"].size(), 2u);
  for (const json &w : r.body["workloads"]) {
    const std::vector<double> &costs = logged.at(w["key"]);
    EXPECT_EQ(w["template"], "dense_pack.x86");
    EXPECT_EQ(w["records"], all.at(w["key"]).size());
    EXPECT_EQ(w["valid"], costs.size());
    EXPECT_NEAR(w["best_s"].get<double>(), *std::min_element(costs.begin(), costs.end()), 1e-12);

    const Reply best = get("/api/v1/log/best", {{"workload", w["key"]}});
    ASSERT_EQ(best.status, 200) << best.raw;
    ASSERT_EQ(best.body["best"].size(), 1u);
    EXPECT_EQ(best.body["best"][0]["target"], kTarget);
    EXPECT_NEAR(best.body["best"][0]["mean_s"].get<double>(), *std::min_element(costs.begin(), costs.end()), 1e-12);
  }
  // The search narrows the list: the key of one workload finds only it.
  const std::string key = r.body["workloads"][0]["key"];
  EXPECT_EQ(get("/api/v1/log", {{"q", key}}).body["workloads"].size(), 1u);
  EXPECT_EQ(get("/api/v1/log", {{"q", "no-such-workload"}}).body["workloads"].size(), 0u);

  const Reply whole = get("/api/v1/log/export");
  EXPECT_EQ(whole.content_type, "application/x-ndjson");
  EXPECT_EQ(std::count(whole.raw.begin(), whole.raw.end(), '\n'), 16);
  const Reply one = get("/api/v1/log/export", {{"workload", key}});
  EXPECT_EQ(std::count(one.raw.begin(), one.raw.end(), '\n'), static_cast<long>(all.at(key).size()));
  EXPECT_NE(one.raw.find(key), std::string::npos);
}

TEST_F(DashboardApiTest, OneHttpServerServesMetricsThePageAndTheApiWithTheBearerHeader) {
  rpc::MetricsRegistry registry;
  auto &counter = registry.counter("dashboard_test_total", "a counter of the test");
  counter.get().inc();
  auto server =
      rpc::MetricsServer::start("127.0.0.1:0", registry, [this](const rpc::HttpRequest &r) { return api_->handle(r); });
  const auto metrics = testing::http_get(server->port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("dashboard_test_total 1"), std::string::npos) << metrics.body;

  const auto page = testing::http_get(server->port(), "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_TRUE(page.has_header("Content-Type: text/html"));
  if (DashboardApi::assets_built()) {
    EXPECT_NE(page.body.find("/app.js"), std::string::npos) << page.body;
    const auto script = testing::http_get(server->port(), "/app.js");
    EXPECT_EQ(script.status, 200);
    EXPECT_TRUE(script.has_header("Content-Type: text/javascript"));
    EXPECT_GT(script.body.size(), 1000u);
  } else {
    EXPECT_NE(page.body.find("dashboard not built: npm was not found at build time"), std::string::npos);
  }

  EXPECT_EQ(testing::http_get(server->port(), "/api/v1/jobs").status, 401);
  const auto jobs = testing::http_exchange(
      server->port(), std::string("GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ") + kToken +
                          "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(jobs.status, 200);
  EXPECT_EQ(json::parse(jobs.body), json::parse(R"({"jobs":[]})"));
}

}  // namespace
}  // namespace kiln::tuner
