// The measurers: the one conversion of a wire result and the one record of a measurement, the local
// measurer on this machine's CPU (worker processes of this executable, --measure-worker), the
// replay table read from a tuning log, and the farm measurer against a tracker and a runner served
// in this process on loopback.
#include "tuner/measurer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <algorithm>
#include <future>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "db/tuning_db.h"
#include "kiln/v1/measure.pb.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/measure_worker.h"
#include "rpc_server/runner_service.h"
#include "rpc_server/service_host.h"
#include "rpc_server/tracker_service.h"
#include "tests/temp_dir.h"

namespace kiln::tuner {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using contracts::Json;

constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kDeviceKey[] = "test-cpu";

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

ops::Task matmul(int64_t n, const std::string &target = kTarget) {
  return ops::Task("matmul.x86", Json::object({{"a", tensor({n, n})}, {"b", tensor({n, n})}}),
                   driver::resolve_target(target));
}

// `n` distinct valid configs of the task's space, drawn with a fixed seed.
std::vector<autotune::Config> random_configs(const ops::Task &task, size_t n, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<autotune::Config> out;
  std::set<int64_t> seen;
  while (out.size() < n) {
    autotune::Config c = task.space().sample(rng);
    if (seen.insert(c.index()).second) out.push_back(c);
  }
  return out;
}

// Quick and single-threaded, to share the machine.
kiln::v1::MeasureOptions quick_options() {
  kiln::v1::MeasureOptions o = default_measure_options();
  o.set_repeat(2);
  o.set_min_repeat_ms(1);
  o.set_threads(1);
  o.set_build_timeout_ms(20000);
  o.set_run_timeout_ms(5000);
  return o;
}

LocalMeasurerOptions local_options(kiln::v1::MeasureOptions measure = quick_options()) {
  LocalMeasurerOptions o;
  o.measure = measure;
  o.build_workers = 1;
  o.runner_id = "local-test";
  return o;
}

// One local measurer for the tests that need no special options: its workers stay warm.
LocalMeasurer &local() {
  static LocalMeasurer measurer(kTarget, local_options());
  return measurer;
}

void expect_costs_survive(const db::Record &stored, const std::vector<double> &costs) {
  ASSERT_EQ(stored.costs.size(), costs.size());
  for (size_t i = 0; i < costs.size(); ++i) EXPECT_DOUBLE_EQ(stored.costs[i], costs[i]);
}

// --- outcome_from_proto and make_record ---------------------------------------------------------

TEST(MeasureRecord, AnOutcomeBecomesARecordTheLogKeeps) {
  const ops::Task task = matmul(32);
  const autotune::Config config = random_configs(task, 1)[0];

  kiln::v1::MeasureResult ok;
  for (double s : {2e-3, 1e-3, 3e-3}) ok.add_seconds(s);
  ok.set_compile_seconds(0.25);
  ok.set_runner_id("runner-7");
  ok.set_kiln_version("9.9.9-test");
  const MeasureOutcome outcome = outcome_from_proto(ok);
  EXPECT_TRUE(outcome.valid());
  EXPECT_DOUBLE_EQ(outcome.mean(), 2e-3);
  EXPECT_DOUBLE_EQ(outcome.wall_s, 0.25 + 6e-3);

  kiln::v1::MeasureResult failed;
  failed.set_error(kiln::v1::COMPILE_HOST);
  failed.set_message("the compiler said no");
  failed.set_compile_seconds(0.5);
  const MeasureOutcome failure = outcome_from_proto(failed);
  EXPECT_EQ(failure.error, db::ErrorClass::kCompileHost);
  EXPECT_TRUE(std::isnan(failure.mean()));

  kiln::test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.file("log.db"));
  const int64_t job = log.create_job("measurer-test", nlohmann::json::object(), 2);
  log.insert({make_record(task, "x86-test", config, outcome, job),
              make_record(task, "x86-test", task.default_config(), failure)});

  std::vector<db::Record> stored;
  log.for_each_record({}, [&](const db::Record &r) { stored.push_back(r); });
  ASSERT_EQ(stored.size(), 2u);
  const db::Record &first = stored[0];
  EXPECT_EQ(first.workload.key, task.key());
  EXPECT_EQ(first.workload.template_name, "matmul.x86");
  EXPECT_DOUBLE_EQ(first.workload.flop, task.flop());
  EXPECT_EQ(first.target.target, task.target().str());
  EXPECT_EQ(first.target.device_key, "x86-test");
  EXPECT_EQ(first.config.index, config.index());
  EXPECT_EQ(first.config.space, task.space().fingerprint());
  EXPECT_EQ(first.config.knobs_json(), config.record().knobs_json());
  EXPECT_EQ(task.space().from_record(first.config), config);
  EXPECT_EQ(first.error, db::ErrorClass::kOk);
  expect_costs_survive(first, {2e-3, 1e-3, 3e-3});
  EXPECT_DOUBLE_EQ(first.wall_s, 0.25 + 6e-3);
  EXPECT_EQ(first.runner, "runner-7");
  EXPECT_EQ(first.kiln_version, "9.9.9-test");
  ASSERT_TRUE(first.job_id.has_value());
  EXPECT_EQ(*first.job_id, job);

  const db::Record &second = stored[1];
  EXPECT_EQ(second.error, db::ErrorClass::kCompileHost);
  EXPECT_EQ(second.error_message, "the compiler said no");
  EXPECT_TRUE(second.costs.empty());
  EXPECT_FALSE(second.job_id.has_value());
  EXPECT_EQ(second.config.index, task.default_config().index());
}

TEST(MeasureRecord, AnUnknownErrorCodeIsUnknownAndSaysWhich) {
  // Field 2 (error) = 42, field 3 (message) = "boom": a code from a newer runner.
  kiln::v1::MeasureResult result;
  ASSERT_TRUE(
      result.ParseFromString(std::string("\x10\x2a\x1a\x04"
                                         "boom",
                                         8)));
  const MeasureOutcome outcome = outcome_from_proto(result);
  EXPECT_EQ(outcome.error, db::ErrorClass::kUnknown);
  EXPECT_NE(outcome.message.find("42"), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find("boom"), std::string::npos) << outcome.message;

  const ops::Task task = matmul(32);
  kiln::test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.file("log.db"));
  log.insert(make_record(task, "x86-test", task.default_config(), outcome));
  std::vector<db::Record> stored;
  log.for_each_record({}, [&](const db::Record &r) { stored.push_back(r); });
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].error, db::ErrorClass::kUnknown);
}

TEST(MeasureRecord, OkWithoutTimingsIsNoValidMeasurement) {
  kiln::v1::MeasureResult result;  // OK, no seconds
  const MeasureOutcome outcome = outcome_from_proto(result);
  EXPECT_FALSE(outcome.valid());
  EXPECT_EQ(outcome.error, db::ErrorClass::kUnknown);

  // An outcome made by hand the same way still gives a record the log accepts.
  MeasureOutcome by_hand;
  const ops::Task task = matmul(32);
  const db::Record record = make_record(task, "x86-test", task.default_config(), by_hand);
  EXPECT_FALSE(record.valid());
  kiln::test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.file("log.db"));
  EXPECT_NO_THROW(log.insert(record));
}

TEST(MeasureOptions, DefaultsAreTheDocumentedOnes) {
  const kiln::v1::MeasureOptions o = default_measure_options();
  EXPECT_EQ(o.number(), 1u);
  EXPECT_EQ(o.repeat(), 3u);
  ASSERT_TRUE(o.has_min_repeat_ms());
  EXPECT_EQ(o.min_repeat_ms(), 10u);
  EXPECT_EQ(o.build_timeout_ms(), 10000u);
  EXPECT_EQ(o.run_timeout_ms(), 10000u);
  EXPECT_TRUE(!o.has_check_correctness() || o.check_correctness());
}

// --- LocalMeasurer ------------------------------------------------------------------------------

TEST(LocalMeasurer, MeasuresTheDefaultAndRandomConfigs) {
  const ops::Task task = matmul(32);
  std::vector<autotune::Config> configs = {task.default_config()};
  for (const autotune::Config &c : random_configs(task, 3)) configs.push_back(c);
  const std::vector<MeasureOutcome> outcomes = local().measure(task, kDeviceKey, configs);
  ASSERT_EQ(outcomes.size(), configs.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    SCOPED_TRACE(configs[i].to_string());
    const MeasureOutcome &o = outcomes[i];
    EXPECT_EQ(o.error, db::ErrorClass::kOk) << o.message;
    ASSERT_EQ(o.costs.size(), 2u);
    for (double c : o.costs) EXPECT_GT(c, 0);
    EXPECT_GT(o.compile_s, 0);
    EXPECT_GE(o.wall_s, o.compile_s);
    EXPECT_EQ(o.runner, "local-test");
    EXPECT_FALSE(o.kiln_version.empty());
  }
}

TEST(LocalMeasurer, AConfigOfAnotherSpaceIsAnInstantiationOutcome) {
  const ops::Task task = matmul(32);
  const ops::Task other = matmul(64);
  ASSERT_NE(task.space().fingerprint(), other.space().fingerprint());
  const std::vector<MeasureOutcome> outcomes =
      local().measure(task, kDeviceKey, {task.default_config(), other.default_config(), autotune::Config()});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0].error, db::ErrorClass::kOk) << outcomes[0].message;
  EXPECT_EQ(outcomes[1].error, db::ErrorClass::kInstantiation) << outcomes[1].message;
  EXPECT_FALSE(outcomes[1].message.empty());
  EXPECT_TRUE(outcomes[1].costs.empty());
  EXPECT_EQ(outcomes[2].error, db::ErrorClass::kInstantiation) << outcomes[2].message;
}

TEST(LocalMeasurer, ATaskForAnotherTargetIsRefusedNamingBoth) {
  const ops::Task haswell = matmul(32, "llvm -mcpu=haswell");
  try {
    local().measure(haswell, kDeviceKey, {haswell.default_config()});
    FAIL() << "measured a task for another target";
  } catch (const MeasureError &e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("llvm -mcpu=haswell"), std::string::npos) << message;
    EXPECT_NE(message.find(kTarget), std::string::npos) << message;
  }
}

// A CUDA target on a host without a CUDA driver is refused when the job checks its measurer,
// saying why, rather than answering every candidate COMPILE_DEVICE; checking again says the same.
// A host with a GPU skips (the device tests of the runner cover it).
TEST(LocalMeasurer, ACudaTargetWithoutADriverIsRefusedByTheCheck) {
  if (void *driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(driver);
    GTEST_SKIP() << "this host has a CUDA driver (libcuda.so.1); the refusal is not exercised";
  }
  LocalMeasurer gpu("cuda -arch=sm_90", local_options());
  for (int i = 0; i < 2; ++i) {
    try {
      gpu.check("cuda -arch=sm_90", "h100");
      FAIL() << "a CUDA target was accepted without a driver";
    } catch (const MeasureError &e) {
      EXPECT_EQ(std::string(e.what()),
                "the local measurer cannot run 'cuda -arch=sm_90' on this host: no CUDA driver on this host: "
                "libcuda.so.1 not found");
    }
  }
  EXPECT_NO_THROW(local().check(kTarget, kDeviceKey)) << "a CPU target is not checked on a device";
}

TEST(LocalMeasurer, AMalformedTargetIsAMeasureError) {
  EXPECT_THROW(LocalMeasurer("-mcpu=native llvm", local_options()), MeasureError);
}

TEST(LocalMeasurer, OptionsBeyondThePoolsLimitsAreAMeasureError) {
  kiln::v1::MeasureOptions absurd = quick_options();
  absurd.set_repeat(1000000);
  LocalMeasurer measurer(kTarget, local_options(absurd));
  const ops::Task task = matmul(32);
  try {
    measurer.measure(task, kDeviceKey, {task.default_config()});
    FAIL() << "measured with absurd options";
  } catch (const MeasureError &e) {
    EXPECT_NE(std::string(e.what()).find("repeat"), std::string::npos) << e.what();
  }
}

TEST(LocalMeasurer, CancelAnswersTheRestInfraPromptlyAndTheNextBatchRuns) {
  // Every candidate runs at least 3 x 50 ms: the batch would take several seconds.
  kiln::v1::MeasureOptions slow = quick_options();
  slow.set_repeat(3);
  slow.set_min_repeat_ms(50);
  LocalMeasurer measurer(kTarget, local_options(slow));
  const ops::Task task = matmul(32);
  const std::vector<autotune::Config> configs = random_configs(task, 20, 11);

  std::future<std::vector<MeasureOutcome>> running =
      std::async(std::launch::async, [&] { return measurer.measure(task, kDeviceKey, configs); });
  std::this_thread::sleep_for(800ms);
  const Clock::time_point cancelled_at = Clock::now();
  measurer.cancel();
  const std::vector<MeasureOutcome> outcomes = running.get();
  const double after_cancel = std::chrono::duration<double>(Clock::now() - cancelled_at).count();

  ASSERT_EQ(outcomes.size(), configs.size());
  int ok = 0, cancelled = 0;
  for (const MeasureOutcome &o : outcomes) {
    if (o.valid()) {
      ++ok;
    } else {
      EXPECT_EQ(o.error, db::ErrorClass::kInfra) << o.message;
      EXPECT_EQ(o.message, "cancelled");
      ++cancelled;
    }
  }
  EXPECT_GE(cancelled, 10) << ok << " measured before the cancel";
  EXPECT_LT(after_cancel, 1.5);

  // The cancel does not stick: the next batch is measured.
  const std::vector<MeasureOutcome> next = measurer.measure(task, kDeviceKey, {task.default_config()});
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].error, db::ErrorClass::kOk) << next[0].message;
}

// --- ReplayMeasurer -----------------------------------------------------------------------------

MeasureOutcome valid(std::vector<double> costs) {
  MeasureOutcome o;
  o.costs = std::move(costs);
  o.wall_s = 0.1;
  o.runner = "r";
  return o;
}

MeasureOutcome failure(db::ErrorClass error, const std::string &message) {
  MeasureOutcome o;
  o.error = error;
  o.message = message;
  o.runner = "r";
  return o;
}

TEST(ReplayMeasurer, AnswersTheFastestValidRecordAndCountsMisses) {
  const ops::Task task = matmul(32);
  const ops::Task softmax("softmax.x86", Json::object({{"data", tensor({4, 37})}, {"axis", 1}}),
                          driver::resolve_target(kTarget));
  const std::vector<autotune::Config> c = random_configs(task, 6);
  // c[0]: measured three times, failing last; c[1]: two failures; c[2]: INFRA only; c[3]: valid,
  // then INFRA; c[4], c[5]: never measured.
  kiln::test::TempDir dir;
  db::TuningDb log = db::TuningDb::open(dir.file("log.db"));
  auto record = [&](const autotune::Config &config, const MeasureOutcome &o) {
    log.insert(make_record(task, kDeviceKey, config, o));
  };
  record(c[0], valid({3e-3, 3e-3}));
  record(c[1], failure(db::ErrorClass::kCompileHost, "first failure"));
  record(c[0], valid({1e-3, 2e-3}));
  record(c[2], failure(db::ErrorClass::kInfra, "runner lost"));
  record(c[3], valid({5e-3}));
  record(c[0], failure(db::ErrorClass::kRuntimeDevice, "crashed once"));
  record(c[1], failure(db::ErrorClass::kWrongAnswer, "latest failure"));
  record(c[3], failure(db::ErrorClass::kInfra, "runner lost"));
  log.insert(make_record(softmax, kDeviceKey, softmax.default_config(), valid({1e-4})));

  ReplayMeasurer all = ReplayMeasurer::from_log(log);
  EXPECT_EQ(all.size(), 4u);
  ReplayMeasurer replay = ReplayMeasurer::from_log(log, "matmul.x86");
  EXPECT_EQ(replay.size(), 3u);
  std::vector<int64_t> expected = {c[0].index(), c[1].index(), c[3].index()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(replay.indexes(task.key()), expected);
  EXPECT_TRUE(replay.indexes(softmax.key()).empty());

  const std::vector<MeasureOutcome> got = replay.measure(task, kDeviceKey, {c[0], c[1], c[2], c[3], c[4], c[0]});
  ASSERT_EQ(got.size(), 6u);
  EXPECT_TRUE(got[0].valid());
  EXPECT_DOUBLE_EQ(got[0].mean(), 1.5e-3);
  EXPECT_EQ(got[1].error, db::ErrorClass::kWrongAnswer);
  EXPECT_EQ(got[1].message, "latest failure");
  EXPECT_EQ(got[2].error, db::ErrorClass::kUnknown);
  EXPECT_EQ(got[2].message, "not in the replay table");
  EXPECT_TRUE(got[3].valid());
  EXPECT_DOUBLE_EQ(got[3].mean(), 5e-3);
  EXPECT_EQ(got[4].error, db::ErrorClass::kUnknown);
  EXPECT_EQ(got[4].message, "not in the replay table");
  EXPECT_DOUBLE_EQ(got[5].mean(), 1.5e-3);
  EXPECT_EQ(replay.misses(), 2);
  EXPECT_EQ(replay.answered(), 4);

  // A config of another space is no hit, whatever its index.
  const std::vector<MeasureOutcome> foreign = replay.measure(task, kDeviceKey, {matmul(64).default_config()});
  EXPECT_EQ(foreign[0].error, db::ErrorClass::kInstantiation);
}

TEST(ReplayMeasurer, RecordsAddedByHandFollowTheSameRules) {
  const ops::Task task = matmul(32);
  const autotune::Config config = task.default_config();
  ReplayMeasurer replay;
  replay.add(task.key(), config.index(), failure(db::ErrorClass::kRunTimeout, "slow"));
  replay.add(task.key(), config.index(), valid({4e-3}));
  replay.add(task.key(), config.index(), valid({6e-3}));
  replay.add(task.key(), config.index(), failure(db::ErrorClass::kInfra, "lost"));
  EXPECT_EQ(replay.size(), 1u);
  const std::vector<MeasureOutcome> got = replay.measure(task, kDeviceKey, {config});
  EXPECT_TRUE(got[0].valid());
  EXPECT_DOUBLE_EQ(got[0].mean(), 4e-3);
}

// --- FarmMeasurer -------------------------------------------------------------------------------

constexpr char kToken[] = "measurer-test-token";

// A tracker and one runner (a MeasurePool whose workers are this executable) served in this
// process on loopback, the runner registered under kDeviceKey.
class InProcessFarm {
 public:
  InProcessFarm()
      : tracker_(tracker_options()),
        tracker_host_(rpc::ServiceHost::start("127.0.0.1:0", {&tracker_})),
        pool_(pool_options()),
        runner_(rpc::RunnerIdentity(kDeviceKey, kTarget), &pool_, runner_options()),
        runner_host_(rpc::ServiceHost::start("127.0.0.1:0", {&runner_})) {
    tracker_.tracker().register_runner({runner_host_->address(), kDeviceKey, kTarget});
  }
  ~InProcessFarm() {
    tracker_.tracker().shutdown();
    runner_host_->shutdown(1s);
    tracker_host_->shutdown(1s);
  }

  // Free runners of kDeviceKey.
  int free_runners() {
    for (const rpc::DeviceSummary &d : tracker_.tracker().summary()) {
      if (d.device_key == kDeviceKey) return d.free_runners;
    }
    return 0;
  }

  rpc::FarmClientOptions client(std::chrono::milliseconds acquire_wait = 10s) const {
    rpc::FarmClientOptions o;
    o.tracker.address = tracker_host_->address();
    o.tracker.token = kToken;
    o.acquire_wait = acquire_wait;
    return o;
  }

 private:
  static rpc::TrackerOptions tracker_options() {
    rpc::TrackerOptions o;
    o.token = kToken;
    o.heartbeat_timeout = 120s;  // the runner does not heartbeat: the test is over long before
    return o;
  }
  static rpc::MeasurePoolOptions pool_options() {
    rpc::MeasurePoolOptions o;
    o.build_workers = 1;
    o.target = kTarget;
    o.runner_id = "farm-runner";
    return o;
  }
  static rpc::RunnerServiceOptions runner_options() {
    rpc::RunnerServiceOptions o;
    o.token = kToken;
    return o;
  }

  rpc::TrackerService tracker_;
  std::unique_ptr<rpc::ServiceHost> tracker_host_;
  rpc::MeasurePool pool_;
  rpc::RunnerService runner_;
  std::unique_ptr<rpc::ServiceHost> runner_host_;
};

TEST(FarmMeasurer, MeasuresOnARunnerOfTheDeviceKey) {
  InProcessFarm farm;
  FarmMeasurer measurer(farm.client(), quick_options());
  const ops::Task task = matmul(32);
  const ops::Task other = matmul(64);
  const std::vector<MeasureOutcome> outcomes =
      measurer.measure(task, kDeviceKey, {task.default_config(), random_configs(task, 1)[0], other.default_config()});
  ASSERT_EQ(outcomes.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(outcomes[i].error, db::ErrorClass::kOk) << outcomes[i].message;
    ASSERT_EQ(outcomes[i].costs.size(), 2u);
    for (double c : outcomes[i].costs) EXPECT_GT(c, 0);
    EXPECT_FALSE(outcomes[i].runner.empty());
  }
  EXPECT_EQ(outcomes[2].error, db::ErrorClass::kInstantiation) << outcomes[2].message;
}

TEST(FarmMeasurer, NoRunnerForTheDeviceKeyIsAMeasureErrorSayingSo) {
  InProcessFarm farm;
  FarmMeasurer measurer(farm.client(300ms), quick_options());
  const ops::Task task = matmul(32);
  const Clock::time_point start = Clock::now();
  try {
    measurer.measure(task, "no-such-device", {task.default_config()});
    FAIL() << "measured on a device key without runners";
  } catch (const MeasureError &e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no runner"), std::string::npos) << message;
    EXPECT_NE(message.find("no-such-device"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
}

// check(), what a job calls before it starts: a key with a runner passes, another is refused
// naming the keys the farm has.
TEST(FarmMeasurer, CheckRefusesADeviceKeyWithoutRunnersBeforeMeasuring) {
  InProcessFarm farm;
  FarmMeasurer measurer(farm.client(300ms), quick_options());
  EXPECT_NO_THROW(measurer.check("llvm -mcpu=native", kDeviceKey));
  try {
    measurer.check("llvm -mcpu=native", "no-such-device");
    FAIL() << "accepted a device key without runners";
  } catch (const MeasureError &e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no runner for device key 'no-such-device'"), std::string::npos) << message;
    EXPECT_NE(message.find(kDeviceKey), std::string::npos) << message;
  }
}

TEST(FarmMeasurer, ARequestTheRunnerRejectsIsAMeasureError) {
  InProcessFarm farm;
  FarmMeasurer measurer(farm.client(), quick_options());
  // The runner compiles for the host; a task for another target is refused, not retried.
  const ops::Task haswell = matmul(32, "llvm -mcpu=haswell");
  try {
    measurer.measure(haswell, kDeviceKey, {haswell.default_config()});
    FAIL() << "measured a task for another target";
  } catch (const MeasureError &e) {
    EXPECT_NE(std::string(e.what()).find("llvm -mcpu=haswell"), std::string::npos) << e.what();
  }
}

TEST(FarmMeasurer, AWrongTokenIsAMeasureError) {
  InProcessFarm farm;
  rpc::FarmClientOptions client = farm.client();
  client.tracker.token = "not-the-token";
  FarmMeasurer measurer(client, quick_options());
  const ops::Task task = matmul(32);
  EXPECT_THROW(measurer.measure(task, kDeviceKey, {task.default_config()}), MeasureError);
}

// cancel() (a job paused or cancelled) stops the batch in flight on the runner at once, releases
// the lease without blaming the runner, and does not stick.
TEST(FarmMeasurer, CancelStopsTheBatchInFlightAndReleasesTheRunner) {
  InProcessFarm farm;
  // Every candidate runs at least 3 x 50 ms: the batch would take several seconds.
  kiln::v1::MeasureOptions slow = quick_options();
  slow.set_repeat(3);
  slow.set_min_repeat_ms(50);
  FarmMeasurer measurer(farm.client(), slow);
  const ops::Task task = matmul(32);
  const std::vector<autotune::Config> configs = random_configs(task, 20, 11);

  std::future<std::vector<MeasureOutcome>> running =
      std::async(std::launch::async, [&] { return measurer.measure(task, kDeviceKey, configs); });
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(farm.free_runners(), 0) << "the batch holds the runner";
  const Clock::time_point cancelled_at = Clock::now();
  measurer.cancel();
  const std::vector<MeasureOutcome> outcomes = running.get();
  const double after_cancel = std::chrono::duration<double>(Clock::now() - cancelled_at).count();

  ASSERT_EQ(outcomes.size(), configs.size());
  int ok = 0, cancelled = 0;
  for (const MeasureOutcome &o : outcomes) {
    if (o.valid()) {
      ++ok;
    } else {
      EXPECT_EQ(o.error, db::ErrorClass::kInfra) << o.message;
      EXPECT_EQ(o.message, "cancelled");
      ++cancelled;
    }
  }
  EXPECT_GE(cancelled, 10) << ok << " measured before the cancel";
  EXPECT_LT(after_cancel, 1.0);
  // The lease is back at once (the runner does not heartbeat here: a runner reported as failed
  // would be held back for good, and the next batch would wait for it in vain).
  EXPECT_EQ(farm.free_runners(), 1);

  // The cancel does not stick: the next batch is measured on the same runner.
  const std::vector<MeasureOutcome> next = measurer.measure(task, kDeviceKey, {task.default_config()});
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].error, db::ErrorClass::kOk) << next[0].message;
}

TEST(FarmMeasurer, CancelEndsTheWaitForARunner) {
  InProcessFarm farm;
  // The test holds the only runner.
  rpc::TrackerClient holder(farm.client().tracker);
  const kiln::v1::AcquireReply lease = holder.acquire(kDeviceKey, 0, 5s);
  FarmMeasurer measurer(farm.client(30s), quick_options());
  const ops::Task task = matmul(32);
  std::future<std::vector<MeasureOutcome>> waiting = std::async(std::launch::async, [&] {
    return measurer.measure(task, kDeviceKey, {task.default_config(), task.default_config()});
  });
  std::this_thread::sleep_for(300ms);
  const Clock::time_point cancelled_at = Clock::now();
  measurer.cancel();
  const std::vector<MeasureOutcome> outcomes = waiting.get();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - cancelled_at).count(), 1.0);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const MeasureOutcome &o : outcomes) {
    EXPECT_EQ(o.error, db::ErrorClass::kInfra);
    EXPECT_EQ(o.message, "cancelled");
  }
  holder.release(lease.lease_id());
}

}  // namespace
}  // namespace kiln::tuner

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") return kiln::rpc::measure_worker_main();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
