// `kiln tune --model`, run as a user would, on a residual block (two convs of one shape, one fused
// with a ReLU, one with the residual add and a ReLU) written by make_tune_models.py: the job tunes
// its one task, the log holds the records, the model's latency is measured with default and tuned
// configs, and `kiln run --optimize --db` then builds both convs with the tuned config; Ctrl-C
// pauses the job and resuming it with the model finishes and measures it. A bad model
// path, a file that is not a model, a model without tunable operators and a bad --input-shape are
// clear errors that create no job. With --daemon (a tuning service in the test's process, measuring
// on this machine), the model is compiled with the job's records in the service's log and measured
// when the job ends; when it is not (another log, or the user stopped following) the command that
// measures it later is printed, and that command does.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "db/tuning_db.h"
#include "rpc_server/service_host.h"
#include "tests/db/process_util.h"
#include "tests/temp_dir.h"
#include "tuner/job_manager.h"
#include "tuner/measurer.h"
#include "tuner/tuner_service.h"

#ifndef KILN_CLI
#error "KILN_CLI must name the kiln executable"
#endif

namespace kiln::cli {
namespace {

namespace pt = db::testing;
namespace fs = std::filesystem;

constexpr const char *kPython = "/usr/bin/python3";
constexpr int kNoOnnx = 77;

bool has(const std::string &text, const std::string &needle) { return text.find(needle) != std::string::npos; }

class TuneModelCommandTest : public ::testing::Test {
 protected:
  test::TempDir dir;

  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing";
    const pt::Run r = pt::run_program(kPython, {KILN_MAKE_TUNE_MODELS, dir.path()}, dir.path());
    if (r.status == kNoOnnx) GTEST_SKIP() << kPython << " cannot import onnx or numpy";
    ASSERT_EQ(r.status, 0) << r.err;
  }

  std::string db() const { return dir.file("kiln.db"); }
  pt::Run kiln(const std::vector<std::string> &args) { return pt::run_program(KILN_CLI, args, dir.path()); }
};

// The JSON events `kiln tune --json` printed, by their "event".
std::vector<nlohmann::json> events(const std::string &out, const std::string &kind) {
  std::vector<nlohmann::json> found;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e.value("event", "") == kind) found.push_back(e);
  }
  return found;
}

TEST_F(TuneModelCommandTest, TunesTheModelsTaskAndKilnRunReplaysItForBothConvs) {
  pt::Run r = kiln({"tune", "--model", dir.file("block.onnx"), "--db", db(), "--trials", "8", "--strategy", "random",
                    "--batch", "4", "--threads", "1", "--runs", "3", "--json"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;

  // One task (the two convs share a shape), weight 2.
  const auto tasks = events(r.out, "tasks");
  ASSERT_EQ(tasks.size(), 1u) << r.out;
  ASSERT_EQ(tasks[0]["tasks"].size(), 1u) << r.out;
  const nlohmann::json &task = tasks[0]["tasks"][0];
  EXPECT_EQ(task["template"], "conv2d_nchwc.x86");
  EXPECT_EQ(task["weight"], 2);
  EXPECT_EQ(task["nodes"], nlohmann::json({"conv1", "conv2"}));
  EXPECT_EQ(tasks[0]["template_nodes"], 2);
  EXPECT_EQ(tasks[0]["other_nodes"], 2) << "the layout transforms at the input and the output are not tasks";
  const std::string key = task["workload"];

  const auto end = events(r.out, "end");
  ASSERT_EQ(end.size(), 1u) << r.out;
  EXPECT_EQ(end[0]["state"], "done");
  EXPECT_EQ(end[0]["trials_done"], 8);

  // The latency before and after, with both template kernels tuned.
  const auto model = events(r.out, "model");
  ASSERT_EQ(model.size(), 1u) << r.out;
  EXPECT_EQ(model[0]["runs"], 3);
  EXPECT_EQ(model[0]["template_kernels"], 2);
  EXPECT_EQ(model[0]["tuned_kernels"], 2);
  EXPECT_GT(model[0]["default_s"].get<double>(), 0);
  EXPECT_GT(model[0]["tuned_s"].get<double>(), 0);

  {
    db::TuningDb log = db::TuningDb::open(db());
    ASSERT_TRUE(log.job(1));
    EXPECT_EQ(log.job(1)->state, db::JobState::kDone);
    EXPECT_EQ(log.job(1)->trials_done, 8);
    EXPECT_EQ(log.stats().records, 8);
    EXPECT_FALSE(log.job(2));
  }

  // Compiled as `kiln run --optimize` compiles it: both fused convs take the task's record.
  r = kiln({"run", dir.file("block.onnx"), "--optimize", "--db", db(), "--input", "input=" + dir.file("input.npy"),
            "--output-dir", dir.file("out"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const nlohmann::json run = nlohmann::json::parse(r.out);
  EXPECT_EQ(run["template_kernels"], 2);
  EXPECT_EQ(run["tuned_kernels"], 2);
  ASSERT_EQ(run["templates"].size(), 2u) << r.out;
  for (const auto &k : run["templates"]) {
    EXPECT_EQ(k["workload_key"], key) << r.out;
    EXPECT_EQ(k["config"], "tuned") << r.out;
  }
}

TEST_F(TuneModelCommandTest, PrintsTheTaskTableAndTheLatencies) {
  const pt::Run r = kiln({"tune", "--model", dir.file("block.onnx"), "--db", db(), "--trials", "4", "--strategy",
                          "random", "--batch", "4", "--threads", "1", "--runs", "3"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "1x8x12x12 * 8x8x3x3")) << r.out;
  EXPECT_TRUE(has(r.out, "1 tasks from 2 template nodes")) << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  EXPECT_TRUE(has(r.out, "2 of 2 template kernels use tuned configs")) << r.out;
  EXPECT_TRUE(has(r.out, "median of 3 runs")) << r.out;
  EXPECT_TRUE(has(r.out, "speedup")) << r.out;
}

TEST_F(TuneModelCommandTest, CtrlCPausesAndResumeWithTheModelFinishesAndMeasuresIt) {
  pt::Child child = pt::spawn(KILN_CLI,
                              {"tune", "--model", dir.file("block.onnx"), "--db", db(), "--trials", "40", "--batch",
                               "4", "--threads", "1", "--strategy", "random", "--runs", "3"},
                              /*capture=*/true);
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      db::TuningDb log = db::TuningDb::open(db());
      const std::optional<db::Job> j = log.job(1);
      if (j && j->trials_done >= 4) break;
    } catch (const std::exception &) {
    }
  }
  kill(child.pid, SIGINT);
  const std::string out = pt::read_all(child.stdout_fd);
  EXPECT_EQ(pt::wait_for(child), 0) << out;
  // Paused: no latency yet, and the way on names the model.
  EXPECT_TRUE(has(out, "kiln tune --resume 1 --db " + db() + " --model " + dir.file("block.onnx"))) << out;
  EXPECT_FALSE(has(out, "template kernels use tuned configs")) << out;
  int64_t paused_at = 0;
  {
    db::TuningDb log = db::TuningDb::open(db());
    EXPECT_EQ(log.job(1)->state, db::JobState::kPaused);
    paused_at = log.job(1)->trials_done;
    EXPECT_LT(paused_at, 40);
  }
  const pt::Run r = kiln({"tune", "--resume", "1", "--db", db(), "--model", dir.file("block.onnx"), "--runs", "3"});
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  EXPECT_TRUE(has(r.out, "2 of 2 template kernels use tuned configs")) << r.out;
  db::TuningDb log = db::TuningDb::open(db());
  // The trials asked for, or every config of the task's space (its blocks fixed) when it has fewer.
  EXPECT_GT(log.job(1)->trials_done, paused_at);
  EXPECT_LE(log.job(1)->trials_done, 40);
  EXPECT_FALSE(log.job(2));
}

TEST_F(TuneModelCommandTest, BadModelsAndShapesAreClearErrorsAndMakeNoJob) {
  pt::Run r = kiln({"tune", "--model", dir.file("missing.onnx"), "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "missing.onnx: cannot open")) << r.err;

  r = kiln({"tune", "--model", dir.file("input.npy"), "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "input.npy: not a valid ONNX model")) << r.err;

  r = kiln({"tune", "--model", dir.file("relu.onnx"), "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "relu.onnx has no tunable operators")) << r.err;

  r = kiln({"tune", "--model", dir.file("block.onnx"), "--input-shape", "input=1,8,x12", "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "--input-shape input=1,8,x12")) << r.err;

  r = kiln({"tune", "--model", dir.file("block.onnx"), "--input-shape", "input", "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "is not NAME=DIMS")) << r.err;

  r = kiln({"tune", "--model", dir.file("block.onnx"), "--input-shape", "image=1,8,12,12", "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "no input named 'image'")) << r.err;

  r = kiln({"tune", "--model", dir.file("block.onnx"), "--input-shape", "input=1,8,12,13", "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "input 'input' dimension 3 is 12")) << r.err;

  r = kiln({"tune", "--preset", "resnet18", "--input-shape", "input=1,8,12,12", "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "--input-shape needs --model")) << r.err;

  r = kiln({"tune", "--model", dir.file("block.onnx"), "--preset", "resnet18", "--db", db()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(has(r.err, "exactly one of --model FILE")) << r.err;

  EXPECT_FALSE(fs::exists(db())) << "a bad model or option created the tuning log";
}

// The tuning service as kilnd --local runs it, in the test's process on a loopback port: a
// JobManager on its own log whose jobs measure on this machine (worker processes of the kiln
// executable), behind a TunerService.
class InProcessDaemon {
 public:
  static constexpr const char *kToken = "tune-model-secret";

  explicit InProcessDaemon(const std::string &log_path) {
    tuner::LocalMeasurerOptions lo;
    lo.worker_command = {KILN_CLI, "--measure-worker"};
    lo.build_workers = 1;
    auto machine = std::make_shared<tuner::LocalMeasurer>("llvm -mcpu=native", lo);
    tuner::JobManagerOptions o;
    o.log_path = log_path;
    o.measurer = [machine](const tuner::MeasurerRequest &r) { return tuner::LocalMeasurer::share(machine, r.measure); };
    manager_ = std::make_unique<tuner::JobManager>(o);
    manager_->start();
    service_ = std::make_unique<tuner::TunerService>(*manager_, kToken);
    rpc::ServiceHostOptions host;
    host.max_message_bytes = tuner::TunerService::kMaxMessageBytes;
    host_ = rpc::ServiceHost::start("127.0.0.1:0", {service_.get()}, host);
  }
  ~InProcessDaemon() {
    manager_->shutdown();
    host_->shutdown(std::chrono::seconds(1));
    host_->wait();
  }

  const std::string &address() const { return host_->address(); }
  tuner::JobManager &manager() { return *manager_; }

 private:
  std::unique_ptr<tuner::JobManager> manager_;
  std::unique_ptr<tuner::TunerService> service_;
  std::unique_ptr<rpc::ServiceHost> host_;
};

class TuneModelDaemonTest : public TuneModelCommandTest {
 protected:
  void SetUp() override {
    TuneModelCommandTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::ofstream(token_file()) << InProcessDaemon::kToken << "\n";
    try {
      daemon = std::make_unique<InProcessDaemon>(service_db());
    } catch (const std::exception &e) {
      GTEST_SKIP() << "the tuning service cannot start here: " << e.what();
    }
  }
  void TearDown() override { daemon.reset(); }

  std::string service_db() const { return dir.file("service.db"); }
  std::string token_file() const { return dir.file("kiln.token"); }
  // `kiln tune --model block.onnx --daemon ...` with a tiny budget, and `extra`.
  std::vector<std::string> tune_args(int trials, const std::vector<std::string> &extra) const {
    std::vector<std::string> args = {"tune",
                                     "--model",
                                     dir.file("block.onnx"),
                                     "--daemon",
                                     daemon->address(),
                                     "--token-file",
                                     token_file(),
                                     "--trials",
                                     std::to_string(trials),
                                     "--batch",
                                     "4",
                                     "--threads",
                                     "1",
                                     "--strategy",
                                     "random",
                                     "--runs",
                                     "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // Runs a command line `kiln ...` that the tool printed, as a user would paste it.
  pt::Run run_printed(const std::string &command) {
    EXPECT_EQ(command.rfind("kiln ", 0), 0u) << command;
    return pt::run_program("/bin/sh", {"-c", std::string(KILN_CLI) + command.substr(4)}, dir.path());
  }
  // The text after `label` on its line of `out`.
  static std::string after(const std::string &out, const std::string &label) {
    const size_t at = out.find(label);
    if (at == std::string::npos) return "";
    const size_t from = at + label.size();
    return out.substr(from, out.find('\n', from) - from);
  }

  std::unique_ptr<InProcessDaemon> daemon;
};

TEST_F(TuneModelDaemonTest, WaitedForTheJobIsCompiledWithTheServicesRecordsAndMeasured) {
  pt::Run r = kiln(tune_args(8, {"--db", service_db(), "--json"}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const auto end = events(r.out, "end");
  ASSERT_EQ(end.size(), 1u) << r.out;
  EXPECT_EQ(end[0]["state"], "done");
  const auto model = events(r.out, "model");
  ASSERT_EQ(model.size(), 1u) << r.out;
  EXPECT_EQ(model[0]["runs"], 3);
  EXPECT_EQ(model[0]["template_kernels"], 2);
  EXPECT_EQ(model[0]["tuned_kernels"], 2) << "both fused convs take the record the service measured";
  EXPECT_GT(model[0]["default_s"].get<double>(), 0);
  EXPECT_GT(model[0]["tuned_s"].get<double>(), 0);
  EXPECT_TRUE(events(r.out, "model_not_measured").empty()) << r.out;

  // The same in text, from the table to the latencies.
  r = kiln(tune_args(4, {"--db", service_db()}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.err, "job 2 submitted to the tuning service at " + daemon->address())) << r.err;
  EXPECT_TRUE(has(r.out, "job 2 done")) << r.out;
  EXPECT_TRUE(has(r.out, "2 of 2 template kernels use tuned configs from " + service_db())) << r.out;
  EXPECT_TRUE(has(r.out, "median of 3 runs")) << r.out;
  EXPECT_TRUE(has(r.out, "speedup")) << r.out;
  EXPECT_FALSE(has(r.out, "is not measured")) << r.out;
}

TEST_F(TuneModelDaemonTest, WithAnotherLogTheCommandThatMeasuresLaterIsPrintedAndDoesIt) {
  // No log at --db, then a log that does not hold the job: nothing measured, the command printed.
  const std::string missing = dir.file("missing.db");
  pt::Run r = kiln(tune_args(4, {"--db", missing}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  EXPECT_TRUE(has(r.out, "is not measured: the tuning service's log is not at " + missing)) << r.out;
  EXPECT_FALSE(has(r.out, "template kernels use tuned configs")) << r.out;
  EXPECT_FALSE(fs::exists(missing)) << "the client created a log";
  const std::string later = after(r.out, "measure it with the job's records:  ");
  EXPECT_EQ(later, "kiln tune --daemon " + daemon->address() + " --token-file " + token_file() +
                       " --resume 1 --model " + dir.file("block.onnx") + " --db LOG")
      << r.out;

  const std::string other = dir.file("other.db");
  db::TuningDb::open(other);
  r = kiln(tune_args(4, {"--db", other}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, other + " is not the tuning service's log (it does not hold job 2")) << r.out;
  EXPECT_FALSE(has(r.out, "template kernels use tuned configs")) << r.out;

  // With the service's log as LOG, the printed command measures the done job without tuning it again.
  std::string command = after(r.out, "measure it with the job's records:  ");
  ASSERT_TRUE(has(command, " --db LOG")) << r.out;
  command = command.substr(0, command.size() - 3) + service_db();
  r = run_printed(command);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.err, "job 2 found done in the tuning service")) << r.err;
  EXPECT_TRUE(has(r.out, "2 of 2 template kernels use tuned configs from " + service_db())) << r.out;
  EXPECT_TRUE(has(r.out, "speedup")) << r.out;
  EXPECT_EQ(daemon->manager().get(2).status.trials_done, 4);
  EXPECT_EQ(daemon->manager().list().size(), 2u) << "measuring made no job";
}

TEST_F(TuneModelDaemonTest, StoppedFollowingThePrintedCommandWaitsForTheJobAndMeasuresIt) {
  const std::string out = dir.file("tune.out");
  pt::Child child = pt::spawn(KILN_CLI, tune_args(40, {"--db", service_db()}), /*capture=*/true);
  bool started = false;
  for (int i = 0; i < 1200 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      started = daemon->manager().get(1).status.trials_done >= 4;
    } catch (const std::exception &) {
    }
  }
  ASSERT_TRUE(started) << "the job did not start";
  kill(child.pid, SIGINT);
  const std::string text = pt::read_all(child.stdout_fd);
  ASSERT_EQ(pt::wait_for(child), 0) << text;
  EXPECT_TRUE(has(text, "stopped following job 1; it goes on")) << text;
  EXPECT_FALSE(has(text, "template kernels use tuned configs")) << text;
  const std::string later = after(text, "measure " + dir.file("block.onnx") + " when it is done:  ");
  EXPECT_EQ(later, "kiln tune --daemon " + daemon->address() + " --token-file " + token_file() +
                       " --resume 1 --model " + dir.file("block.onnx") + " --db " + service_db())
      << text;

  // The command follows the job to its end, then measures the model.
  const pt::Run r = run_printed(later);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  EXPECT_TRUE(has(r.out, "2 of 2 template kernels use tuned configs from " + service_db())) << r.out;
  EXPECT_TRUE(has(r.out, "speedup")) << r.out;
  EXPECT_EQ(daemon->manager().list().size(), 1u);
}

}  // namespace
}  // namespace kiln::cli
