// The runner's measurement pool: real configs measured in worker processes, the time evaluator,
// every fault-injection template (crash, abort, hang, memory exhaustion, wrong answer, slow
// compile) classified and survived, per-config errors, refused requests, cancellation, and
// builds never overlapping a timing. This executable is also the pool's worker: run with
// --measure-worker it serves the channel the pool gives it, with the fault-injection templates.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contracts/json.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/time_evaluator.h"
#include "test_templates.h"

namespace kiln::rpc {
namespace {

using contracts::Json;
using Clock = std::chrono::steady_clock;

const char *const kTarget = "llvm -mcpu=native";

const ops::Registry &test_registry() {
  static const ops::Registry r = [] {
    ops::Registry reg = ops::Registry::builtin();
    add_test_templates(reg);
    return reg;
  }();
  return r;
}

// The wire form of a config: knobs as an object, with its index and space fingerprint.
v1::Config to_wire(const autotune::Config &cfg) {
  Json j = Json::parse(cfg.to_json());
  Json knobs = Json::object();
  for (const auto &pair : j["knobs"].as_array()) knobs.set(pair[0].as_string(), pair[1]);
  v1::Config c;
  c.set_knobs_json(knobs.dump());
  c.set_index(static_cast<uint64_t>(cfg.index()));
  c.set_space_fingerprint(cfg.fingerprint());
  return c;
}

Candidate candidate(const ops::Task &task, const v1::Config &config) {
  Candidate c;
  c.workload.set_template_name(task.templ().name);
  c.workload.set_args_json(task.workload().args_json);
  c.workload.set_key(task.key());
  c.target.set_target(kTarget);
  c.config = config;
  return c;
}

Json tensor(std::vector<int64_t> shape) {
  return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
}

ops::Task dense_task(int64_t m, int64_t n, int64_t k) {
  return ops::Task("dense_pack.x86", Json::object({{"data", tensor({m, k})}, {"weight", tensor({n, k})}}),
                   driver::resolve_target(kTarget));
}

ops::Task fault_task(const std::string &name, int64_t n = 1024) {
  return ops::Task(name, Json::object({{"n", n}}), driver::resolve_target(kTarget), test_registry());
}

Candidate fault_candidate(const std::string &name, bool on) {
  ops::Task t = fault_task(name);
  return candidate(t, to_wire(t.space().from_values({{"fault", Json(on ? "on" : "off")}})));
}

Candidate good_candidate() { return fault_candidate("test.wrong_answer", false); }

MeasurePoolOptions pool_options() {
  MeasurePoolOptions o;
  o.build_workers = 2;
  o.target = kTarget;
  o.runner_id = "runner-test";
  o.extension = test_templates_extension();
  o.memory_limit_bytes = 1ull << 30;
  return o;
}

v1::MeasureOptions quick_options() {
  v1::MeasureOptions o;
  o.set_number(1);
  o.set_repeat(3);
  o.set_min_repeat_ms(1);
  o.set_build_timeout_ms(20000);
  o.set_run_timeout_ms(5000);
  // One thread: a parallel kernel on a machine busy with other tests can be slowed down by
  // orders of magnitude, and short run timeouts must only catch the hanging candidates.
  o.set_threads(1);
  return o;
}

// Every result of a batch, checked to come exactly once per position.
struct Results {
  std::vector<v1::MeasureResult> at;
  std::vector<int> calls;
  std::optional<MeasureRejection> rejection;
};

Results measure(MeasurePool &pool, const std::vector<Candidate> &batch, const v1::MeasureOptions &options,
                const std::atomic<bool> *cancel = nullptr, const std::function<void(size_t)> &after_each = nullptr) {
  Results r;
  r.at.resize(batch.size());
  r.calls.assign(batch.size(), 0);
  r.rejection = pool.measure(
      batch, options,
      [&](size_t i, const v1::MeasureResult &res) {
        EXPECT_LT(i, batch.size());
        if (i >= batch.size()) return;
        r.at[i] = res;
        ++r.calls[i];
        if (after_each) after_each(i);
      },
      cancel);
  if (!r.rejection) {
    for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(r.calls[i], 1) << "position " << i;
  }
  return r;
}

void expect_ok(const v1::MeasureResult &r, const v1::MeasureOptions &o, const std::string &what) {
  EXPECT_EQ(r.error(), v1::OK) << what << ": " << v1::ErrorClass_Name(r.error()) << " " << r.message();
  EXPECT_EQ(r.seconds_size(), static_cast<int>(o.repeat())) << what;
  for (double s : r.seconds()) {
    EXPECT_GT(s, 0) << what;
    EXPECT_LT(s, 1.0) << what;
  }
  EXPECT_GT(r.compile_seconds(), 0) << what;
}

void expect_error(const v1::MeasureResult &r, v1::ErrorClass want, const std::string &message_part,
                  const std::string &what) {
  EXPECT_EQ(r.error(), want) << what << ": got " << v1::ErrorClass_Name(r.error()) << " " << r.message();
  EXPECT_NE(r.message().find(message_part), std::string::npos) << what << ": " << r.message();
  EXPECT_EQ(r.seconds_size(), 0) << what;
}

// The child processes of this process (pid, state letter from /proc/<pid>/stat).
std::vector<std::pair<int, char>> children() {
  std::vector<std::pair<int, char>> r;
  const int self = static_cast<int>(::getpid());
  DIR *d = ::opendir("/proc");
  if (!d) return r;
  while (struct dirent *e = ::readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == self) r.emplace_back(pid, state);
  }
  ::closedir(d);
  return r;
}

int zombie_children() {
  int n = 0;
  for (const auto &[pid, state] : children()) n += state == 'Z';
  return n;
}

int open_fds() {
  int n = 0;
  DIR *d = ::opendir("/proc/self/fd");
  while (d && ::readdir(d)) ++n;
  if (d) ::closedir(d);
  return n;
}

// --- time evaluator ---

TEST(TimeEvaluator, WarmUpIsDiscardedAndEveryRepeatIsTimed) {
  int calls = 0, flushes = 0;
  TimeEvaluatorOptions o;
  o.number = 5;
  o.repeat = 4;
  o.min_repeat_ms = 0;
  o.before_repeat = [&] { ++flushes; };
  Timing t = time_evaluate([&] { ++calls; }, o);
  EXPECT_EQ(calls, 1 + 5 * 4);
  EXPECT_EQ(t.calls, 21u);
  EXPECT_EQ(t.number, 5u);
  EXPECT_EQ(t.seconds.size(), 4u);
  EXPECT_EQ(flushes, 4);
}

TEST(TimeEvaluator, NumberGrowsUntilARepeatLastsMinRepeatMs) {
  int calls = 0;
  TimeEvaluatorOptions o;
  o.number = 1;
  o.repeat = 3;
  o.min_repeat_ms = 30;
  Timing t = time_evaluate(
      [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      o);
  ASSERT_EQ(t.seconds.size(), 3u);
  // Each call sleeps at least 1 ms, so about 30 calls fill a repeat; the count grows at least
  // twofold per redone repeat and overshoots by the golden ratio at most.
  EXPECT_GT(t.number, 1u);
  EXPECT_LE(t.number, 60u);
  // The warm-up, the redone first repeats, then `repeat` repeats with the final number.
  EXPECT_GT(t.calls, 1 + 3 * t.number);
  EXPECT_EQ(static_cast<uint64_t>(calls), t.calls);
  for (double s : t.seconds) {
    EXPECT_GE(s, 0.001);
    EXPECT_LT(s, 0.05);
    EXPECT_GE(s * static_cast<double>(t.number), 0.030 * 0.9);
  }
}

// A clock that moves only when the kernel runs: each call takes exactly `seconds_per_call`.
struct FakeKernel {
  double seconds_per_call;
  double now = 0;
  uint64_t calls = 0;
  void operator()() {
    now += seconds_per_call;
    ++calls;
  }
};

TEST(TimeEvaluator, OneGrowthStepTakesAMicrosecondKernelToMinRepeatMs) {
  // 1 us per call, 10 ms per repeat: the first repeat (1 call) predicts 10,000 calls, times 1.618;
  // one redone repeat reaches the target, then the 3 repeats: 4 repeats in all. Growing by
  // doubling alone would redo the first repeat 14 times (17 repeats).
  FakeKernel kernel{1e-6};
  int repeats = 0;
  TimeEvaluatorOptions o;
  o.number = 1;
  o.repeat = 3;
  o.min_repeat_ms = 10;
  o.clock = [&] { return kernel.now; };
  o.before_repeat = [&] { ++repeats; };
  Timing t = time_evaluate([&] { kernel(); }, o);
  EXPECT_EQ(repeats, 4);
  ASSERT_EQ(t.seconds.size(), 3u);
  EXPECT_GE(static_cast<double>(t.number) * 1e-6, 0.010);
  EXPECT_LE(t.number, 16181u);
  EXPECT_GE(t.number, 16180u);
  EXPECT_EQ(t.calls, 1 + 1 + 3 * t.number);
  EXPECT_EQ(kernel.calls, t.calls);
  for (double s : t.seconds) EXPECT_NEAR(s, 1e-6, 1e-9);
}

TEST(TimeEvaluator, NumberAtLeastDoublesWhenThePredictionFallsShort) {
  // 4 calls of 2.4 ms last 9.6 ms, just under 10 ms: the prediction (4.17 calls, times 1.618 =
  // 6.74) is below twice the current number, so number doubles to 8.
  FakeKernel kernel{2.4e-3};
  int repeats = 0;
  TimeEvaluatorOptions o;
  o.number = 4;
  o.repeat = 2;
  o.min_repeat_ms = 10;
  o.clock = [&] { return kernel.now; };
  o.before_repeat = [&] { ++repeats; };
  Timing t = time_evaluate([&] { kernel(); }, o);
  EXPECT_EQ(t.number, 8u);
  EXPECT_EQ(repeats, 3);
  EXPECT_EQ(t.calls, 1 + 4 + 2 * 8u);
  ASSERT_EQ(t.seconds.size(), 2u);
  for (double s : t.seconds) EXPECT_NEAR(s, 2.4e-3, 1e-9);
}

TEST(TimeEvaluator, GrowthStopsAtMaxNumber) {
  FakeKernel kernel{1e-9};
  TimeEvaluatorOptions o;
  o.number = 1;
  o.repeat = 1;
  o.min_repeat_ms = 1000;
  o.max_number = 5000;
  o.clock = [&] { return kernel.now; };
  Timing t = time_evaluate([&] { kernel(); }, o);
  EXPECT_EQ(t.number, 5000u);
  EXPECT_EQ(t.calls, 1 + 1 + 5000u);
}

TEST(TimeEvaluator, AfterWarmUpCanStopBeforeTiming) {
  int calls = 0;
  TimeEvaluatorOptions o;
  o.number = 10;
  o.after_warmup = [&] { return calls == 0; };  // the warm-up happened: stop
  Timing t = time_evaluate([&] { ++calls; }, o);
  EXPECT_TRUE(t.stopped_after_warmup);
  EXPECT_TRUE(t.seconds.empty());
  EXPECT_EQ(calls, 1);
}

TEST(TimeEvaluator, FlushTouchesNothingItShouldNot) {
  std::vector<float> v(1000, 1.5f);
  flush_cpu_cache(v.data(), v.size() * sizeof(float));
  for (float x : v) EXPECT_EQ(x, 1.5f);
}

// --- options ---

TEST(MeasureOptions, DefaultsFillZeros) {
  v1::MeasureOptions o = with_defaults(v1::MeasureOptions());
  EXPECT_EQ(o.number(), 1u);
  EXPECT_EQ(o.repeat(), 3u);
  EXPECT_EQ(o.min_repeat_ms(), 10u);
  EXPECT_EQ(o.build_timeout_ms(), 10000u);
  EXPECT_EQ(o.run_timeout_ms(), 10000u);
  EXPECT_EQ(o.cooldown_ms(), 0u);
  EXPECT_FALSE(o.cpu_cache_flush());
  EXPECT_TRUE(o.has_check_correctness() && o.check_correctness());
  EXPECT_GE(o.threads(), 1u);
  v1::MeasureOptions off;
  off.set_check_correctness(false);
  off.set_number(7);
  off.set_min_repeat_ms(0);
  EXPECT_FALSE(with_defaults(off).check_correctness());
  EXPECT_EQ(with_defaults(off).number(), 7u);
  EXPECT_EQ(with_defaults(off).min_repeat_ms(), 0u) << "an explicit 0 turns the growth off";
}

TEST(MeasureOptions, LimitsNameTheField) {
  MeasureLimits l;
  EXPECT_FALSE(check_options(quick_options(), l).has_value());
  v1::MeasureOptions o = quick_options();
  o.set_repeat(100000);
  std::optional<MeasureRejection> r = check_options(o, l);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reason, MeasureRejection::Reason::kOverLimit);
  EXPECT_NE(r->message.find("repeat is 100000"), std::string::npos) << r->message;
  o = quick_options();
  o.set_run_timeout_ms(l.max_timeout_ms + 1);
  r = check_options(o, l);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->message.find("run_timeout_ms"), std::string::npos) << r->message;
}

// --- the pool ---

TEST(MeasurePool, RealConfigsAreMeasured) {
  ops::Task task = dense_task(16, 24, 32);
  std::vector<Candidate> batch = {candidate(task, to_wire(task.default_config()))};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 19; ++i) batch.push_back(candidate(task, to_wire(task.space().sample(rng))));
  MeasurePoolOptions po = pool_options();
  po.kiln_version = "9.9.9-test";
  MeasurePool pool(po);
  v1::MeasureOptions o = quick_options();
  o.clear_threads();  // every core
  Results r = measure(pool, batch, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (size_t i = 0; i < batch.size(); ++i) {
    expect_ok(r.at[i], o, "config " + std::to_string(i) + " " + batch[i].config.knobs_json());
    EXPECT_EQ(r.at[i].runner_id(), "runner-test");
    EXPECT_EQ(r.at[i].kiln_version(), "9.9.9-test");
  }
  EXPECT_LE(pool.workers_started(), 2);
}

TEST(MeasurePool, EightBitProductsOverTheWholeRangeMatchTheReference) {
  // Inputs cover all of uint8 and int8 (random_inputs.h); their int32 products and sums stay exact,
  // so every legal config agrees with the reference.
  auto typed = [](std::vector<int64_t> shape, const char *dtype) {
    return Json::object({{"shape", Json::array_of(shape)}, {"dtype", dtype}});
  };
  ops::Task task("dense_pack.x86",
                 Json::object({{"data", typed({8, 64}, "uint8")}, {"weight", typed({16, 64}, "int8")}}),
                 driver::resolve_target(kTarget));
  std::vector<Candidate> batch = {candidate(task, to_wire(task.default_config()))};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 3; ++i) batch.push_back(candidate(task, to_wire(task.space().sample(rng))));
  MeasurePool pool(pool_options());
  v1::MeasureOptions o = quick_options();
  Results r = measure(pool, batch, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (size_t i = 0; i < batch.size(); ++i) {
    expect_ok(r.at[i], o, "config " + std::to_string(i) + " " + batch[i].config.knobs_json());
    // "-mcpu=native" is answered with this host's CPU.
    EXPECT_EQ(r.at[i].target(), driver::concrete_target(kTarget));
  }
}

TEST(MeasurePool, NoBuildOverlapsARun) {
  std::mutex mu;
  std::vector<MeasureTraceEvent> events;
  MeasurePoolOptions po = pool_options();
  po.trace = [&](const MeasureTraceEvent &e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  };
  MeasurePool pool(po);
  std::vector<Candidate> batch;
  for (const char *name : {"test.wrong_answer", "test.segfault", "test.abort"}) {
    ops::Task t = fault_task(name, 4096);
    for (const auto &cfg : t.space().enumerate()) {
      if (cfg.choice_string("fault") == "off") {
        batch.push_back(candidate(t, to_wire(cfg)));
      }
    }
  }
  ASSERT_GE(batch.size(), 10u);
  v1::MeasureOptions o = quick_options();
  o.set_min_repeat_ms(5);
  Results r = measure(pool, batch, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (size_t i = 0; i < batch.size(); ++i) expect_ok(r.at[i], o, "config " + std::to_string(i));
  size_t builds = 0, runs = 0;
  bool parallel_builds = false;
  for (const auto &a : events) {
    (a.kind == MeasureTraceEvent::Build ? builds : runs) += 1;
    for (const auto &b : events) {
      if (&a == &b) continue;
      const bool overlap = a.start < b.end && b.start < a.end;
      if (a.kind == MeasureTraceEvent::Run && overlap) {
        ADD_FAILURE() << "the run of " << a.position << " overlaps the "
                      << (b.kind == MeasureTraceEvent::Run ? "run" : "build") << " of " << b.position;
      }
      if (a.kind == MeasureTraceEvent::Build && b.kind == MeasureTraceEvent::Build && overlap && a.worker != b.worker) {
        parallel_builds = true;
      }
    }
  }
  EXPECT_EQ(builds, batch.size());
  EXPECT_EQ(runs, batch.size());
  EXPECT_TRUE(parallel_builds) << "two build workers never built at the same time";
}

struct FaultCase {
  const char *name;
  v1::ErrorClass error;
  const char *message;
  bool replaces_worker;
};

void PrintTo(const FaultCase &f, std::ostream *os) { *os << f.name; }

class FaultTemplates : public ::testing::TestWithParam<FaultCase> {};

TEST_P(FaultTemplates, YieldTheirClassAndThePoolGoesOn) {
  const FaultCase &f = GetParam();
  MeasurePool pool(pool_options());
  v1::MeasureOptions o = quick_options();
  o.set_build_timeout_ms(3000);
  // Filling the address space limit with touched pages takes a while, longer on a loaded machine.
  o.set_run_timeout_ms(std::string(f.name) == "test.huge_alloc" ? 15000 : 1500);

  Results warm = measure(pool, {good_candidate()}, o);
  ASSERT_FALSE(warm.rejection) << warm.rejection->message;
  expect_ok(warm.at[0], o, "before the fault");
  const int started = pool.workers_started();

  Results bad = measure(pool, {fault_candidate(f.name, true)}, o);
  ASSERT_FALSE(bad.rejection) << bad.rejection->message;
  expect_error(bad.at[0], f.error, f.message, f.name);
  EXPECT_FALSE(bad.at[0].runner_id().empty());

  Results after = measure(pool, {good_candidate(), fault_candidate(f.name, false)}, o);
  ASSERT_FALSE(after.rejection) << after.rejection->message;
  expect_ok(after.at[0], o, std::string("a good candidate after ") + f.name);
  expect_ok(after.at[1], o, std::string(f.name) + " with fault=off");
  if (f.replaces_worker) {
    EXPECT_GT(pool.workers_started(), started) << "the worker was not replaced";
  }
  EXPECT_EQ(zombie_children(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    MeasurePool, FaultTemplates,
    ::testing::Values(FaultCase{"test.segfault", v1::RUNTIME_DEVICE, "SIGSEGV", true},
                      FaultCase{"test.abort", v1::RUNTIME_DEVICE, "SIGABRT", true},
                      FaultCase{"test.infinite_loop", v1::RUN_TIMEOUT, "run timeout", true},
                      FaultCase{"test.huge_alloc", v1::RUNTIME_DEVICE, "out of memory", false},
                      FaultCase{"test.wrong_answer", v1::WRONG_ANSWER, "differs from the reference at index", false},
                      FaultCase{"test.small_error", v1::WRONG_ANSWER, "differs from the reference at index", false},
                      FaultCase{"test.slow_compile", v1::BUILD_TIMEOUT, "build timeout", true}),
    [](const ::testing::TestParamInfo<FaultCase> &info) { return std::string(info.param.name).substr(5); });

TEST(MeasurePool, FaultyAndGoodCandidatesInOneBatch) {
  const int fds_before = open_fds();
  std::mutex mu;
  size_t builds = 0;
  MeasurePoolOptions po = pool_options();
  po.trace = [&](const MeasureTraceEvent &e) {
    std::lock_guard<std::mutex> lock(mu);
    builds += e.kind == MeasureTraceEvent::Build;
  };
  auto pool_ptr = std::make_unique<MeasurePool>(po);
  MeasurePool &pool = *pool_ptr;
  v1::MeasureOptions o = quick_options();
  o.set_build_timeout_ms(3000);
  // Long enough for test.huge_alloc to touch its 1 GiB page by page before it runs out (over 2.5 s
  // on some virtual machines, the other worker busy); the infinite loop waits it out once.
  o.set_run_timeout_ms(8000);
  const std::vector<std::pair<const char *, v1::ErrorClass>> faults = {
      {"test.segfault", v1::RUNTIME_DEVICE},   {"test.abort", v1::RUNTIME_DEVICE},
      {"test.infinite_loop", v1::RUN_TIMEOUT}, {"test.huge_alloc", v1::RUNTIME_DEVICE},
      {"test.wrong_answer", v1::WRONG_ANSWER}, {"test.small_error", v1::WRONG_ANSWER},
      {"test.slow_compile", v1::BUILD_TIMEOUT}};
  std::vector<Candidate> batch;
  std::map<size_t, v1::ErrorClass> want;
  for (const auto &[name, error] : faults) {
    batch.push_back(good_candidate());
    batch.push_back(fault_candidate(name, true));
    want[batch.size() - 1] = error;
    batch.push_back(fault_candidate(name, false));
  }
  Results r = measure(pool, batch, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (want.count(i)) {
      EXPECT_EQ(r.at[i].error(), want[i]) << batch[i].workload.template_name() << ": " << r.at[i].message();
    } else {
      expect_ok(r.at[i], o, "good config " + std::to_string(i) + " (" + batch[i].workload.template_name() + ")");
    }
  }
  EXPECT_GE(pool.workers_started(), 2 + 4);
  // Candidates built by a worker that crashed on another one were built again.
  EXPECT_GT(builds, batch.size());
  EXPECT_EQ(zombie_children(), 0);
  pool_ptr.reset();
  EXPECT_TRUE(children().empty()) << "workers outlive their pool";
  EXPECT_EQ(open_fds(), fds_before) << "descriptors leaked";
}

TEST(MeasurePool, AWorkerKilledWhileCompilingIsCompileHost) {
  MeasurePool pool(pool_options());
  v1::MeasureOptions o = quick_options();
  o.set_build_timeout_ms(30000);
  std::thread killer([] {
    // The slow compile sleeps in its worker, past its reference output, by then.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    for (const auto &[pid, state] : children()) ::kill(pid, SIGSEGV);
  });
  Results r = measure(pool, {fault_candidate("test.slow_compile", true)}, o);
  killer.join();
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  expect_error(r.at[0], v1::COMPILE_HOST, "SIGSEGV", "killed while compiling");
  EXPECT_NE(r.at[0].message().find("while compiling"), std::string::npos) << r.at[0].message();
  r = measure(pool, {good_candidate()}, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  expect_ok(r.at[0], o, "after the compile crash");
}

TEST(MeasurePool, CooldownSeparatesRunsAndCacheFlushWorks) {
  std::mutex mu;
  std::vector<MeasureTraceEvent> runs;
  MeasurePoolOptions po = pool_options();
  po.trace = [&](const MeasureTraceEvent &e) {
    std::lock_guard<std::mutex> lock(mu);
    if (e.kind == MeasureTraceEvent::Run) runs.push_back(e);
  };
  MeasurePool pool(po);
  v1::MeasureOptions o = quick_options();
  o.set_cooldown_ms(150);
  o.set_cpu_cache_flush(true);
  std::vector<Candidate> batch(3, good_candidate());
  Results r = measure(pool, batch, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (const auto &res : r.at) expect_ok(res, o, "flushed");
  ASSERT_EQ(runs.size(), 3u);
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_GE(runs[i].start - runs[i - 1].end, 0.150 * 0.99);
}

TEST(MeasurePool, WrongAnswerComesFromTheComparison) {
  // The perturbed output passes when nothing compares it.
  MeasurePool pool(pool_options());
  v1::MeasureOptions o = quick_options();
  o.set_check_correctness(false);
  Results r = measure(pool, {fault_candidate("test.wrong_answer", true)}, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  expect_ok(r.at[0], o, "wrong answer unchecked");
  o.clear_check_correctness();  // absent: on
  r = measure(pool, {fault_candidate("test.wrong_answer", true)}, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  expect_error(r.at[0], v1::WRONG_ANSWER, "got ", "wrong answer checked");
  EXPECT_NE(r.at[0].message().find("expected"), std::string::npos);
}

TEST(MeasurePool, BadConfigsAreInstantiationErrors) {
  MeasurePool pool(pool_options());
  const v1::MeasureOptions o = quick_options();
  Candidate good = good_candidate();
  Candidate stale = good, malformed = good, unknown_knob = good, bad_value = good, bad_index = good;
  stale.config.set_space_fingerprint(std::string(64, '0'));
  malformed.config.set_knobs_json("{\"tile\": [");
  unknown_knob.config.set_knobs_json("{\"tile\":[256,4],\"fault\":\"off\",\"unroll\":1}");
  bad_value.config.set_knobs_json("{\"tile\":[256,4],\"fault\":\"sometimes\"}");
  bad_index.config.set_index(good.config.index() + 1);
  std::vector<Candidate> batch = {good, stale, malformed, unknown_knob, bad_value, bad_index, good};
  Results r = measure(pool, batch, o);
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  expect_ok(r.at[0], o, "good");
  expect_error(r.at[1], v1::INSTANTIATION, "another config space", "stale fingerprint");
  expect_error(r.at[2], v1::INSTANTIATION, "not valid JSON", "malformed knobs");
  expect_error(r.at[3], v1::INSTANTIATION, "unknown knob", "unknown knob");
  expect_error(r.at[4], v1::INSTANTIATION, "is not a value of knob fault", "bad value");
  expect_error(r.at[5], v1::INSTANTIATION, "does not match", "bad index");
  expect_ok(r.at[6], o, "good after");
  for (const auto &res : r.at) EXPECT_EQ(res.runner_id(), "runner-test");
}

TEST(MeasurePool, MalformedOrAbsurdRequestsAreRefusedWithoutResults) {
  MeasurePoolOptions po = pool_options();
  po.limits.max_batch = 8;
  MeasurePool pool(po);
  const v1::MeasureOptions o = quick_options();
  using Reason = MeasureRejection::Reason;
  auto refused = [&](const std::vector<Candidate> &batch, const v1::MeasureOptions &opts, Reason reason,
                     const std::string &part) {
    int calls = 0;
    std::optional<MeasureRejection> r = pool.measure(batch, opts, [&](size_t, const v1::MeasureResult &) { ++calls; });
    ASSERT_TRUE(r.has_value()) << "expected a refusal mentioning '" << part << "'";
    EXPECT_EQ(r->reason, reason) << r->message;
    EXPECT_NE(r->message.find(part), std::string::npos) << r->message;
    EXPECT_EQ(calls, 0) << r->message;
  };
  Candidate good = good_candidate();

  Candidate unknown = good;
  unknown.workload.set_template_name("conv3d.x86");
  unknown.workload.clear_key();
  refused({good, unknown}, o, Reason::kMalformed, "unknown operator template 'conv3d.x86'");

  Candidate bad_json = good;
  bad_json.workload.set_args_json("{\"n\": 12");
  refused({bad_json}, o, Reason::kMalformed, "not valid JSON");

  Candidate bad_args = good;
  bad_args.workload.set_args_json("{\"n\":-3}");
  bad_args.workload.clear_key();
  refused({bad_args}, o, Reason::kMalformed, "\"n\" must be in");

  Candidate bad_key = good;
  bad_key.workload.set_key(std::string(64, 'f'));
  refused({bad_key}, o, Reason::kMalformed, "does not match");

  Candidate other_target = good;
  other_target.target.set_target("cuda -arch=sm_90");
  refused({other_target}, o, Reason::kMalformed, "cuda -arch=sm_90");

  Candidate long_knobs = good;
  long_knobs.config.set_knobs_json(std::string(70000, ' '));
  refused({long_knobs}, o, Reason::kOverLimit, "knobs_json");

  v1::MeasureOptions many = o;
  many.set_repeat(100000);
  refused({good}, many, Reason::kOverLimit, "repeat");
  v1::MeasureOptions slow = o;
  slow.set_build_timeout_ms(100000000);
  refused({good}, slow, Reason::kOverLimit, "build_timeout_ms");

  refused(std::vector<Candidate>(9, good), o, Reason::kOverLimit, "batch has 9 configs");

  // Tensors of 2^30 floats each (4 GiB): within the compiler's limits, beyond the runner's.
  ops::Task huge =
      ops::Task("dense_pack.x86", Json::object({{"data", tensor({32768, 32768})}, {"weight", tensor({32768, 32768})}}),
                driver::resolve_target(kTarget));
  refused({candidate(huge, to_wire(huge.default_config()))}, o, Reason::kOverLimit, "above the runner's limit");

  // Without the extension, the test templates do not exist.
  MeasurePoolOptions plain = pool_options();
  plain.extension = {};
  MeasurePool plain_pool(plain);
  int calls = 0;
  std::optional<MeasureRejection> r =
      plain_pool.measure({good}, o, [&](size_t, const v1::MeasureResult &) { ++calls; });
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->message.find("unknown operator template 'test.wrong_answer'"), std::string::npos) << r->message;
  EXPECT_EQ(calls, 0);

  EXPECT_EQ(pool.workers_started(), 0);
  EXPECT_EQ(plain_pool.workers_started(), 0);
}

TEST(MeasurePool, CancelAnswersTheRestPromptly) {
  MeasurePool pool(pool_options());
  v1::MeasureOptions o = quick_options();
  o.set_min_repeat_ms(50);
  // More than one round of builds, so that some candidates are not even built when it is cancelled.
  std::vector<Candidate> batch(24, good_candidate());
  std::atomic<bool> cancel{false};
  Clock::time_point cancelled_at;
  Results r = measure(pool, batch, o, &cancel, [&](size_t) {
    if (!cancel.exchange(true)) cancelled_at = Clock::now();
  });
  const double after_cancel = std::chrono::duration<double>(Clock::now() - cancelled_at).count();
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  int ok = 0, cancelled = 0;
  for (const auto &res : r.at) {
    if (res.error() == v1::OK) ++ok;
    if (res.error() == v1::INFRA && res.message() == "cancelled") ++cancelled;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(cancelled, 23);
  EXPECT_LT(after_cancel, 1.0);
}

TEST(MeasurePool, CancelStopsARunInProgress) {
  MeasurePool pool(pool_options());
  v1::MeasureOptions o = quick_options();
  o.set_run_timeout_ms(60000);  // the hanging candidate would hold the device for a minute
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    cancel = true;
  });
  const Clock::time_point start = Clock::now();
  Results r = measure(pool, {fault_candidate("test.infinite_loop", true), good_candidate()}, o, &cancel);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  canceller.join();
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (const auto &res : r.at) expect_error(res, v1::INFRA, "cancelled", "after the cancel");
  EXPECT_LT(took, 5.0);
  // The pool serves the next batch.
  Results next = measure(pool, {good_candidate()}, quick_options());
  EXPECT_EQ(next.at[0].error(), v1::OK) << next.at[0].message();
}

TEST(MeasurePool, AWorkerThatCannotStartIsInfra) {
  MeasurePoolOptions po = pool_options();
  po.worker_command = {"/nonexistent/kiln-measure-worker"};
  MeasurePool pool(po);
  Results r = measure(pool, {good_candidate(), good_candidate()}, quick_options());
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  for (const auto &res : r.at) expect_error(res, v1::INFRA, "cannot start a measurement worker", "no worker");
}

// The pool's cost per candidate beyond compiling and running it, for a trivial kernel, with one
// worker so that nothing overlaps. Run with --gtest_also_run_disabled_tests.
TEST(MeasurePool, DISABLED_OverheadPerCandidate) {
  std::mutex mu;
  double build_s = 0, run_s = 0;
  MeasurePoolOptions po = pool_options();
  po.build_workers = 1;
  po.trace = [&](const MeasureTraceEvent &e) {
    std::lock_guard<std::mutex> lock(mu);
    (e.kind == MeasureTraceEvent::Build ? build_s : run_s) += e.worker_seconds;
  };
  MeasurePool pool(po);
  v1::MeasureOptions o = quick_options();
  measure(pool, {good_candidate()}, o);  // workers started, workload cached
  build_s = run_s = 0;
  const int n = 200;
  std::vector<Candidate> batch(static_cast<size_t>(n), fault_candidate("test.wrong_answer", false));
  const auto t0 = Clock::now();
  Results r = measure(pool, batch, o);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(r.rejection) << r.rejection->message;
  double compile_s = 0;
  for (const auto &res : r.at) {
    EXPECT_EQ(res.error(), v1::OK);
    compile_s += res.compile_seconds();
  }
  std::printf(
      "measure_pool_overhead candidates=%d wall_s=%.3f worker_build_s=%.3f compile_s=%.3f worker_run_s=%.3f "
      "overhead_ms_per_candidate=%.3f\n",
      n, wall, build_s, compile_s, run_s, (wall - build_s - run_s) / n * 1e3);
}

}  // namespace
}  // namespace kiln::rpc

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "--measure-worker") {
    return kiln::rpc::measure_worker_main(kiln::rpc::test_templates_extension());
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
