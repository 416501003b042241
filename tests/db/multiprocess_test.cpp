// The tuning log under several processes: concurrent writers lose nothing and never see "database
// is locked", a reader keeps answering meanwhile, and a writer killed with SIGKILL at random
// moments leaves a sound file holding every batch it reported, none of them partially.
#include "db/sqlite_db.h"
#include "db/tuning_db.h"
#include "tests/db/db_test_util.h"
#include "tests/db/process_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#ifndef KILN_DB_STRESS_CHILD
#error "KILN_DB_STRESS_CHILD must name the db_stress_child executable"
#endif

namespace kiln::db {
namespace {

using testing::Child;
using testing::read_all;
using testing::read_first_line;
using testing::spawn;
using testing::wait_for;

const std::string kChild = KILN_DB_STRESS_CHILD;

class MultiProcessTest : public testing::TempDirTest {};

TEST_F(MultiProcessTest, ConcurrentWritersLoseNothingWhileAReaderLooksUpBestConfigs) {
  constexpr int kWriters = 4;
  constexpr int64_t kRecords = 10000;
  constexpr int64_t kBatch = 100;
  std::string db_path = path("shared.db");
  std::string stop = path("stop");
  TuningDb::open(db_path);  // created up front so the reader finds the schema

  Child reader = spawn(kChild, {"read", db_path, stop}, /*capture=*/true);
  std::vector<Child> writers;
  for (int w = 0; w < kWriters; ++w) {
    // Half the writers give SQLite almost no busy timeout, so Kiln's own retries carry them.
    std::string busy_ms = w % 2 ? "1" : "5000";
    writers.push_back(spawn(
        kChild, {"write", db_path, std::to_string(w), std::to_string(kRecords), std::to_string(kBatch), busy_ms}));
  }
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(wait_for(writers[w]), 0) << "writer " << w;
  std::ofstream(stop) << "stop\n";
  std::string lookups = read_all(reader.stdout_fd);
  EXPECT_EQ(wait_for(reader), 0);
  EXPECT_GT(std::stoll(lookups.empty() ? "0" : lookups), 0);

  TuningDb db = TuningDb::open(db_path);
  Statement per_writer = db.database().prepare(
      "SELECT runner, count(*), count(DISTINCT config_index), min(config_index), "
      "max(config_index) FROM record GROUP BY runner ORDER BY runner");
  int writers_seen = 0;
  while (per_writer.step()) {
    EXPECT_EQ(per_writer.column_text(0), "writer-" + std::to_string(writers_seen));
    EXPECT_EQ(per_writer.column_int64(1), kRecords);
    EXPECT_EQ(per_writer.column_int64(2), kRecords);
    const int64_t first = int64_t{writers_seen} * 1000000;  // db_stress_child's config of record 0
    EXPECT_EQ(per_writer.column_int64(3), first);
    EXPECT_EQ(per_writer.column_int64(4), first + kRecords - 1);
    ++writers_seen;
  }
  EXPECT_EQ(writers_seen, kWriters);
  EXPECT_EQ(db.stats().records, kWriters * kRecords);
  EXPECT_TRUE(db.check().ok());
}

TEST_F(MultiProcessTest, WriterKilledAtRandomMomentsLosesNoCommittedBatch) {
  constexpr int kKills = 60;
  constexpr int64_t kBatch = 40;
  std::string db_path = path("crash.db");
  std::mt19937 rng(20240607);
  std::uniform_int_distribution<int> delay_us(0, 30000);

  std::map<int, std::set<int64_t>> reported;  // run -> batches it said were committed
  for (int run = 0; run < kKills; ++run) {
    Child child = spawn(kChild, {"crash", db_path, std::to_string(run), std::to_string(kBatch)},
                        /*capture=*/true);
    ASSERT_GT(child.pid, 0);
    std::string out;
    if (run % 10 == 0) {
      // Early, while the process is still opening (or, the first time, creating) the file.
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng) / 10));
    } else {
      // At a random moment after its first commit, whatever the speed of this build.
      out = read_first_line(child.stdout_fd, std::chrono::seconds(20));
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    }
    ASSERT_EQ(kill(child.pid, SIGKILL), 0);
    out += read_all(child.stdout_fd);
    int status = wait_for(child);
    EXPECT_TRUE(status == 128 + SIGKILL || status == 0) << "child failed with status " << status;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      if (!lines.eof()) reported[run].insert(std::stoll(line));  // complete lines only
    }
  }

  // The file is sound, and each batch is there entirely or not at all.
  TuningDb db = TuningDb::open(db_path);
  Statement integrity = db.database().prepare("PRAGMA integrity_check");
  ASSERT_TRUE(integrity.step());
  EXPECT_EQ(integrity.column_text(0), "ok");
  integrity.reset();
  EXPECT_TRUE(db.check().ok());

  std::map<int, std::set<int64_t>> present;
  Statement batches = db.database().prepare("SELECT substr(runner, 5), config_index / " + std::to_string(kBatch) +
                                            ", count(*), count(DISTINCT config_index) FROM record GROUP BY 1, 2");
  while (batches.step()) {
    int run = std::stoi(batches.column_text(0));
    int64_t batch = batches.column_int64(1);
    EXPECT_EQ(batches.column_int64(2), kBatch) << "run " << run << " batch " << batch;
    EXPECT_EQ(batches.column_int64(3), kBatch) << "run " << run << " batch " << batch;
    present[run].insert(batch);
  }
  int64_t reported_batches = 0;
  for (const auto &[run, set] : reported) {
    for (int64_t batch : set) {
      EXPECT_TRUE(present[run].count(batch))
          << "run " << run << " reported batch " << batch << " committed, but it is missing";
      ++reported_batches;
    }
  }
  // Killed processes do get work done, or the test would prove nothing.
  EXPECT_GT(reported_batches, kKills / 2);
  int64_t present_batches = 0;
  for (const auto &[run, set] : present) present_batches += static_cast<int64_t>(set.size());
  RecordProperty("reported_batches", static_cast<int>(reported_batches));
  RecordProperty("present_batches", static_cast<int>(present_batches));
  // A run's batches are its first ones, without gaps: each commit is in order and durable.
  for (const auto &[run, set] : present) {
    EXPECT_EQ(*set.rbegin() + 1, static_cast<int64_t>(set.size())) << "run " << run;
  }
}

}  // namespace
}  // namespace kiln::db
