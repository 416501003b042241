// bench/service: what the tuning service's own machinery costs per trial. A null measurer answers
// every config OK at once, with a cost fixed per config, so that the whole time is the job's
// machinery: the task scheduler, the search strategy (proposals and updates, the cost model's fits
// for xgb), the tuning log's inserts (one transaction per batch) and, through the JobManager,
// the service's queue, thread and progress reports. The peer, in the same run, is the same job
// driven by Tuner::run directly (no JobManager): the difference is what the service adds.
//
// Usage: service_bench [--strategies random,xgb] [--trials N] [--xgb-trials N] [--batch B] [--via V]
//                      [--plan-size P] [--feature-threads T]
// Prints one line per strategy and driver:
//   service strategy=S via=job_manager|tuner trials=N batch=B space=V wall_s= trials_per_s=
//           us_per_trial= [search_us_per_trial= refit_ms_per_plan= plans= lowered_per_trial=
//           features_us_per_trial= predict_us_per_trial=]
// The bracketed fields (model-based strategy, via=tuner): the strategy's own time per trial
// (tuner::SearchStats), its refit per plan, the candidates lowered for their features and the
// time that took, and the model's predictions.
// --via job_manager|tuner runs one driver only; --plan-size P and --feature-threads T set the
// model-based strategy's plan and feature threads.
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/common/split_list.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "db/tuning_db.h"
#include "tuner/job_manager.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

namespace {

using kiln::contracts::Json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace tuner = kiln::tuner;

constexpr char kTarget[] = "llvm -mcpu=native";
constexpr char kDeviceKey[] = "bench-cpu";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Answers every config OK at once: 1 to 2 ms, fixed per config index, so that a model has
// something to learn.
class NullMeasurer : public tuner::Measurer {
 public:
  std::string name() const override { return "null"; }
  std::vector<tuner::MeasureOutcome> measure(const kiln::ops::Task &, const std::string &,
                                             const std::vector<kiln::autotune::Config> &configs) override {
    std::vector<tuner::MeasureOutcome> out(configs.size());
    for (size_t i = 0; i < configs.size(); ++i) {
      const double cost = 1e-3 * (1.0 + std::fmod(static_cast<double>(configs[i].index()) * 0.618034, 1.0));
      out[i].costs = {cost, cost, cost};
      out[i].wall_s = 0;
      out[i].runner = "null";
    }
    return out;
  }
};

tuner::TuneTask task() {
  auto t = [](std::vector<int64_t> shape) {
    return Json::object({{"shape", Json::array_of(shape)}, {"dtype", "float32"}});
  };
  return {"matmul.x86", Json::object({{"a", t({512, 512})}, {"b", t({512, 512})}}), 1, "matmul_512"};
}

size_t g_plan_size = 0;      // 0: the tuner's default
int g_feature_threads = -1;  // -1: the tuner's default

tuner::TuneOptions options(const std::string &strategy, int64_t trials, int64_t batch) {
  tuner::TuneOptions o;
  if (g_plan_size > 0) o.search.plan_size = g_plan_size;
  if (g_feature_threads >= 0) o.search.feature_threads = g_feature_threads;
  o.strategy = strategy;
  o.trials = trials;
  o.batch_size = batch;
  o.transfer = false;
  o.seed = 1;
  return o;
}

struct Run {
  double wall_s = 0;
  int64_t trials = 0;
  tuner::SearchStats search;  // through Tuner::run only
};

Run through_tuner(const fs::path &dir, const std::string &strategy, int64_t trials, int64_t batch) {
  kiln::db::TuningDb log = kiln::db::TuningDb::open((dir / ("tuner_" + strategy + ".db")).string());
  NullMeasurer measurer;
  tuner::Tuner t(log, measurer, kTarget, kDeviceKey);
  const int64_t job = t.create_job("bench", {task()}, options(strategy, trials, batch));
  const Clock::time_point start = Clock::now();
  const tuner::JobStatus status = t.run(job);
  Run run{seconds_since(start), status.trials_done, {}};
  if (!status.tasks.empty()) run.search = status.tasks.front().search;
  return run;
}

Run through_job_manager(const fs::path &dir, const std::string &strategy, int64_t trials, int64_t batch) {
  tuner::JobManagerOptions o;
  o.log_path = (dir / ("service_" + strategy + ".db")).string();
  o.target = kTarget;
  o.device_key = kDeviceKey;
  o.measurer = [](const tuner::MeasurerRequest &) { return std::make_unique<NullMeasurer>(); };
  tuner::JobManager manager(o);
  manager.start();
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  tuner::JobSubmission submission;
  submission.name = "bench";
  submission.tasks = {task()};
  submission.options = options(strategy, trials, batch);
  const Clock::time_point start = Clock::now();
  const int64_t job = manager.submit(submission).status.job_id;
  const uint64_t subscription = manager.subscribe(job, [&](const tuner::JobReport &, bool final) {
    if (!final) return;
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    finished.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [&] { return done; });
  }
  const double wall = seconds_since(start);
  manager.unsubscribe(subscription);
  const tuner::JobReport report = manager.get(job);
  manager.shutdown();
  return {wall, report.status.trials_done, {}};
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<std::string> strategies = {"random", "xgb"};
  int64_t trials = 5000, xgb_trials = 1000, batch = 16;
  std::vector<std::string> vias = {"job_manager", "tuner"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--strategies" && i + 1 < argc) {
      strategies = kiln::bench::split_list(argv[++i]);
    } else if (arg == "--trials" && i + 1 < argc) {
      trials = std::atoll(argv[++i]);
    } else if (arg == "--xgb-trials" && i + 1 < argc) {
      xgb_trials = std::atoll(argv[++i]);
    } else if (arg == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (arg == "--via" && i + 1 < argc) {
      vias = {argv[++i]};
    } else if (arg == "--plan-size" && i + 1 < argc) {
      g_plan_size = static_cast<size_t>(std::atoll(argv[++i]));
    } else if (arg == "--feature-threads" && i + 1 < argc) {
      g_feature_threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: service_bench [--strategies random,xgb] [--trials N] [--xgb-trials N] [--batch B] "
                   "[--via job_manager|tuner] [--plan-size P] [--feature-threads T]\n");
      return 2;
    }
  }
  char pattern[] = "/tmp/kiln-service-bench-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  const kiln::ops::Task probe(task().template_name, task().args, kiln::driver::resolve_target(kTarget));
  const int64_t space = probe.space().size();
  for (const std::string &strategy : strategies) {
    const int64_t n = strategy == "xgb" ? xgb_trials : trials;
    for (const std::string &via : vias) {
      const Run run =
          via == "tuner" ? through_tuner(dir, strategy, n, batch) : through_job_manager(dir, strategy, n, batch);
      std::printf(
          "service strategy=%s via=%s trials=%lld batch=%lld space=%lld wall_s=%.3f trials_per_s=%.0f "
          "us_per_trial=%.1f",
          strategy.c_str(), via.c_str(), static_cast<long long>(run.trials), static_cast<long long>(batch),
          static_cast<long long>(space), run.wall_s, run.trials / run.wall_s, 1e6 * run.wall_s / run.trials);
      const tuner::SearchStats &s = run.search;
      if (s.plans > 0) {
        const double n = static_cast<double>(run.trials);
        std::printf(
            " search_us_per_trial=%.1f refit_ms_per_plan=%.1f plans=%lld lowered_per_trial=%.1f "
            "features_us_per_trial=%.1f predict_us_per_trial=%.1f anneal_us_per_trial=%.1f "
            "proxy_predict_us_per_trial=%.1f",
            1e6 * (s.propose_s + s.update_s) / n, 1e3 * s.refit_s / static_cast<double>(s.plans),
            static_cast<long long>(s.plans), static_cast<double>(s.featurized) / n, 1e6 * s.feature_s / n,
            1e6 * s.predict_s / n, 1e6 * s.anneal_s / n, 1e6 * s.proxy_predict_s / n);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  fs::remove_all(dir);
  return 0;
}
