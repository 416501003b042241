// The tuning log's queries and their semantics: best and top-k (exact target first, then the
// device class, never another class), atomic batches, history, jobs and resume state, statistics,
// prune, the integrity check, and the indexes that keep lookups seeks at millions of records.
#include "db/tuning_db.h"
#include "db/error.h"
#include "db/queries.h"
#include "db/sqlite_db.h"
#include "tests/db/db_test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <thread>

namespace kiln::db {
namespace {

using testing::dense;
using testing::failed;
using testing::measured;
using testing::skylake;
using testing::znver4;
using testing::znver4_avx512;

class TuningDbTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    db_ = std::make_unique<TuningDb>(TuningDb::open(path("tuning.db")));
  }
  void TearDown() override {
    db_.reset();
    TempDirTest::TearDown();
  }
  int64_t count(const std::string &sql) {
    Statement s = db_->database().prepare(sql);
    EXPECT_TRUE(s.step());
    int64_t n = s.column_int64(0);
    s.reset();
    return n;
  }

  std::unique_ptr<TuningDb> db_;
};

TEST_F(TuningDbTest, BestPrefersExactTargetThenDeviceClassNeverAnotherClass) {
  Workload w = dense(64);
  db_->insert({measured(w, skylake(), 1, 0.0001),        // fastest, but another class
               measured(w, znver4_avx512(), 2, 0.0002),  // same class, other target string
               measured(w, znver4(), 3, 0.0004),         // the exact target
               measured(w, znver4(), 4, 0.0003)});

  std::optional<Record> best = db_->best(w.key, znver4());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config.index, 4);
  EXPECT_EQ(best->target.target, "llvm -mcpu=znver4");

  // A target string never measured exactly falls back to its device class.
  Target unseen = Target::make("llvm -mattr=+avx2 -mcpu=znver4", "x86-znver4");
  best = db_->best(w.key, unseen);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config.index, 2);
  EXPECT_EQ(best->target.device_key, "x86-znver4");
  EXPECT_FALSE(db_->best(w.key, unseen, Scope::kExact));

  // The class scope ranks the whole class; the skylake record never appears.
  EXPECT_EQ(db_->best(w.key, znver4(), Scope::kDeviceClass)->config.index, 2);
  EXPECT_EQ(db_->best(w.key, znver4(), Scope::kExact)->config.index, 4);

  // The same target string registered for another class is another target.
  Target other_class = Target::make("llvm -mcpu=znver4", "x86-znver4-lab");
  EXPECT_FALSE(db_->best(w.key, other_class));
  // A device class with records of other workloads only gives nothing either.
  EXPECT_FALSE(db_->best(dense(128).key, znver4()));
  // Option order in the query does not matter.
  EXPECT_EQ(db_->best(w.key, Target{"llvm -mcpu=znver4", "x86-znver4", ""})->config.index, 4);
}

TEST_F(TuningDbTest, TopKIsOrderedFastestFirstWithinScope) {
  Workload w = dense(64);
  std::vector<Record> records;
  for (int i = 0; i < 30; ++i) records.push_back(measured(w, znver4(), i, 0.001 * ((i * 7) % 30 + 1)));
  records.push_back(measured(w, skylake(), 100, 0.00001));
  records.push_back(failed(w, znver4(), 101));
  db_->insert(records);

  std::vector<Record> top = db_->top_k(w.key, znver4(), 10);
  ASSERT_EQ(top.size(), 10u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_DOUBLE_EQ(top[i].mean(), 0.001 * static_cast<double>(i + 1));
    EXPECT_EQ(top[i].target.device_key, "x86-znver4");
    EXPECT_TRUE(top[i].valid());
  }
  EXPECT_EQ(db_->top_k(w.key, znver4(), 100).size(), 30u);
  EXPECT_TRUE(db_->top_k(w.key, znver4(), 0).empty());

  // Equal means: the older record first.
  Workload tie = dense(32);
  db_->insert({measured(tie, znver4(), 5, 0.002), measured(tie, znver4(), 6, 0.002)});
  std::vector<Record> tied = db_->top_k(tie.key, znver4(), 2);
  ASSERT_EQ(tied.size(), 2u);
  EXPECT_LT(tied[0].id, tied[1].id);
}

// A config timed several times ranks by the upper median of its records: one lucky timing does
// not make it the best (the winner's curse of picking the minimum over many noisy trials).
TEST_F(TuningDbTest, AConfigTimedAgainRanksByTheUpperMedianOfItsRecords) {
  Workload w = dense(64);
  // Config 1: lucky once (1.0 ms), then 1.5 and 1.6 ms. Config 2: 1.2 ms once. Config 3: 1.1
  // and 1.3 ms (two records: the upper median is the slower, 1.3).
  db_->insert({measured(w, znver4(), 1, 0.0010), measured(w, znver4(), 2, 0.0012), measured(w, znver4(), 3, 0.0011),
               measured(w, znver4(), 1, 0.0015), measured(w, znver4(), 1, 0.0016), measured(w, znver4(), 3, 0.0013),
               failed(w, znver4(), 2)});
  const std::optional<Record> best = db_->best(w.key, znver4());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config.index, 2);
  EXPECT_DOUBLE_EQ(best->mean(), 0.0012);

  std::vector<Record> top = db_->top_k(w.key, znver4(), 5);
  ASSERT_EQ(top.size(), 3u);  // one entry per config
  EXPECT_EQ(top[0].config.index, 2);
  EXPECT_EQ(top[1].config.index, 3);
  EXPECT_DOUBLE_EQ(top[1].mean(), 0.0013);
  EXPECT_EQ(top[2].config.index, 1);
  EXPECT_DOUBLE_EQ(top[2].mean(), 0.0015);  // its median record

  // Measured on another target of the class, config 1 ranks there on its own records.
  db_->insert(measured(w, znver4_avx512(), 1, 0.0009));
  const std::optional<Record> by_class = db_->best(w.key, znver4(), Scope::kDeviceClass);
  ASSERT_TRUE(by_class);
  EXPECT_EQ(by_class->config.index, 1);
  EXPECT_EQ(by_class->target.target, znver4_avx512().target);
}

// The ranking stops reading early; it must still agree with ranking every config by the upper
// median of all of its records.
TEST_F(TuningDbTest, TopKAgreesWithRankingEveryConfigByItsUpperMedian) {
  Workload w = dense(128);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.8, 1.6);
  std::map<int64_t, std::vector<double>> times;
  std::vector<Record> records;
  for (int i = 0; i < 400; ++i) {
    const int64_t config = static_cast<int64_t>(rng() % 60);
    const double t = 0.001 * (1.0 + 0.01 * static_cast<double>(config % 17)) * noise(rng);
    records.push_back(measured(w, znver4(), config, t, 1));
    times[config].push_back(t);
  }
  db_->insert(records);
  std::vector<std::pair<double, int64_t>> expected;
  for (auto &[config, ts] : times) {
    std::sort(ts.begin(), ts.end());
    expected.emplace_back(ts[ts.size() / 2], config);
  }
  std::sort(expected.begin(), expected.end());
  std::vector<Record> top = db_->top_k(w.key, znver4(), 10);
  ASSERT_EQ(top.size(), 10u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].config.index, expected[i].second) << i;
    EXPECT_DOUBLE_EQ(top[i].mean(), expected[i].first) << i;
  }
}

TEST_F(TuningDbTest, FailedMeasurementsAreKeptButNeverBest) {
  Workload w = dense(64);
  db_->insert({failed(w, znver4(), 1, ErrorClass::kRunTimeout), failed(w, znver4(), 2, ErrorClass::kWrongAnswer)});
  EXPECT_FALSE(db_->best(w.key, znver4()));
  Stats stats = db_->stats();
  EXPECT_EQ(stats.records, 2);
  EXPECT_EQ(stats.valid, 0);
  EXPECT_EQ(stats.by_error[ErrorClass::kRunTimeout], 1);
  EXPECT_EQ(stats.by_error[ErrorClass::kWrongAnswer], 1);

  std::vector<Record> history = db_->history({"dense", "x86-znver4"});
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].error, ErrorClass::kRunTimeout);
  EXPECT_EQ(history[0].error_message, "failed on purpose");
  EXPECT_TRUE(std::isnan(history[0].mean()));
}

TEST_F(TuningDbTest, StoredRecordsReadBackField_by_field) {
  Record r = measured(dense(64), znver4(), 1234, 0.0);
  r.costs = {1.5e-5, 1.25e-5, 2e-5};
  r.config.knobs = {{"tile", contracts::Json::array({1, 8, 4})}, {"order", "ijk"}, {"vectorize", true}, {"f", 0.25}};
  r.wall_s = 1.75;
  r.runner = "runner-07@farm";
  r.kiln_version = "9.9.9";
  r.timestamp = 1712345678.5;
  int64_t id = db_->insert(r);
  EXPECT_GT(id, 0);

  std::optional<Record> back = db_->best(r.workload.key, znver4());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->id, id);
  EXPECT_EQ(back->workload.key, r.workload.key);
  EXPECT_EQ(back->workload.args, r.workload.args);
  EXPECT_DOUBLE_EQ(back->workload.flop, r.workload.flop);
  EXPECT_EQ(back->target.target, r.target.target);
  EXPECT_EQ(back->target.model, "znver4");
  EXPECT_EQ(back->config.index, 1234);
  EXPECT_EQ(back->config.space, "space-v1");
  EXPECT_EQ(back->config.knobs, r.config.knobs);
  EXPECT_EQ(back->costs, r.costs);
  EXPECT_DOUBLE_EQ(back->mean(), (1.5e-5 + 1.25e-5 + 2e-5) / 3);
  EXPECT_DOUBLE_EQ(back->wall_s, 1.75);
  EXPECT_EQ(back->runner, "runner-07@farm");
  EXPECT_EQ(back->kiln_version, "9.9.9");
  EXPECT_DOUBLE_EQ(back->timestamp, 1712345678.5);
  EXPECT_FALSE(back->job_id);

  // Left empty, the version and time are filled in.
  Record plain = measured(dense(65), znver4(), 1, 0.001);
  plain.timestamp = 0;
  double before = static_cast<double>(std::time(nullptr)) - 1;
  db_->insert(plain);
  back = db_->best(plain.workload.key, znver4());
  EXPECT_FALSE(back->kiln_version.empty());
  EXPECT_GE(back->timestamp, before);
}

TEST_F(TuningDbTest, BatchInsertIsAllOrNothing) {
  Workload w = dense(64);
  std::vector<Record> batch = {measured(w, znver4(), 1, 0.001), measured(dense(99), znver4(), 2, 0.001)};
  batch.push_back(measured(w, znver4(), 3, 0.001));
  batch.back().job_id = 12345;  // no such job: the whole batch fails in its transaction
  try {
    db_->insert(batch);
    FAIL() << "expected TuningDbError";
  } catch (const TuningDbError &e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBadInput));
    EXPECT_NE(std::string(e.what()).find("job 12345 does not exist"), std::string::npos);
  }
  EXPECT_EQ(count("SELECT count(*) FROM record"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM workload"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM target"), 0);

  batch.pop_back();
  EXPECT_EQ(db_->insert(batch).size(), 2u);
  EXPECT_EQ(count("SELECT count(*) FROM record"), 2);
}

TEST_F(TuningDbTest, InconsistentRecordsAreRejectedBeforeAnythingIsWritten) {
  auto expect_rejected = [&](Record r, const std::string &needle) {
    std::vector<Record> batch = {measured(dense(1), znver4(), 1, 0.001), r};
    try {
      db_->insert(batch);
      FAIL() << "expected TuningDbError for " << needle;
    } catch (const TuningDbError &e) {
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBadInput));
      EXPECT_NE(std::string(e.what()).find("record 2 of 2"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Record r = measured(dense(64), znver4(), 1, 0.001);
  r.workload.args = R"({"M":65})";
  expect_rejected(r, "does not match");
  r = measured(dense(64), znver4(), 1, 0.001);
  r.target.target = "llvm  -mcpu=znver4";
  expect_rejected(r, "not canonical");
  r = measured(dense(64), znver4(), 1, 0.001);
  r.costs = {0.001, -1};
  expect_rejected(r, "costs");
  r.costs = {0.001, std::nan("")};
  expect_rejected(r, "costs");
  r.costs.clear();
  expect_rejected(r, "at least one cost");
  r = measured(dense(64), znver4(), 1, 0.001);
  r.error = static_cast<ErrorClass>(42);
  expect_rejected(r, "error class 42");
  r = measured(dense(64), znver4(), 1, 0.001);
  r.target.device_key.clear();
  expect_rejected(r, "device key");
  EXPECT_EQ(count("SELECT count(*) FROM record"), 0);
}

// Numbers outside their ranges (db/record.h) are refused at insert, naming the field; the edges
// of each range are accepted.
TEST_F(TuningDbTest, NumbersOutOfRangeAreRefusedNamingTheField) {
  auto message = [&](const Record &r) {
    try {
      db_->insert(r);
      return std::string("accepted");
    } catch (const TuningDbError &e) {
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBadInput)) << e.what();
      return std::string(e.what());
    }
  };
  auto contains = [](const std::string &text, const std::string &needle) {
    return text.find(needle) != std::string::npos;
  };
  double now = static_cast<double>(std::time(nullptr));
  Record r = measured(dense(64), znver4(), 1, 0.001);
  r.config.index = -1;
  EXPECT_TRUE(contains(message(r), "config.index -1 is out of range (0 .. 2^53)")) << message(r);
  r.config.index = kMaxConfigIndex + 1;
  EXPECT_TRUE(contains(message(r), "config.index 9007199254740993 is out of range")) << message(r);
  r = measured(dense(64), znver4(), 1, 0.001);
  for (double cost : {0.0, -1e-9, kMaxCostSeconds, std::numeric_limits<double>::infinity(), std::nan("")}) {
    r.costs = {0.001, cost};
    EXPECT_TRUE(contains(message(r), "costs holds")) << cost << ": " << message(r);
  }
  r = failed(dense(64), znver4(), 1);
  r.costs = {0};
  EXPECT_TRUE(contains(message(r), "costs holds 0")) << message(r);
  r = measured(dense(64), znver4(), 1, 0.001);
  r.costs.clear();
  EXPECT_TRUE(contains(message(r), "costs is empty: a valid (OK) measurement needs at least one cost")) << message(r);
  r = measured(dense(64), znver4(), 1, 0.001);
  r.wall_s = -0.5;
  EXPECT_TRUE(contains(message(r), "wall_s -0.5")) << message(r);
  r.wall_s = std::nan("");
  EXPECT_TRUE(contains(message(r), "wall_s nan")) << message(r);
  r = measured(dense(64), znver4(), 1, 0.001);
  for (double t : {1000.0, kEarliestTimestamp - 1, now + 2 * 86400, -1.0, std::nan("")}) {
    r.timestamp = t;
    EXPECT_TRUE(contains(message(r), "timestamp")) << t << ": " << message(r);
    EXPECT_TRUE(contains(message(r), "out of range")) << t << ": " << message(r);
  }
  EXPECT_EQ(count("SELECT count(*) FROM record"), 0);

  // The edges, and 0 for "now".
  r = measured(dense(64), znver4(), kMaxConfigIndex, 1e-9);
  r.costs = {1e-9, kMaxCostSeconds * 0.999};
  r.timestamp = kEarliestTimestamp;
  EXPECT_EQ(message(r), "accepted");
  r = measured(dense(64), znver4(), 0, 0.001);
  r.timestamp = 0;
  EXPECT_EQ(message(r), "accepted");
  Statement stored = db_->database().prepare("SELECT measured_at FROM record WHERE config_index = 0");
  ASSERT_TRUE(stored.step());
  EXPECT_NEAR(stored.column_double(0), now, 60);
}

TEST_F(TuningDbTest, UnknownWorkloadOrTargetGivesNoAnswerRatherThanAnError) {
  db_->insert(measured(dense(64), znver4(), 1, 0.001));
  std::string unknown(64, 'a');
  EXPECT_FALSE(db_->workload(unknown));
  EXPECT_FALSE(db_->best(unknown, znver4()));
  EXPECT_TRUE(db_->top_k(unknown, znver4(), 10).empty());
  EXPECT_FALSE(db_->best(dense(64).key, Target::make("cuda -arch=sm_90", "h100")));
  EXPECT_TRUE(db_->history({"conv2d", "x86-znver4"}).empty());
  EXPECT_THROW(db_->history({"", "x86-znver4"}), TuningDbError);
  EXPECT_THROW(db_->best(dense(64).key, Target{"-bad", "x86-znver4", ""}), TuningDbError);
}

TEST_F(TuningDbTest, WorkloadsAreListedAndFoundByKeyPrefix) {
  db_->insert({measured(dense(64), znver4(), 1, 0.004), measured(dense(64), skylake(), 2, 0.002),
               failed(dense(64), znver4(), 3), measured(dense(128), znver4(), 4, 0.001)});
  db_->insert(measured(Workload::make("conv2d", {{"C", 3}}), znver4(), 1, 0.01));

  std::vector<WorkloadSummary> all = db_->workloads();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].workload.template_name, "conv2d");
  std::vector<WorkloadSummary> dense_only = db_->workloads("dense");
  ASSERT_EQ(dense_only.size(), 2u);
  for (const auto &s : dense_only) {
    if (s.workload.key == dense(64).key) {
      EXPECT_EQ(s.records, 3);
      EXPECT_EQ(s.valid, 2);
      EXPECT_DOUBLE_EQ(*s.best_mean_s, 0.002);
    }
  }
  std::string key = dense(64).key;
  auto found = db_->workloads_with_prefix(key.substr(0, 8));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key, key);
  EXPECT_EQ(db_->workloads_with_prefix("").size(), 2u);  // capped at the limit
  EXPECT_EQ(db_->targets().size(), 2u);
  EXPECT_EQ(db_->targets_named("llvm   -mcpu=znver4").size(), 1u);
}

TEST_F(TuningDbTest, HistoryIsTheTemplateFamilyOnTheDeviceClass) {
  db_->insert({measured(dense(64), znver4(), 1, 0.001), measured(dense(128), znver4_avx512(), 2, 0.002),
               failed(dense(256), znver4(), 3), measured(dense(64), skylake(), 4, 0.001),
               measured(Workload::make("conv2d", {{"C", 3}}), znver4(), 5, 0.01)});
  std::vector<Record> all = db_->history({"dense", "x86-znver4"});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].config.index, 1);
  EXPECT_EQ(all[1].config.index, 2);
  EXPECT_EQ(all[2].config.index, 3);
  EXPECT_EQ(db_->history({"dense", "x86-znver4", true}).size(), 2u);
  EXPECT_EQ(db_->history({"dense", "x86-znver4", false, 1}).size(), 1u);
  EXPECT_EQ(db_->history({"dense", "x86-skylake"}).size(), 1u);
}

TEST_F(TuningDbTest, JobsTrackProgressAndTellAResumedJobWhatWasMeasured) {
  int64_t job = db_->create_job("tune resnet18", {{"tasks", 2}, {"trials", 100}}, 100);
  EXPECT_EQ(db_->job(job)->state, JobState::kPending);
  db_->update_job(job, JobState::kRunning, "round 1");

  std::vector<Record> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(measured(dense(64), znver4(), i, 0.001 + i * 1e-4));
  batch.push_back(failed(dense(128), znver4(), 7));
  for (auto &r : batch) r.job_id = job;
  batch.push_back(measured(dense(64), znver4(), 99, 0.001));  // not part of the job
  db_->insert(batch);

  std::optional<Job> stored = db_->job(job);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->name, "tune resnet18");
  EXPECT_EQ(stored->spec["tasks"], 2);
  EXPECT_EQ(stored->state, JobState::kRunning);
  EXPECT_EQ(stored->message, "round 1");
  EXPECT_EQ(stored->trials_done, 6);
  EXPECT_EQ(stored->trials_total, 100);
  EXPECT_GE(stored->updated_at, stored->created_at);

  JobProgress progress = db_->job_progress(job);
  EXPECT_EQ(progress.records, 6);
  EXPECT_TRUE(progress.was_measured(dense(64).key, 3));
  EXPECT_TRUE(progress.was_measured(dense(128).key, 7));  // failures count as measured
  EXPECT_FALSE(progress.was_measured(dense(64).key, 99));
  EXPECT_FALSE(progress.was_measured(dense(64).key, 5));

  db_->update_job(job, JobState::kPaused);
  EXPECT_EQ(db_->job(job)->message, "round 1");  // kept when no message is given
  db_->set_job_total(job, 200);
  EXPECT_EQ(db_->job(job)->trials_total, 200);
  EXPECT_EQ(db_->jobs().size(), 1u);

  EXPECT_FALSE(db_->job(job + 1));
  EXPECT_THROW(db_->update_job(job + 1, JobState::kDone), TuningDbError);
  EXPECT_THROW(db_->job_progress(job + 1), TuningDbError);
}

TEST_F(TuningDbTest, PruneKeepsTheBestNPerWorkloadAndTargetAndUnfinishedJobs) {
  std::vector<Record> records;
  for (int i = 0; i < 10; ++i) {
    records.push_back(measured(dense(64), znver4(), i, 0.001 * (10 - i)));
    records.push_back(measured(dense(64), skylake(), 100 + i, 0.001 * (i + 1)));
  }
  records.push_back(failed(dense(64), znver4(), 50));
  db_->insert(records);
  int64_t running = db_->create_job("running", {}, 10);
  db_->update_job(running, JobState::kRunning);
  Record slow = measured(dense(64), znver4(), 200, 1.0);
  slow.job_id = running;
  Record broken = failed(dense(64), znver4(), 201);
  broken.job_id = running;
  db_->insert({slow, broken});

  PruneResult dry = db_->prune({2, false, true, {}, {}, {}, true});
  EXPECT_EQ(dry.deleted_valid, 16);
  EXPECT_EQ(dry.deleted_failed, 1);
  EXPECT_EQ(db_->stats().records, 23);  // nothing deleted

  PruneResult result = db_->prune({2, false, false, {}, {}, {}, true});
  EXPECT_EQ(result.deleted_valid, 16);
  EXPECT_EQ(result.deleted_failed, 1);
  EXPECT_EQ(result.kept, 6);
  std::vector<Record> top = db_->top_k(dense(64).key, znver4(), 10);
  ASSERT_EQ(top.size(), 3u);  // the best two, plus the running job's slow record
  EXPECT_EQ(top[0].config.index, 9);
  EXPECT_EQ(top[1].config.index, 8);
  EXPECT_EQ(top[2].config.index, 200);
  EXPECT_EQ(db_->top_k(dense(64).key, skylake(), 10).size(), 2u);
  EXPECT_EQ(db_->job_progress(running).records, 2);

  // Once the job is done its records are pruned like any other.
  db_->update_job(running, JobState::kDone);
  result = db_->prune({1, true, false, {}, {}, {}, true});
  EXPECT_EQ(result.deleted_valid, 3);
  EXPECT_EQ(result.deleted_failed, 0);
  EXPECT_EQ(db_->stats().records, 3);  // one best per target plus the kept failure
  db_->vacuum();
  EXPECT_TRUE(db_->check().ok());
  EXPECT_THROW(db_->prune({-1, false, false, {}, {}, {}, true}), TuningDbError);
}

// Prune needs a scope, never empties the log by default, touches only the records in scope and
// says how many bytes it freed.
TEST_F(TuningDbTest, PruneNeedsAScopeAndKeepsToIt) {
  std::vector<Record> records;
  for (int i = 0; i < 300; ++i) {
    records.push_back(measured(dense(64), znver4(), i, 0.001 * (i + 1)));
    records.push_back(measured(dense(128), skylake(), i, 0.001 * (i + 1)));
    records.push_back(measured(Workload::make("conv2d", {{"C", 3}}), znver4(), i, 0.001 * (i + 1)));
  }
  db_->insert(records);
  auto refused = [&](const PruneOptions &options, const std::string &needle) {
    try {
      db_->prune(options);
      return std::string("pruned");
    } catch (const TuningDbError &e) {
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBadInput));
      return std::string(e.what()).find(needle) != std::string::npos ? std::string("refused") : e.what();
    }
  };
  EXPECT_EQ(refused({}, "name what to prune"), "refused");
  PruneOptions both;
  both.all = true;
  both.template_name = "dense";
  EXPECT_EQ(refused(both, "not both"), "refused");
  PruneOptions unknown;
  unknown.template_name = "danse";
  EXPECT_EQ(refused(unknown, "no workload of template \"danse\""), "refused");
  unknown = {};
  unknown.device_key = "x86-zen9";
  EXPECT_EQ(refused(unknown, "no device class \"x86-zen9\""), "refused");
  EXPECT_EQ(db_->stats().records, 900);

  PruneOptions dense_on_znver4;
  dense_on_znver4.template_name = "dense";
  dense_on_znver4.device_key = "x86-znver4";
  dense_on_znver4.dry_run = true;
  PruneResult dry = db_->prune(dense_on_znver4);
  EXPECT_EQ(dry.deleted_valid, 299);
  EXPECT_GT(dry.freed_bytes, 0);
  EXPECT_EQ(db_->stats().records, 900);
  dense_on_znver4.dry_run = false;
  PruneResult result = db_->prune(dense_on_znver4);
  EXPECT_EQ(result.deleted_valid, 299);
  EXPECT_EQ(result.freed_bytes, dry.freed_bytes);
  EXPECT_GE(result.free_bytes, result.freed_bytes);
  EXPECT_EQ(result.kept, 601);
  EXPECT_EQ(db_->history({"dense", "x86-skylake"}).size(), 300u);
  EXPECT_EQ(db_->history({"conv2d", "x86-znver4"}).size(), 300u);

  PruneOptions one_workload;
  one_workload.workload_key = dense(128).key;
  EXPECT_EQ(db_->prune(one_workload).deleted_valid, 299);
  EXPECT_EQ(db_->history({"conv2d", "x86-znver4"}).size(), 300u);
  int64_t bytes = db_->stats().file_bytes;
  db_->vacuum();
  EXPECT_LT(db_->stats().file_bytes, bytes);
}

TEST_F(TuningDbTest, CheckFindsWhatSqliteCannot) {
  db_->insert({measured(dense(64), znver4(), 1, 0.001), failed(dense(64), znver4(), 2)});
  EXPECT_TRUE(db_->check().ok());
  Database &raw = db_->database();
  raw.exec("UPDATE record SET mean_s = NULL WHERE config_index = 1");
  raw.exec("UPDATE workload SET args = '{\"M\": 64}'");
  CheckReport report = db_->check();
  ASSERT_EQ(report.problems.size(), 2u);
  EXPECT_NE(report.problems[0].find("mean does not agree"), std::string::npos);
  EXPECT_NE(report.problems[1].find("not in canonical form"), std::string::npos);
}

// A log written before insert checked the ranges may hold rows outside them: the check lists them
// by record id, and export refuses such a record rather than write a null for a number.
TEST_F(TuningDbTest, CheckFindsOutOfRangeRowsOfAnOldLogAndExportWritesNoNull) {
  db_->insert({measured(dense(64), znver4(), 1, 0.001), failed(dense(64), znver4(), 2)});
  ASSERT_TRUE(db_->check().ok());
  Database &raw = db_->database();
  auto old_row = [&](const std::string &index, const std::string &error, const std::string &costs,
                     const std::string &mean, const std::string &wall, const std::string &at) {
    raw.exec(
        "INSERT INTO record (workload_id, target_id, device_id, config_index, config, error_class, costs, "
        "mean_s, wall_s, measured_at) VALUES (1, 1, 1, " +
        index + ", '[]', " + error + ", '" + costs + "', " + mean + ", " + wall + ", " + at + ")");
  };
  old_row("-1", "2", "[]", "NULL", "0", "1700000000");                    // id 3
  old_row("18446744073709551615", "2", "[]", "NULL", "0", "1700000000");  // id 4: stored as a REAL
  old_row("5", "2", "[]", "NULL", "0", "12");                             // id 5
  old_row("6", "0", "[null]", "0.001", "0", "1700000000");                // id 6: inf written by nlohmann
  old_row("7", "0", "[0.0]", "0.0", "0", "1700000000");                   // id 7
  old_row("8", "0", "[1e300]", "1e300", "0", "1700000000");               // id 8
  old_row("9", "0", "[]", "0.001", "0", "1700000000");                    // id 9
  old_row("10", "0", "[0.001]", "0.001", "9e999", "1700000000");          // id 10: an infinite wall cost
  old_row("11", "2", "not json", "NULL", "-1", "1700000000");             // id 11
  CheckReport report = db_->check();
  std::string all;
  for (const std::string &p : report.problems) all += p + "\n";
  auto reported = [&](const std::string &needle) { return all.find(needle) != std::string::npos; };
  EXPECT_TRUE(reported("2 records with a config index outside 0 .. 2^53 (record ids 3, 4)")) << all;
  EXPECT_TRUE(reported("1 records with a timestamp outside 2000-01-01 .. a day from now (record ids 5)")) << all;
  EXPECT_TRUE(
      reported("4 records with costs that are not finite numbers of seconds, > 0 and below 1e6 (record "
               "ids 6, 7, 8, 11)"))
      << all;
  EXPECT_TRUE(reported("1 records that are valid (OK) but have no costs (record ids 9)")) << all;
  EXPECT_TRUE(reported("2 records with a wall cost that is not a finite number >= 0 (record ids 10, 11)")) << all;

  raw.exec("DELETE FROM record WHERE id NOT IN (1, 2, 10)");
  std::ostringstream out;
  try {
    db_->export_records(out, ExportFormat::kKiln);
    FAIL() << "exported " << out.str();
  } catch (const TuningDbError &e) {
    EXPECT_NE(std::string(e.what()).find("record 10 cannot be written as JSON: field \"result.wall\" is not a "
                                         "finite number; `kiln db check` lists such records"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out.str().find("null"), std::string::npos) << out.str();
  raw.exec("DELETE FROM record WHERE id = 10");
  EXPECT_TRUE(db_->check().ok());
}

// A failure of the machine (here a full disk) is a TuningDbError the user can act on; a SQLite
// failure that is Kiln's own (here a constraint it should never meet) is an internal error.
TEST_F(TuningDbTest, MachineFailuresAreUserErrorsAndKilnsOwnAreInternal) {
  db_->insert(measured(dense(64), znver4(), 1, 0.001));
  Database &raw = db_->database();
  int64_t pages = count("PRAGMA page_count");
  raw.exec("PRAGMA max_page_count = " + std::to_string(pages + 2));
  std::vector<Record> many;
  for (int i = 0; i < 3000; ++i) many.push_back(measured(dense(64 + i), znver4(), i, 0.001));
  try {
    db_->insert(many);
    FAIL() << "inserted past the end of the disk";
  } catch (const TuningDbError &e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kStorage)) << e.what();
    EXPECT_NE(std::string(e.what()).find("inserting 3000 records: the disk is full"), std::string::npos) << e.what();
  }
  raw.exec("PRAGMA max_page_count = 1073741823");
  EXPECT_EQ(db_->stats().records, 1);

  raw.exec("CREATE TRIGGER refuse BEFORE INSERT ON record BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END");
  try {
    db_->insert(measured(dense(64), znver4(), 2, 0.001));
    FAIL() << "inserted";
  } catch (const UserError &e) {
    FAIL() << "a constraint Kiln should never meet is not the user's error: " << e.what();
  } catch (const InternalError &e) {
    EXPECT_NE(std::string(e.what()).find("refused by a trigger"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path("tuning.db")), std::string::npos) << e.what();
  }
}

TEST_F(TuningDbTest, StatsCountEverything) {
  int64_t job = db_->create_job("j", {}, 0);
  Record r = measured(dense(64), znver4(), 1, 0.001);
  r.job_id = job;
  r.timestamp = 1e9;
  Record f = failed(dense(128), skylake(), 2, ErrorClass::kInfra);
  f.timestamp = 1e9 + 1000;
  db_->insert({r, f});
  Stats s = db_->stats();
  EXPECT_EQ(s.schema_version, kSchemaVersion);
  EXPECT_EQ(s.workloads, 2);
  EXPECT_EQ(s.targets, 2);
  EXPECT_EQ(s.devices, 2);
  EXPECT_EQ(s.jobs, 1);
  EXPECT_EQ(s.records, 2);
  EXPECT_EQ(s.valid, 1);
  EXPECT_EQ(s.by_error[ErrorClass::kInfra], 1);
  EXPECT_DOUBLE_EQ(*s.first_timestamp, 1e9);
  EXPECT_DOUBLE_EQ(*s.last_timestamp, 1e9 + 1000);
  EXPECT_GT(s.file_bytes, 0);
}

// The lookups behind best, top-k, the device-class fallback, resume and import are answered by
// index seeks: no table scan and no sort, whatever the number of records.
TEST_F(TuningDbTest, LookupsAreIndexSeeks) {
  db_->insert(measured(dense(64), znver4(), 1, 0.001));
  auto plan = [&](const std::string &sql) {
    Statement s = db_->database().prepare("EXPLAIN QUERY PLAN " + sql);
    std::string text;
    while (s.step()) text += s.column_text(3) + "\n";
    return text;
  };
  std::string exact = plan(queries::kRankedOnTarget);
  EXPECT_NE(exact.find("SEARCH r USING INDEX record_by_target (workload_id=? AND target_id=? AND "
                       "error_class=?)"),
            std::string::npos)
      << exact;
  std::string by_class = plan(queries::kRankedOnDevice);
  EXPECT_NE(by_class.find("SEARCH r USING INDEX record_by_device (workload_id=? AND device_id=? "
                          "AND error_class=?)"),
            std::string::npos)
      << by_class;
  std::string resume = plan(queries::kJobMeasured);
  EXPECT_NE(resume.find("INDEX record_by_job (job_id=?)"), std::string::npos) << resume;
  std::string duplicate = plan(queries::kDuplicate);
  // Import's duplicate check seeks the config and time: failed records (whose mean is NULL) share
  // one key of record_by_target, so a seek there would read every failed record of the workload.
  EXPECT_NE(duplicate.find("SEARCH record USING INDEX record_by_config (workload_id=? AND target_id=? AND "
                           "config_index=? AND measured_at=?)"),
            std::string::npos)
      << duplicate;
  for (const std::string &p : {exact, by_class, resume, duplicate}) {
    EXPECT_EQ(p.find("SCAN"), std::string::npos) << p;
    EXPECT_EQ(p.find("TEMP B-TREE"), std::string::npos) << p;
  }
}

TEST_F(TuningDbTest, WaitsForAnotherWriterAndReportsBusyOnlyAfterTheDeadline) {
  Database holder(path("tuning.db"));
  std::thread release;
  {
    auto lock = std::make_shared<Transaction>(holder);
    holder.exec("CREATE TABLE IF NOT EXISTS scratch (x INTEGER)");
    release = std::thread([lock]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      lock->commit();
      lock.reset();
    });
  }
  TuningDbOptions patient;
  patient.busy_timeout = std::chrono::milliseconds(5);  // rely on Kiln's own retries
  TuningDb writer = TuningDb::open(path("tuning.db"), patient);
  auto start = std::chrono::steady_clock::now();
  writer.insert(measured(dense(64), znver4(), 1, 0.001));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
  release.join();
  EXPECT_EQ(writer.stats().records, 1);

  TuningDbOptions impatient = patient;
  impatient.retry_deadline = std::chrono::milliseconds(100);
  TuningDb hurried = TuningDb::open(path("tuning.db"), impatient);
  Transaction lock(holder);
  try {
    hurried.insert(measured(dense(64), znver4(), 2, 0.001));
    FAIL() << "expected TuningDbError";
  } catch (const TuningDbError &e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kBusy));
    EXPECT_NE(std::string(e.what()).find("still locked"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::db
