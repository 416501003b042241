// The tuning service in process: a TunerService in front of a JobManager on a loopback port, with
// a synthetic measurer (a known cost per config, a gate to hold a job in its batch, failures on
// demand) so that every case is fast and exact. Priorities and the queue, several jobs at once,
// WatchJob's progress and final events, late watchers, pause, resume and cancel, the token, bad
// specs and unknown jobs, the measurer's back-off and give-up, and a shutdown that a new manager
// resumes.
#include "tuner/tuner_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "compiler/ops/registry.h"
#include "rpc_server/event_log.h"
#include "rpc_server/service_host.h"
#include "rpc_server/shared_token.h"
#include "tests/temp_dir.h"
#include "tuner/job_manager.h"
#include "tuner/job_wire.h"

namespace kiln::tuner {
namespace {

using namespace std::chrono_literals;
namespace v1 = kiln::v1;

constexpr char kToken[] = "tuning-secret";
constexpr char kTarget[] = "llvm -mcpu=skylake-avx512";
constexpr char kDevice[] = "test-cpu";

// What every synthetic measurer of a test shares: the order jobs were measured in, a gate that
// holds batches, and failures to throw.
struct Bench {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int64_t> batches;       // the job id of every batch, in order
  std::map<int64_t, int> in_measure;  // job id -> batches in measure() now
  bool hold = false;                  // batches wait until their job is opened (or cancelled)
  std::set<int64_t> opened;
  int delay_ms = 0;
  int factory_failures = 0;  // the next this many measurers refuse to be made
  int measurers_made = 0;

  void hold_batches() {
    std::lock_guard<std::mutex> lock(mutex);
    hold = true;
  }
  void open(int64_t job) {
    std::lock_guard<std::mutex> lock(mutex);
    opened.insert(job);
    changed.notify_all();
  }
  bool wait_for(const std::function<bool()> &done, std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, timeout, done);
  }
};

class SyntheticMeasurer : public Measurer {
 public:
  SyntheticMeasurer(Bench &bench, int64_t job) : bench_(bench), job_(job) {}
  std::string name() const override { return "synthetic"; }
  std::vector<MeasureOutcome> measure(const ops::Task &, const std::string &,
                                      const std::vector<autotune::Config> &configs) override {
    std::unique_lock<std::mutex> lock(bench_.mutex);
    bench_.batches.push_back(job_);
    ++bench_.in_measure[job_];
    bench_.changed.notify_all();
    bench_.changed.wait(lock, [&] { return !bench_.hold || bench_.opened.count(job_) || cancelled_; });
    --bench_.in_measure[job_];
    lock.unlock();
    if (bench_.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(bench_.delay_ms));
    std::vector<MeasureOutcome> out;
    for (const autotune::Config &c : configs) {
      MeasureOutcome o;
      o.costs = {1e-3 * (1 + static_cast<double>(c.index() % 97))};
      out.push_back(o);
    }
    return out;
  }
  void cancel() override {
    std::lock_guard<std::mutex> lock(bench_.mutex);
    cancelled_ = true;
    bench_.changed.notify_all();
  }

 private:
  Bench &bench_;
  int64_t job_;
  bool cancelled_ = false;
};

v1::TuneTask dense_task(int64_t m, const std::string &name = "") {
  v1::TuneTask t;
  t.set_template_name("dense_pack.x86");
  t.set_args_json(R"({"data":{"shape":[)" + std::to_string(m) +
                  R"(,64],"dtype":"float32"},"weight":{"shape":[64,64],"dtype":"float32"}})");
  t.set_name(name);
  return t;
}

v1::JobSpec spec(const std::string &name, int64_t trials, int priority = 0, int64_t batch = 8) {
  v1::JobSpec s;
  s.set_name(name);
  *s.add_tasks() = dense_task(64, "a");
  *s.add_tasks() = dense_task(32, "b");
  s.set_trials(trials);
  s.set_batch_size(batch);
  s.set_strategy("random");
  s.set_priority(priority);
  return s;
}

// A JobManager and its service on a loopback port, and a client.
class Service {
 public:
  explicit Service(Bench &bench, int max_running = 1, std::function<void(JobManagerOptions &)> tweak = {})
      : bench_(bench) {
    JobManagerOptions o;
    o.log_path = dir_.file("kiln.db");
    o.target = kTarget;
    o.device_key = kDevice;
    o.max_running = max_running;
    o.retry_first = 20ms;
    o.retry_longest = 50ms;
    o.measurer = [&bench](const MeasurerRequest &r) -> std::unique_ptr<Measurer> {
      std::lock_guard<std::mutex> lock(bench.mutex);
      if (r.job_id != 0 && bench.factory_failures > 0) {
        --bench.factory_failures;
        throw MeasureError("no runner for device key 'test-cpu' (synthetic)");
      }
      ++bench.measurers_made;
      return std::make_unique<SyntheticMeasurer>(bench, r.job_id);
    };
    o.events = &events_;
    if (tweak) tweak(o);
    options_ = o;
    start();
  }
  ~Service() { stop(); }

  void start() {
    manager_ = std::make_unique<JobManager>(options_);
    manager_->start();
    service_ = std::make_unique<TunerService>(*manager_, kToken);
    rpc::ServiceHostOptions host_options;
    host_options.max_message_bytes = TunerService::kMaxMessageBytes;
    host_ = rpc::ServiceHost::start("127.0.0.1:0", {service_.get()}, host_options);
    stub_ = v1::Tuner::NewStub(grpc::CreateChannel(host_->address(), grpc::InsecureChannelCredentials()));
  }
  // Shuts the manager down (pausing running jobs), then the server.
  void stop() {
    if (!manager_) return;
    manager_->shutdown();
    host_->shutdown(1s);
    host_->wait();
    host_.reset();
    service_.reset();
    manager_.reset();
  }

  static std::unique_ptr<grpc::ClientContext> context(const std::string &token = kToken) {
    auto c = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) rpc::attach_token(*c, token);
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  }

  grpc::Status submit(const v1::JobSpec &s, v1::SubmitJobReply *reply, const std::string &token = kToken) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = s;
    return stub_->SubmitJob(context(token).get(), request, reply);
  }
  int64_t submit_ok(const v1::JobSpec &s) {
    v1::SubmitJobReply reply;
    grpc::Status status = submit(s, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.job().id();
  }
  using Call = grpc::Status (v1::Tuner::Stub::*)(grpc::ClientContext *, const v1::JobRequest &, v1::JobInfo *);
  grpc::Status call(Call method, int64_t job, v1::JobInfo *info, const std::string &token = kToken) {
    v1::JobRequest request;
    request.set_job_id(job);
    return ((*stub_).*method)(context(token).get(), request, info);
  }
  v1::JobInfo get(int64_t job) {
    v1::JobInfo info;
    grpc::Status status = call(&v1::Tuner::Stub::GetJob, job, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }
  // Every event of a WatchJob stream until it ends, and its status.
  grpc::Status watch(int64_t job, std::vector<v1::JobEvent> *events, const std::string &token = kToken) {
    v1::JobRequest request;
    request.set_job_id(job);
    auto c = context(token);
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->WatchJob(c.get(), request);
    v1::JobEvent event;
    while (reader->Read(&event)) events->push_back(event);
    return reader->Finish();
  }
  // Polls GetJob until `done` holds; false after 20 s.
  bool wait_until(int64_t job, const std::function<bool(const v1::JobInfo &)> &done) {
    for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;) {
      if (done(get(job))) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  db::TuningDb open_log() { return db::TuningDb::open(options_.log_path); }
  // The job's records in the log.
  std::vector<db::Record> records(int64_t job) {
    db::TuningDb log = open_log();
    std::vector<db::Record> out;
    log.for_each_record({}, [&](const db::Record &r) {
      if (r.job_id && *r.job_id == job) out.push_back(r);
    });
    return out;
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(lines_mutex_);
    return lines_;
  }
  v1::Tuner::Stub &stub() { return *stub_; }
  JobManager &manager() { return *manager_; }

 private:
  Bench &bench_;
  test::TempDir dir_{"kiln_tuner_service"};
  std::mutex lines_mutex_;
  std::vector<std::string> lines_;
  rpc::EventLog events_{"kilnd", rpc::LogFormat::kText, [this](const std::string &line) {
                          std::lock_guard<std::mutex> lock(lines_mutex_);
                          lines_.push_back(line);
                        }};
  JobManagerOptions options_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<TunerService> service_;
  std::unique_ptr<rpc::ServiceHost> host_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
};

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// Every record of the job carries its id, and no config was measured twice for a workload.
void expect_records_whole(Service &s, int64_t job, int64_t trials) {
  const std::vector<db::Record> records = s.records(job);
  EXPECT_EQ(static_cast<int64_t>(records.size()), trials) << "job " << job;
  std::set<std::pair<std::string, int64_t>> seen;
  for (const db::Record &r : records) {
    EXPECT_TRUE(seen.insert({r.workload.key, r.config.index}).second) << "measured twice: " << r.config.index;
  }
}

TEST(TunerService, TheHigherPriorityJobRunsFirstAndEveryResultIsRecordedWithItsJob) {
  Bench bench;
  Service s(bench, 1);
  // A first job holds the only slot while two more are queued.
  bench.hold_batches();
  const int64_t first = s.submit_ok(spec("first", 16));
  ASSERT_TRUE(bench.wait_for([&] { return bench.in_measure[first] > 0; }));
  const int64_t low = s.submit_ok(spec("low", 24, 0));
  const int64_t high = s.submit_ok(spec("high", 24, 5));
  EXPECT_EQ(s.get(low).state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(s.get(high).state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(s.get(high).priority(), 5);
  EXPECT_EQ(s.get(first).state(), v1::JOB_STATE_RUNNING);
  for (int64_t job : {first, low, high}) bench.open(job);

  for (int64_t job : {first, low, high}) {
    ASSERT_TRUE(s.wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
        << s.get(job).DebugString();
  }
  std::vector<int64_t> order;
  {
    std::lock_guard<std::mutex> lock(bench.mutex);
    for (int64_t job : bench.batches) {
      if (order.empty() || order.back() != job) order.push_back(job);
    }
  }
  EXPECT_EQ(order, (std::vector<int64_t>{first, high, low})) << "one job at a time, the higher priority first";
  expect_records_whole(s, first, 16);
  expect_records_whole(s, low, 24);
  expect_records_whole(s, high, 24);
  const v1::JobInfo info = s.get(high);
  EXPECT_EQ(info.name(), "high");
  EXPECT_EQ(info.trials_done(), 24);
  EXPECT_EQ(info.device_key(), kDevice);
  ASSERT_EQ(info.tasks_size(), 2);
  EXPECT_EQ(info.tasks(0).name(), "a");
  EXPECT_EQ(info.tasks(0).trials() + info.tasks(1).trials(), 24);
  EXPECT_GT(info.tasks(0).best_gflops(), 0);
  EXPECT_GE(info.tasks(0).speedup(), 1.0);

  v1::ListJobsReply list;
  ASSERT_TRUE(s.stub().ListJobs(Service::context().get(), v1::ListJobsRequest(), &list).ok());
  ASSERT_EQ(list.jobs_size(), 3);
  EXPECT_EQ(list.jobs(1).name(), "low");
  EXPECT_EQ(list.jobs(1).state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(list.jobs(1).tasks_size(), 0);

  const std::vector<std::string> lines = s.lines();
  auto logged = [&](const std::string &part) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string &l) { return has(l, part); });
  };
  EXPECT_TRUE(logged("event=job_submitted job=" + std::to_string(high) + " name=high "));
  EXPECT_TRUE(logged("event=job_started job=" + std::to_string(high) + " "));
  EXPECT_TRUE(logged("event=job_done job=" + std::to_string(high) + " "));
}

TEST(TunerService, JobsRunSideBySideUpToTheLimit) {
  Bench bench;
  Service s(bench, 2);
  bench.hold_batches();
  const int64_t a = s.submit_ok(spec("a", 16)), b = s.submit_ok(spec("b", 16)), c = s.submit_ok(spec("c", 16));
  ASSERT_TRUE(bench.wait_for([&] { return bench.in_measure[a] > 0 && bench.in_measure[b] > 0; }))
      << "two jobs measure at once";
  EXPECT_EQ(s.get(c).state(), v1::JOB_STATE_PENDING);
  for (int64_t job : {a, b, c}) bench.open(job);
  for (int64_t job : {a, b, c}) {
    ASSERT_TRUE(s.wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }));
    expect_records_whole(s, job, 16);
  }
}

TEST(TunerService, WatchersGetProgressThenAFinalEventAndLateWatchersTheCurrentState) {
  Bench bench;
  bench.delay_ms = 20;
  Service s(bench, 1);
  const int64_t job = s.submit_ok(spec("watched", 64));
  std::vector<v1::JobEvent> events;
  grpc::Status status = s.watch(job, &events);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(events.size(), 3u);
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_FALSE(events[i].final());
    EXPECT_NE(events[i].job().state(), v1::JOB_STATE_DONE);
    if (i > 0) {
      EXPECT_GE(events[i].job().trials_done(), events[i - 1].job().trials_done());
    }
  }
  const bool progress = std::any_of(events.begin(), events.end(), [](const v1::JobEvent &e) {
    return e.job().state() == v1::JOB_STATE_RUNNING && e.job().trials_done() > 0 && e.job().tasks_size() == 2;
  });
  EXPECT_TRUE(progress) << "no progress event";
  EXPECT_TRUE(events.back().final());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(events.back().job().trials_done(), 64);

  // A late watcher: one event, final, with the job as it ended.
  std::vector<v1::JobEvent> late;
  ASSERT_TRUE(s.watch(job, &late).ok());
  ASSERT_EQ(late.size(), 1u);
  EXPECT_TRUE(late[0].final());
  EXPECT_EQ(late[0].job().state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(late[0].job().trials_done(), 64);
  ASSERT_EQ(late[0].job().tasks_size(), 2);
  EXPECT_EQ(late[0].job().tasks(0).trials() + late[0].job().tasks(1).trials(), 64);

  // A watcher joining a running job first gets where it is.
  bench.hold_batches();
  const int64_t held = s.submit_ok(spec("held", 32));
  ASSERT_TRUE(bench.wait_for([&] { return bench.in_measure[held] > 0; }));
  v1::JobRequest request;
  request.set_job_id(held);
  auto context = Service::context();
  auto reader = s.stub().WatchJob(context.get(), request);
  v1::JobEvent first;
  ASSERT_TRUE(reader->Read(&first));
  EXPECT_FALSE(first.final());
  EXPECT_EQ(first.job().state(), v1::JOB_STATE_RUNNING);
  // A watcher that goes away ends its stream; the job goes on.
  context->TryCancel();
  v1::JobEvent ignored;
  while (reader->Read(&ignored)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  bench.open(held);
  ASSERT_TRUE(s.wait_until(held, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }));
}

TEST(TunerService, PauseResumeAndCancelThroughTheService) {
  Bench bench;
  Service s(bench, 1);
  bench.hold_batches();
  const int64_t job = s.submit_ok(spec("paused", 48));
  ASSERT_TRUE(bench.wait_for([&] { return bench.in_measure[job] > 0; }));
  v1::JobInfo info;
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::PauseJob, job, &info).ok());
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(s.watch(job, &events).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().final());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_PAUSED);
  EXPECT_EQ(s.open_log().job(job)->state, db::JobState::kPaused);
  const int64_t before = s.get(job).trials_done();
  EXPECT_LT(before, 48);
  // Pausing again does nothing; a paused job resumes and finishes its budget.
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::PauseJob, job, &info).ok());
  EXPECT_EQ(info.state(), v1::JOB_STATE_PAUSED);
  bench.open(job);
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::ResumeJob, job, &info).ok());
  EXPECT_TRUE(info.state() == v1::JOB_STATE_PENDING || info.state() == v1::JOB_STATE_RUNNING) << info.DebugString();
  ASSERT_TRUE(s.wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }));
  expect_records_whole(s, job, 48);

  // A done job can be neither paused, resumed nor cancelled.
  EXPECT_EQ(s.call(&v1::Tuner::Stub::PauseJob, job, &info).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.call(&v1::Tuner::Stub::ResumeJob, job, &info).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  grpc::Status status = s.call(&v1::Tuner::Stub::CancelJob, job, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(has(status.error_message(), "is done")) << status.error_message();

  // Cancel: a running job stops after its batch, a queued one at once; records stay.
  const int64_t running = s.submit_ok(spec("running", 48));
  ASSERT_TRUE(bench.wait_for([&] { return bench.in_measure[running] > 0; }));
  const int64_t queued = s.submit_ok(spec("queued", 48));
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::CancelJob, queued, &info).ok());
  EXPECT_EQ(info.state(), v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::CancelJob, running, &info).ok());
  events.clear();
  ASSERT_TRUE(s.watch(running, &events).ok());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(s.open_log().job(running)->state, db::JobState::kCancelled);
  EXPECT_EQ(s.open_log().job(queued)->state, db::JobState::kCancelled);
  EXPECT_TRUE(s.records(queued).empty());
  EXPECT_EQ(s.call(&v1::Tuner::Stub::ResumeJob, running, &info).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // Cancelling a cancelled job does nothing.
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::CancelJob, running, &info).ok());
  EXPECT_EQ(info.state(), v1::JOB_STATE_CANCELLED);
}

TEST(TunerService, EveryCallNeedsTheToken) {
  Bench bench;
  Service s(bench, 1);
  const int64_t job = s.submit_ok(spec("secret", 8));
  v1::SubmitJobReply reply;
  EXPECT_EQ(s.submit(spec("x", 8), &reply, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.submit(spec("x", 8), &reply, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::JobInfo info;
  for (Service::Call method : {&v1::Tuner::Stub::GetJob, &v1::Tuner::Stub::PauseJob, &v1::Tuner::Stub::ResumeJob,
                               &v1::Tuner::Stub::CancelJob}) {
    EXPECT_EQ(s.call(method, job, &info, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  v1::ListJobsReply list;
  EXPECT_EQ(s.stub().ListJobs(Service::context("wrong").get(), v1::ListJobsRequest(), &list).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  std::vector<v1::JobEvent> events;
  EXPECT_EQ(s.watch(job, &events, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(s.open_log().jobs().size(), 1u);
}

TEST(TunerService, BadSpecsAreInvalidArgumentsWithTheTunersMessage) {
  Bench bench;
  Service s(bench, 1);
  struct Case {
    std::function<void(v1::JobSpec &)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::JobSpec &j) { j.set_trials(-5); }, "between 1 and"},
      {[](v1::JobSpec &j) { j.set_trials(0); }, "between 1 and"},
      {[](v1::JobSpec &j) { j.set_batch_size(0); }, "batch size"},
      {[](v1::JobSpec &j) { j.set_trials(100000000); }, "between 1 and"},
      {[](v1::JobSpec &j) { j.set_strategy("annealing"); }, "unknown search strategy"},
      {[](v1::JobSpec &j) { j.set_priority(5000); }, "priority"},
      {[](v1::JobSpec &j) { j.set_batch_size(100000); }, "batch size"},
      {[](v1::JobSpec &j) { j.mutable_tasks(0)->set_template_name("conv3d.x86"); }, "conv3d.x86"},
      {[](v1::JobSpec &j) { j.mutable_tasks(1)->set_args_json("{\"data\":"); }, "task 1 (dense_pack.x86)"},
      {[](v1::JobSpec &j) { j.mutable_tasks(1)->set_args_json("[1]"); }, "JSON object"},
      {[](v1::JobSpec &j) { j.mutable_tasks(0)->set_weight(-1); }, "weight"},
      {[](v1::JobSpec &j) { j.set_preset("resnet18"); }, "not both"},
      {[](v1::JobSpec &j) { j.clear_tasks(); }, "tasks or a preset"},
      {[](v1::JobSpec &j) {
         j.clear_tasks();
         j.set_preset("alexnet");
       },
       "unknown preset 'alexnet'"},
      {[](v1::JobSpec &j) { j.set_name(std::string(300, 'n')); }, "name is longer than 256"},
      {[](v1::JobSpec &j) {
         for (int i = 0; i < 1001; ++i) *j.add_tasks() = dense_task(8);
       },
       "at most 1000 tasks"},
      {[](v1::JobSpec &j) { j.set_device_key("Not A Key!"); }, "device key"},
      {[](v1::JobSpec &j) { *j.add_tasks() = dense_task(64, "again"); }, "same workload"},
      {[](v1::JobSpec &j) { j.mutable_measure()->set_repeat(100000); }, "measure options: "},
      {[](v1::JobSpec &j) { j.set_time_budget_s(1e12); }, "time budget must be between 0 and"},
      {[](v1::JobSpec &j) { j.set_time_budget_s(std::nan("")); }, "time budget must be between 0 and"},
      {[](v1::JobSpec &j) { j.mutable_tasks(0)->set_args_json(std::string(20 << 20, ' ') + "{}"); }, "bytes; at most"},
  };
  for (const Case &c : cases) {
    v1::JobSpec bad = spec("bad", 16);
    c.change(bad);
    v1::SubmitJobReply reply;
    const grpc::Status status = s.submit(bad, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message << ": " << status.error_message();
    EXPECT_TRUE(has(status.error_message(), c.message)) << status.error_message();
  }
  EXPECT_TRUE(s.open_log().jobs().empty()) << "a refused spec creates no job";
  // The daemon serves the next call as before.
  EXPECT_GT(s.submit_ok(spec("after", 8)), 0);
}

TEST(TunerService, UnknownJobsAreNotFound) {
  Bench bench;
  Service s(bench, 1);
  v1::JobInfo info;
  for (Service::Call method : {&v1::Tuner::Stub::GetJob, &v1::Tuner::Stub::PauseJob, &v1::Tuner::Stub::ResumeJob,
                               &v1::Tuner::Stub::CancelJob}) {
    const grpc::Status status = s.call(method, 42, &info);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(has(status.error_message(), "no tuning job 42")) << status.error_message();
  }
  std::vector<v1::JobEvent> events;
  EXPECT_EQ(s.watch(42, &events).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.call(&v1::Tuner::Stub::GetJob, 0, &info).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(TunerService, AFailingMeasurerMakesTheJobWaitAndTryAgain) {
  Bench bench;
  bench.factory_failures = 3;
  Service s(bench, 1);
  const int64_t job = s.submit_ok(spec("patient", 16));
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(s.watch(job, &events).ok());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_DONE) << events.back().DebugString();
  const auto waiting = std::find_if(events.begin(), events.end(),
                                    [](const v1::JobEvent &e) { return e.job().state() == v1::JOB_STATE_WAITING; });
  ASSERT_NE(waiting, events.end());
  EXPECT_TRUE(has(waiting->job().message(), "waiting for runners: no runner for device key 'test-cpu'"))
      << waiting->job().message();
  expect_records_whole(s, job, 16);
}

TEST(TunerService, AMeasurerThatStaysUnusableFailsTheJobAfterTheGiveUpTime) {
  Bench bench;
  bench.factory_failures = 1000000;
  Service s(bench, 1, [](JobManagerOptions &o) { o.give_up_after = 200ms; });
  const int64_t job = s.submit_ok(spec("hopeless", 16));
  ASSERT_TRUE(s.wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_FAILED; }));
  const v1::JobInfo info = s.get(job);
  EXPECT_TRUE(has(info.message(), "gave up after")) << info.message();
  EXPECT_TRUE(has(info.message(), "no runner for device key")) << info.message();
  EXPECT_EQ(s.open_log().job(job)->state, db::JobState::kFailed);
  // A failed job can be resumed once the measurer works again.
  {
    std::lock_guard<std::mutex> lock(bench.mutex);
    bench.factory_failures = 0;
  }
  v1::JobInfo resumed;
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::ResumeJob, job, &resumed).ok());
  ASSERT_TRUE(s.wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }));
  expect_records_whole(s, job, 16);
}

TEST(TunerService, AShutdownPausesRunningJobsAndTheNextStartResumesThem) {
  Bench bench;
  Service s(bench, 1);
  bench.hold_batches();
  const int64_t running = s.submit_ok(spec("running", 40));
  ASSERT_TRUE(bench.wait_for([&] { return bench.in_measure[running] > 0; }));
  const int64_t queued = s.submit_ok(spec("queued", 16));
  const int64_t paused = s.submit_ok(spec("paused by a user", 16));
  v1::JobInfo info;
  ASSERT_TRUE(s.call(&v1::Tuner::Stub::PauseJob, paused, &info).ok());

  // A watcher of the queued job gets a final event when the service stops.
  v1::JobRequest request;
  request.set_job_id(queued);
  auto context = Service::context();
  auto reader = s.stub().WatchJob(context.get(), request);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_FALSE(event.final());
  s.manager().shutdown();
  while (reader->Read(&event)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(event.final());
  EXPECT_EQ(event.job().state(), v1::JOB_STATE_PENDING);
  s.stop();
  {
    db::TuningDb log = s.open_log();
    EXPECT_EQ(log.job(running)->state, db::JobState::kPaused);
    EXPECT_EQ(log.job(running)->message, kServiceStoppedMessage);
    EXPECT_EQ(log.job(queued)->state, db::JobState::kPending);
    EXPECT_EQ(log.job(paused)->state, db::JobState::kPaused);
  }

  for (int64_t job : {running, queued}) bench.open(job);
  s.start();
  for (int64_t job : {running, queued}) {
    ASSERT_TRUE(s.wait_until(job, [](const v1::JobInfo &i) { return i.state() == v1::JOB_STATE_DONE; }))
        << s.get(job).DebugString();
  }
  expect_records_whole(s, running, 40);
  expect_records_whole(s, queued, 16);
  EXPECT_EQ(s.get(paused).state(), v1::JOB_STATE_PAUSED) << "a job a user paused stays paused";

  // One service per log.
  JobManagerOptions o;
  o.log_path = s.open_log().path();
  o.target = kTarget;
  o.device_key = kDevice;
  o.measurer = [](const MeasurerRequest &) -> std::unique_ptr<Measurer> { return nullptr; };
  JobManager second(o);
  try {
    second.start();
    ADD_FAILURE() << "a second service started on the same log";
  } catch (const UserError &e) {
    EXPECT_TRUE(has(e.what(), "another tuning service")) << e.what();
  }
}

TEST(JobWire, ASubmissionSurvivesTheWire) {
  JobSubmission sub;
  sub.name = "wire";
  sub.tasks = {{"dense_pack.x86", contracts::Json::parse(R"({"data":{"shape":[4,4]}})"), 2.5, "d"}};
  sub.target = kTarget;
  sub.device_key = kDevice;
  sub.options.trials = 77;
  sub.options.strategy = "genetic";
  sub.options.batch_size = 5;
  sub.options.early_stopping = 9;
  sub.options.trials_per_task = 11;
  sub.options.time_budget_s = 3.5;
  sub.options.transfer = false;
  sub.options.skip_logged = true;
  sub.options.priority = -3;
  sub.options.seed = 1234567890123ull;
  sub.options.search.feature_threads = 3;
  sub.options.search.plan_size = 32;
  sub.options.confirm_top = 5;
  sub.options.confirm_repeats = 3;
  kiln::v1::MeasureOptions m;
  m.set_threads(1);
  sub.options.measure = m;
  const JobSubmission back = submission_from_proto(submission_to_proto(sub));
  EXPECT_EQ(back.name, "wire");
  ASSERT_EQ(back.tasks.size(), 1u);
  EXPECT_EQ(back.tasks[0].args, sub.tasks[0].args);
  EXPECT_EQ(back.tasks[0].weight, 2.5);
  EXPECT_EQ(back.tasks[0].name, "d");
  EXPECT_EQ(back.target, kTarget);
  EXPECT_EQ(back.device_key, kDevice);
  EXPECT_EQ(back.options.to_json(), sub.options.to_json());
  EXPECT_EQ(back.options.search.feature_threads, 3);
  EXPECT_EQ(back.options.search.plan_size, 32u);
  EXPECT_EQ(back.options.confirm_top, 5);
  EXPECT_EQ(back.options.confirm_repeats, 3);

  // Zero fields take the defaults.
  v1::JobSpec minimal;
  minimal.set_preset("bert-base");
  const JobSubmission d = submission_from_proto(minimal);
  EXPECT_EQ(d.name, "bert-base");
  EXPECT_EQ(d.options.trials, 64 * static_cast<int64_t>(d.tasks.size()));
  EXPECT_EQ(d.options.batch_size, 16);
  EXPECT_EQ(d.options.strategy, "xgb");
  EXPECT_TRUE(d.options.transfer);
  EXPECT_FALSE(d.options.measure.has_value());
  EXPECT_EQ(d.options.confirm_top, 0);  // no confirmation unless asked for

  for (const char *state : {"pending", "running", "waiting", "paused", "done", "failed", "cancelled"}) {
    EXPECT_EQ(state_from_proto(state_to_proto(state)), state);
  }
}

}  // namespace
}  // namespace kiln::tuner
