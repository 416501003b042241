// The tuning service as a user runs it: the kilnd executable measuring tiny matmul jobs on this
// machine (--local, one thread), on loopback. It prints its address first; a job survives a
// SIGKILL of the daemon (a restart resumes it and keeps every record); SIGTERM pauses the running
// job and exits 0, and a restart resumes it; `kiln tune --daemon` submits a job and follows it to
// its table, Ctrl-C detaches, and `kiln jobs --daemon` pauses, resumes, watches and lists.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contracts/json.h"
#include "db/tuning_db.h"
#include "kiln/v1/tuner.grpc.pb.h"
#include "rpc_server/shared_token.h"
#include "tests/db/process_util.h"
#include "tests/rpc_server/http_get.h"
#include "tests/rpc_server/prometheus_text.h"
#include "tests/temp_dir.h"
#include "tuner/job_manager.h"

#ifndef KILND_BINARY
#error "KILND_BINARY must name the kilnd executable"
#endif
#ifndef KILN_CLI_BINARY
#error "KILN_CLI_BINARY must name the kiln executable"
#endif

namespace kiln::tuner {
namespace {

using namespace std::chrono_literals;
namespace v1 = kiln::v1;
namespace pt = db::testing;

constexpr char kToken[] = "kilnd-secret";
constexpr char kMatmul[] = R"({"a":{"shape":[32,32]},"b":{"shape":[32,32]}})";

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// A program started for the test: stdout through a pipe (or into a file), stderr into a file;
// killed and reaped when the object goes away.
class Process {
 public:
  Process(const std::string &program, const std::vector<std::string> &args, const std::string &err_path,
          const std::string &out_path = "") {
    int fds[2];
    if (out_path.empty() && pipe(fds) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      int out = out_path.empty() ? fds[1] : open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      std::vector<char *> argv = {const_cast<char *>(program.c_str())};
      for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      _exit(127);
    }
    if (out_path.empty()) {
      close(fds[1]);
      stdout_fd_ = fds[0];
    }
  }
  ~Process() {
    if (!status_) {
      kill(pid_, SIGKILL);
      wait_for(10s);
    }
    if (stdout_fd_ >= 0) close(stdout_fd_);
  }
  Process(const Process &) = delete;
  Process &operator=(const Process &) = delete;

  void signal(int sig) const { kill(pid_, sig); }
  // The next line on stdout, without its newline ("" when none came within `timeout`).
  std::string first_line(std::chrono::milliseconds timeout = 60s) {
    if (pending_.find('\n') == std::string::npos) pending_ += pt::read_first_line(stdout_fd_, timeout);
    const size_t eol = pending_.find('\n');
    if (eol == std::string::npos) return "";
    std::string line = pending_.substr(0, eol);
    pending_.erase(0, eol + 1);
    return line;
  }
  std::string rest() {
    std::string text = pending_ + pt::read_all(stdout_fd_);
    pending_.clear();
    stdout_fd_ = -1;
    return text;
  }
  // The exit status (128 + signal for a signal) once the process has ended within `timeout`.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    for (auto until = std::chrono::steady_clock::now() + timeout; !status_;) {
      int raw = 0;
      if (waitpid(pid_, &raw, WNOHANG) == pid_) {
        status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
        break;
      }
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(10ms);
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;  // read from stdout, not yet returned
  std::optional<int> status_;
};

struct Result {
  int status = -1;
  std::string out, err;
};

class KilndTest : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(token_file()) << kToken << "\n"; }

  std::string db() const { return dir_.file("kiln.db"); }
  std::string token_file() const { return dir_.file("token"); }
  std::string daemon_log() const { return read_file(dir_.file("kilnd.log")); }

  // Starts kilnd on the test's log (with `extra` flags) and connects to it.
  void start_daemon(const std::vector<std::string> &extra = {}) {
    std::vector<std::string> args = {
        "--db",       db(), "--local",         "--listen", "127.0.0.1:0", "--token-file", token_file(),
        "--max-jobs", "1",  "--build-workers", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<Process>(KILND_BINARY, args, dir_.file("kilnd.log"));
    address_ = daemon_->first_line();
    ASSERT_TRUE(has(address_, "127.0.0.1:")) << "no address first on stdout: '" << address_ << "'\n" << daemon_log();
    stub_ = v1::Tuner::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  std::unique_ptr<grpc::ClientContext> context(const std::string &token = kToken) {
    auto c = std::make_unique<grpc::ClientContext>();
    rpc::attach_token(*c, token);
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  }

  int64_t submit(int64_t trials, const std::string &name = "matmul") {
    v1::SubmitJobRequest request;
    v1::JobSpec *spec = request.mutable_spec();
    spec->set_name(name);
    v1::TuneTask *task = spec->add_tasks();
    task->set_template_name("matmul.x86");
    task->set_args_json(kMatmul);
    spec->set_trials(trials);
    spec->set_batch_size(4);
    spec->set_strategy("random");
    spec->mutable_measure()->set_threads(1);
    v1::SubmitJobReply reply;
    grpc::Status status = stub_->SubmitJob(context().get(), request, &reply);
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
    for (auto until = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < until;) {
      // The job may not exist yet (a kiln command submits it).
      v1::JobRequest request;
      request.set_job_id(job);
      v1::JobInfo info;
      if (stub_->GetJob(context().get(), request, &info).ok() && done(info)) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // The job's records: (record id, workload key, config index).
  std::vector<std::tuple<int64_t, std::string, int64_t>> records(int64_t job) {
    db::TuningDb log = db::TuningDb::open(db());
    std::vector<std::tuple<int64_t, std::string, int64_t>> out;
    log.for_each_record({}, [&](const db::Record &r) {
      if (r.job_id && *r.job_id == job) out.emplace_back(r.id, r.workload.key, r.config.index);
    });
    return out;
  }

  // Runs the kiln command to its end.
  Result kiln(const std::vector<std::string> &args, std::chrono::milliseconds timeout = 120s) {
    const std::string out = dir_.file("kiln.out"), err = dir_.file("kiln.err");
    std::ofstream(err, std::ios::trunc).flush();
    Process p(KILN_CLI_BINARY, args, err, out);
    Result r;
    r.status = p.wait_for(timeout).value_or(-1);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }
  std::vector<std::string> daemon_args(std::vector<std::string> args) {
    std::vector<std::string> out = {"jobs", "--daemon", address_, "--token-file", token_file()};
    out.insert(out.end(), args.begin(), args.end());
    return out;
  }

  test::TempDir dir_{"kiln_kilnd"};
  std::unique_ptr<Process> daemon_;
  std::string address_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

TEST_F(KilndTest, PrintsItsAddressFirstAndRequiresTheToken) {
  start_daemon();
  v1::ListJobsReply list;
  EXPECT_TRUE(stub_->ListJobs(context().get(), v1::ListJobsRequest(), &list).ok());
  EXPECT_EQ(stub_->ListJobs(context("wrong").get(), v1::ListJobsRequest(), &list).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(has(daemon_log(), "event=serving")) << daemon_log();

  // Where to measure must be said; a missing token file is an error.
  Process neither(KILND_BINARY, {"--db", db(), "--token-file", token_file()}, dir_.file("neither.log"));
  EXPECT_EQ(neither.wait_for(30s), 2);
  EXPECT_TRUE(has(read_file(dir_.file("neither.log")), "--tracker ADDR")) << read_file(dir_.file("neither.log"));
  Process no_token(KILND_BINARY, {"--db", db(), "--local", "--token-file", dir_.file("missing")},
                   dir_.file("no_token.log"));
  EXPECT_EQ(no_token.wait_for(30s), 1);
  // One daemon per log.
  Process second(KILND_BINARY, {"--db", db(), "--local", "--listen", "127.0.0.1:0", "--token-file", token_file()},
                 dir_.file("second.log"));
  EXPECT_EQ(second.wait_for(30s), 1);
  EXPECT_TRUE(has(read_file(dir_.file("second.log")), "another tuning service")) << read_file(dir_.file("second.log"));
}

TEST_F(KilndTest, AJobResumesAfterSigkillKeepingEveryRecord) {
  start_daemon();
  const int64_t job = submit(48);
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.trials_done() >= 8; })) << daemon_log();
  daemon_->signal(SIGKILL);
  ASSERT_EQ(daemon_->wait_for(30s), 128 + SIGKILL);
  const auto before = records(job);
  ASSERT_GE(before.size(), 8u);
  ASSERT_LT(before.size(), 48u) << "the job ended before the kill; it needs more trials";
  {
    db::TuningDb log = db::TuningDb::open(db());
    EXPECT_EQ(log.job(job)->state, db::JobState::kRunning);
  }

  start_daemon();
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString() << daemon_log();
  const auto after = records(job);
  EXPECT_EQ(after.size(), 48u);
  std::set<std::tuple<int64_t, std::string, int64_t>> all(after.begin(), after.end());
  for (const auto &r : before) EXPECT_TRUE(all.count(r)) << "record " << std::get<0>(r) << " lost";
  std::set<std::pair<std::string, int64_t>> configs;
  for (const auto &r : after) configs.insert({std::get<1>(r), std::get<2>(r)});
  EXPECT_EQ(configs.size(), 48u) << "a config recorded twice";
  EXPECT_TRUE(has(daemon_log(), "queued again (it was running")) << daemon_log();
  EXPECT_EQ(get(job).trials_done(), 48);
}

TEST_F(KilndTest, SigtermPausesTheRunningJobExitsZeroAndARestartResumesIt) {
  start_daemon();
  const int64_t job = submit(48);
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.trials_done() >= 8; })) << daemon_log();
  daemon_->signal(SIGTERM);
  ASSERT_EQ(daemon_->wait_for(60s), 0) << daemon_log();
  int64_t done = 0;
  {
    db::TuningDb log = db::TuningDb::open(db());
    const db::Job j = *log.job(job);
    EXPECT_EQ(j.state, db::JobState::kPaused);
    EXPECT_EQ(j.message, kServiceStoppedMessage);
    done = j.trials_done;
  }
  EXPECT_LT(done, 48);
  EXPECT_TRUE(has(daemon_log(), "event=shutting_down")) << daemon_log();
  EXPECT_TRUE(has(daemon_log(), "event=job_paused job=" + std::to_string(job) + " ")) << daemon_log();

  start_daemon();
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString() << daemon_log();
  EXPECT_EQ(records(job).size(), 48u);
}

TEST_F(KilndTest, KilnTuneDaemonSubmitsFollowsAndPrintsTheTable) {
  start_daemon();
  Result r =
      kiln({"tune", "--daemon", address_, "--token-file", token_file(), "--template", "matmul.x86", "--args", kMatmul,
            "--trials", "12", "--batch", "4", "--threads", "1", "--strategy", "random", "--name", "from the cli"});
  ASSERT_EQ(r.status, 0) << r.err << r.out << daemon_log();
  EXPECT_TRUE(has(r.err, "job 1 submitted to the tuning service at " + address_)) << r.err;
  EXPECT_TRUE(has(r.out, "default ms")) << r.out;
  EXPECT_TRUE(has(r.out, "weighted total")) << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done: trial budget spent")) << r.out;
  EXPECT_EQ(records(1).size(), 12u);

  r = kiln(daemon_args({"list"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "from the cli")) << r.out;
  EXPECT_TRUE(has(r.out, "12/12")) << r.out;
  r = kiln(daemon_args({"show", "1"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "matmul.x86")) << r.out;
  EXPECT_TRUE(has(r.out, "device key")) << r.out;

  // The tuner's own message for a bad spec; the token; an unknown job; an unreachable service.
  r = kiln({"tune", "--daemon", address_, "--token-file", token_file(), "--template", "matmul.x86", "--args", kMatmul,
            "--trials", "0"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "between 1 and")) << r.err;
  std::ofstream(dir_.file("wrong")) << "not-it\n";
  r = kiln({"jobs", "--daemon", address_, "--token-file", dir_.file("wrong"), "list"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "refused the token")) << r.err;
  r = kiln(daemon_args({"show", "99"}));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "no tuning job 99")) << r.err;
  r = kiln({"jobs", "--daemon", "127.0.0.1:1", "--token-file", token_file(), "list"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "cannot be reached")) << r.err;
}

TEST_F(KilndTest, CtrlCDetachesAndKilnJobsDrivesTheJobInTheDaemon) {
  start_daemon();
  const std::string out = dir_.file("tune.out"), err = dir_.file("tune.err");
  Process tune(KILN_CLI_BINARY,
               {"tune", "--daemon", address_, "--token-file", token_file(), "--template", "matmul.x86", "--args",
                kMatmul, "--trials", "60", "--batch", "4", "--threads", "1", "--strategy", "random"},
               err, out);
  ASSERT_TRUE(wait_until(
      1, [](const v1::JobInfo &i) { return i.trials_done() >= 8; }, 120s))
      << read_file(err);
  tune.signal(SIGINT);
  ASSERT_EQ(tune.wait_for(30s), 0) << read_file(err);
  EXPECT_TRUE(has(read_file(out), "stopped following job 1; it goes on")) << read_file(out);
  EXPECT_TRUE(has(read_file(out), "kiln jobs --daemon " + address_ + " pause 1")) << read_file(out);
  EXPECT_NE(get(1).state(), v1::JOB_STATE_PAUSED) << "detaching must not pause the job";

  Result r = kiln(daemon_args({"pause", "1"}));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "resume with: kiln jobs --daemon " + address_ + " resume 1")) << r.out;
  ASSERT_TRUE(wait_until(1, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_PAUSED; }));
  const int64_t paused_at = get(1).trials_done();
  EXPECT_LT(paused_at, 60);

  r = kiln(daemon_args({"resume", "1"}));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kiln(daemon_args({"watch", "1"}));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_TRUE(has(r.out, "job 1 done")) << r.out;
  EXPECT_TRUE(has(r.out, "weighted total")) << r.out;
  EXPECT_EQ(records(1).size(), 60u);

  r = kiln(daemon_args({"cancel", "1"}));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.err, "is done")) << r.err;
}

// With --metrics-listen kilnd prints the metrics address as its second line on stdout and serves
// the Prometheus text format: after a job, the ok-trials counter equals the job's OK records in the
// log and the job shows as done; a garbage request gets an HTTP error and /metrics still answers.
// With --log-format json every event line is a JSON object with the required keys.
TEST_F(KilndTest, ServesMetricsThatAgreeWithTheLogAndLogsJson) {
  start_daemon({"--metrics-listen", "127.0.0.1:0", "--log-format", "json"});
  const std::string second = daemon_->first_line();
  const int port = kiln::testing::metrics_port(second);
  ASSERT_GT(port, 0) << "'" << second << "'\n" << daemon_log();

  const int64_t job = submit(8);
  ASSERT_TRUE(wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
      << get(job).DebugString() << daemon_log();
  int64_t ok_records = 0, records_total = 0;
  {
    db::TuningDb log = db::TuningDb::open(db());
    log.for_each_record({}, [&](const db::Record &r) {
      if (!r.job_id || *r.job_id != job) return;
      ++records_total;
      if (r.error == db::ErrorClass::kOk) ++ok_records;
    });
  }
  ASSERT_GT(ok_records, 0);

  const kiln::testing::HttpReply reply = kiln::testing::http_get(port, "/metrics");
  ASSERT_EQ(reply.status, 200) << reply.head;
  EXPECT_TRUE(reply.has_header("Content-Type: text/plain; version=0.0.4")) << reply.head;
  kiln::testing::Exposition metrics;
  ASSERT_NO_THROW(metrics = kiln::testing::parse_exposition(reply.body)) << reply.body;
  EXPECT_EQ(metrics.value("kiln_tuner_trials_total", {{"error", "ok"}}), ok_records) << reply.body;
  double measured = 0;
  for (const auto &sample : metrics.find("kiln_tuner_trials_total")) {
    if (sample.labels.at("error") != "infra") measured += sample.value;
  }
  EXPECT_EQ(measured, records_total) << reply.body;
  EXPECT_EQ(metrics.value("kiln_tuner_jobs", {{"state", "done"}}), 1) << reply.body;
  EXPECT_EQ(metrics.value("kiln_tuner_jobs", {{"state", "running"}}), 0) << reply.body;
  EXPECT_GE(metrics.value("kiln_tuner_log_write_seconds_count"), 1) << reply.body;
  EXPECT_GE(metrics.value("kiln_tuner_farm_wait_seconds_count"), 1) << reply.body;
  EXPECT_EQ(metrics.types.at("kiln_tuner_cost_model_refit_seconds"), "histogram");
  EXPECT_EQ(metrics.types.at("kiln_tuner_trials_per_second"), "gauge");
  EXPECT_EQ(metrics.find("kiln_build_info", {{"component", "kilnd"}}).size(), 1u) << reply.body;
  EXPECT_GT(metrics.value("process_start_time_seconds"), 0);

  EXPECT_GE(kiln::testing::http_exchange(port, "NOT HTTP AT ALL\r\n\r\n").status, 400);
  EXPECT_EQ(kiln::testing::http_get(port, "/nothing").status, 404);
  EXPECT_EQ(kiln::testing::http_get(port, "/metrics").status, 200);

  daemon_->signal(SIGTERM);
  ASSERT_EQ(daemon_->wait_for(60s), 0) << daemon_log();
  std::set<std::string> events;
  std::istringstream lines(daemon_log());
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // a measurement worker's own output
    contracts::Json event;
    ASSERT_NO_THROW(event = contracts::Json::parse(line)) << line;
    for (const char *key : {"ts", "level", "component", "event"}) {
      ASSERT_TRUE(event.contains(key)) << key << " missing: " << line;
    }
    EXPECT_EQ(event["component"].as_string(), "kilnd") << line;
    const std::string name = event["event"].as_string();
    events.insert(name);
    if (name == "job_started") {
      EXPECT_EQ(event["job"].as_int(), job) << line;
    }
  }
  for (const char *name :
       {"serving", "metrics_serving", "job_submitted", "job_started", "job_done", "shutting_down", "stopped"}) {
    EXPECT_TRUE(events.count(name)) << name << " not logged:\n" << daemon_log();
  }
}

}  // namespace
}  // namespace kiln::tuner
