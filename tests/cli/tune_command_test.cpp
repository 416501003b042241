// `kiln tune`, `kiln jobs` and `kiln db curve`, run as a user would: a small embedded job fills the
// tuning log and prints its table; SIGINT pauses it and --resume finishes it; jobs are listed,
// shown, paused and cancelled; the curve is an SVG with every task; bad input is a clear error
// with exit status 1 and creates no job.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "db/tuning_db.h"
#include "tests/db/process_util.h"
#include "tests/temp_dir.h"

#ifndef KILN_CLI
#error "KILN_CLI must name the kiln executable"
#endif

namespace kiln::cli {
namespace {

namespace pt = db::testing;

using Result = pt::Run;

class TuneCommandTest : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::string db() const { return dir.path() + "/kiln.db"; }

  Result kiln(const std::vector<std::string> &args) { return pt::run_program(KILN_CLI, args, dir.path()); }
};

bool has(const std::string &text, const std::string &needle) { return text.find(needle) != std::string::npos; }

const char *kMatmul = R"({"a":{"shape":[32,32]},"b":{"shape":[32,32]}})";

TEST_F(TuneCommandTest, AnEmbeddedJobFillsTheLogAndPrintsItsTable) {
  Result r = kiln({"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "12", "--batch",
                   "4", "--threads", "1", "--strategy", "random"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "default ms")) << r.out;
  EXPECT_TRUE(has(r.out, "weighted total")) << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  db::TuningDb log = db::TuningDb::open(db());
  EXPECT_EQ(log.job(1)->trials_done, 12);
  EXPECT_EQ(log.job(1)->state, db::JobState::kDone);
  EXPECT_EQ(log.stats().records, 12);

  // --json: one event per batch, then the end.
  r = kiln({"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "8", "--batch", "4",
            "--threads", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line, last;
  int events = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    EXPECT_EQ(e["job"], 2);
    last = e["event"];
    ++events;
  }
  EXPECT_EQ(events, 3);
  EXPECT_EQ(last, "end");
}

TEST_F(TuneCommandTest, FlushTimesEachCallAloneWithItsInputsFlushed) {
  // --flush: ten repeats of one call each (the tuner's default is three repeats of calls grown to
  // 10 ms), and the job keeps those options for --resume.
  Result r = kiln({"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "4", "--batch", "4",
                   "--threads", "1", "--strategy", "random", "--flush"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  r = kiln({"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "4", "--batch", "4",
            "--threads", "1", "--strategy", "random"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  db::TuningDb log = db::TuningDb::open(db());
  int flushed = 0, plain = 0;
  log.for_each_record({}, [&](const db::Record &rec) {
    ASSERT_TRUE(rec.job_id.has_value());
    if (*rec.job_id == 1) {
      EXPECT_EQ(rec.costs.size(), 10u);
      ++flushed;
    } else {
      EXPECT_EQ(rec.costs.size(), 3u);
      ++plain;
    }
  });
  EXPECT_EQ(flushed, 4);
  EXPECT_EQ(plain, 4);
  EXPECT_TRUE(has(log.job(1)->spec.dump(), "\"cpuCacheFlush\":true")) << log.job(1)->spec.dump();
  EXPECT_FALSE(has(log.job(2)->spec.dump(), "cpuCacheFlush")) << log.job(2)->spec.dump();
}

TEST_F(TuneCommandTest, CtrlCPausesAndResumeFinishes) {
  pt::Child child = pt::spawn(KILN_CLI,
                              {"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "150",
                               "--batch", "4", "--threads", "1", "--strategy", "random"},
                              /*capture=*/true);
  // Wait until some trials are in the log, then interrupt.
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      db::TuningDb log = db::TuningDb::open(db());
      const std::optional<db::Job> j = log.job(1);
      if (j && j->trials_done >= 8) break;
    } catch (const std::exception &) {
    }
  }
  kill(child.pid, SIGINT);
  const std::string out = pt::read_all(child.stdout_fd);
  EXPECT_EQ(pt::wait_for(child), 0) << out;
  EXPECT_TRUE(has(out, "resume with: kiln tune --resume 1")) << out;
  int64_t done = 0;
  {
    db::TuningDb log = db::TuningDb::open(db());
    EXPECT_EQ(log.job(1)->state, db::JobState::kPaused);
    done = log.job(1)->trials_done;
    EXPECT_GE(done, 8);
    EXPECT_LT(done, 150);
  }
  Result r = kiln({"tune", "--db", db(), "--resume", "1", "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  db::TuningDb log = db::TuningDb::open(db());
  EXPECT_EQ(log.job(1)->trials_done, 150);
  EXPECT_EQ(log.stats().records, 150);
}

TEST_F(TuneCommandTest, JobsResumeAndWatchWorkOnTheLocalLog) {
  pt::Child child = pt::spawn(KILN_CLI,
                              {"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "40",
                               "--batch", "4", "--threads", "1", "--strategy", "random"},
                              /*capture=*/true);
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      db::TuningDb log = db::TuningDb::open(db());
      const std::optional<db::Job> j = log.job(1);
      if (j && j->trials_done >= 4) break;
    } catch (const std::exception &) {
    }
  }
  kill(child.pid, SIGINT);
  pt::read_all(child.stdout_fd);
  ASSERT_EQ(pt::wait_for(child), 0);

  // Resumed embedded, as `kiln tune --resume` does.
  Result r = kiln({"jobs", "--db", db(), "resume", "1"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  {
    db::TuningDb log = db::TuningDb::open(db());
    EXPECT_EQ(log.job(1)->trials_done, 40);
    EXPECT_EQ(log.job(1)->state, db::JobState::kDone);
  }
  // Watching a stopped job shows where it ended.
  r = kiln({"jobs", "--db", db(), "watch", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "weighted total")) << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  r = kiln({"jobs", "--db", db(), "resume", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "is done")) << r.err;
  r = kiln({"jobs", "--db", db(), "watch", "5"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "no job 5")) << r.err;
}

TEST_F(TuneCommandTest, JobsAreListedShownPausedAndCancelled) {
  ASSERT_EQ(kiln({"tune", "--db", db(), "--template", "matmul.x86", "--args", kMatmul, "--trials", "8", "--batch", "4",
                  "--threads", "1", "--name", "small matmul"})
                .status,
            0);
  Result r = kiln({"jobs", "--db", db(), "list"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "small matmul")) << r.out;
  EXPECT_TRUE(has(r.out, "8/8")) << r.out;
  r = kiln({"jobs", "--db", db(), "show", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "matmul.x86")) << r.out;
  EXPECT_TRUE(has(r.out, "best GFLOPS")) << r.out;

  // A finished job cannot be paused; a pending one can, then cancelled for good.
  r = kiln({"jobs", "--db", db(), "pause", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "is done")) << r.err;
  int64_t pending = 0;
  {
    db::TuningDb log = db::TuningDb::open(db());
    pending = log.create_job("later", nlohmann::json::object(), 10);
  }
  r = kiln({"jobs", "--db", db(), "pause", std::to_string(pending)});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "resume with")) << r.out;
  r = kiln({"jobs", "--db", db(), "cancel", std::to_string(pending)});
  ASSERT_EQ(r.status, 0) << r.err;
  db::TuningDb log = db::TuningDb::open(db());
  EXPECT_EQ(log.job(pending)->state, db::JobState::kCancelled);

  r = kiln({"jobs", "--db", db(), "show", "99"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "no job 99")) << r.err;
}

TEST_F(TuneCommandTest, CurveIsAnSvgWithEveryTask) {
  ASSERT_EQ(kiln({"tune", "--db", db(), "--workloads", "-", "--trials", "1"}).status, 1);  // unreadable file
  const std::string list = dir.path() + "/tasks.json";
  std::ofstream(list)
      << R"([{"template":"matmul.x86","args":{"a":{"shape":[16,16]},"b":{"shape":[16,16]}},"name":"small <one>"},
                             {"template":"matmul.x86","args":{"a":{"shape":[32,32]},"b":{"shape":[32,32]}},"weight":2,"name":"big"}])";
  Result r = kiln({"tune", "--db", db(), "--workloads", list, "--trials", "16", "--batch", "4", "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const std::string svg = dir.path() + "/curve.svg";
  r = kiln({"db", "--db", db(), "curve", "--job", "1", "-o", svg});
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(svg);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(has(text.str(), "<svg")) << text.str();
  EXPECT_TRUE(has(text.str(), "small &lt;one&gt;"));
  EXPECT_TRUE(has(text.str(), ">big<"));
  EXPECT_TRUE(has(text.str(), "<polyline"));
}

TEST_F(TuneCommandTest, BadInputIsAClearErrorAndCreatesNoJob) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--preset", "alexnet"}, "unknown preset 'alexnet'"},
      {{"--template", "conv3d.x86", "--args", "{}"}, "conv3d.x86"},
      {{"--template", "matmul.x86", "--args", "{\"a\":"}, "JSON"},
      {{"--template", "matmul.x86", "--args", kMatmul, "--trials", "0"}, "between 1 and"},
      {{"--template", "matmul.x86", "--args", kMatmul, "--time-budget", "soon"}, "--time-budget"},
      {{"--template", "matmul.x86", "--args", kMatmul, "--preset", "resnet18"}, "exactly one of"},
      {{}, "exactly one of"},
      {{"--resume", "7"}, "no job 7"},
  };
  for (const Case &c : cases) {
    std::vector<std::string> args = {"tune", "--db", db()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Result r = kiln(args);
    EXPECT_EQ(r.status, 1) << c.message << ": " << r.err;
    EXPECT_TRUE(has(r.err, c.message)) << r.err;
  }
  db::TuningDb log = db::TuningDb::open(db());
  EXPECT_TRUE(log.jobs().empty());
}

}  // namespace
}  // namespace kiln::cli
