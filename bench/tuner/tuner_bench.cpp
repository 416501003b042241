// tuner_bench: the tuner's search strategies on the cost-model benchmark's workloads
// (bench/cost_model/workloads.h), through real tuner::Tuner jobs, and the tuned kernels against
// oneDNN measured in the same run.
//
//   tuner_bench --replay DATASET [--seeds N] [--replay-trials N] [--strategies LIST]
//   tuner_bench --real --db DATASET [--trials N] [--trials-for LABEL=N,...]
//               [--real-strategies LIST] [--real-seeds N] [--confirm-top K] [--confirm-repeats R]
//   common: [--workloads SUBSTR,...] [--svg PATH] [--batch B] [--plan-size P] [--work-dir DIR] [--keep]
//           [--transfer-cap N] (records of each other workload the transfer prior is fit on; 0: all)
//   defaults: 10 seeds, 300 trials per replayed job and per real job, batches of 16; --replay and
//   --real may be given together (one picture with both).
//
// DATASET is cost_model_dataset's tuning log (measured configs of the workloads, `cpu-local`). It
// is only read, from a copy in the work directory; every job writes a temporary tuning log there.
//
// Replay (--replay): for each workload whose space the dataset covers exhaustively (every valid
// config measured), one tuning job per strategy and seed, measured by a ReplayMeasurer built from
// the dataset: noise-free, and the best known config is the true best of the space. A workload
// whose space is only sampled is skipped (a `tuner_replay ... skipped=` line): a job would propose
// configs the dataset does not hold. Strategies: random, genetic, xgb (no transfer) and
// xgb_transfer, whose temporary log first receives the dataset's records of the template's other
// workloads (never the workload's own), which the tuner's transfer learning (TuningDb::history)
// fits its prior on. Lines:
//   tuner_space workload= template= valid= measured= exhaustive= best_gflops= default_gflops=
//               random_expected_search_trials_to_95=
//       the last: the expected trials of uniform sampling until a config within 95 % of the best,
//       from the dataset's configs (exact for an exhaustive space, an estimate from a sample
//       otherwise), plus one for the default config the tuner measures first.
//   tuner_replay_run workload= strategy= seed= trials= best_frac= trials_to_95= search_trials_to_95=
//                    misses= wall_s=
//   tuner_replay workload= strategy= seeds= trials= trials_to_95= reached= trials_to_95_each=
//                search_trials_to_95= search_reached= search_trials_to_95_each= best_frac@50= @100=
//                @200= @300=
//       trials_to_95: the trials (the default config, which every job measures first, included)
//       until the best found is >= 95 % of the best known, mean over the seeds; "none" unless every
//       seed got there (trials_to_95_each shows each seed). search_trials_to_95: the same with the
//       default config's result left out, i.e. until a config the strategy proposed gets there
//       (the two differ where the default config is itself within 95 %). best_frac@N: best found /
//       best known after N trials, mean over the seeds.
//   tuner_replay_ratio workload= expected_random_over_<strategy>= ... random_over_<strategy>= ...
//                      search_random_over_<strategy>= ...
//   tuner_replay_summary workloads= seeds= trials= geomean_<ratio>= ...
//       random_over_<s>: random's mean trials to 95 % over the strategy's, from the replayed jobs;
//       a seed that never got there counts as trials + 1, so a ratio is marked ">=" (a lower bound)
//       when only random has such seeds, "<=" when only the other strategy has, "~" when both; a
//       geomean with any of them is marked "(censored)". search_random_over_<s>: the same with
//       search_trials_to_95. expected_random_over_<s>: random's exact expectation (the space is
//       measured whole; see tuner_space) over the strategy's search_trials_to_95, uncensored on
//       random's side (expected_random_over_random compares the replayed random jobs with it).
//   tuner_overhead mode=replay workload= strategy= runs= trials= ms_per_trial= ms_per_trial_without_prior=
//                  prior_ms= search_ms_per_trial= other_ms_per_trial= refit_ms_per_plan= plans= fits=
//                  lowered_per_trial= feature_ms_per_trial= predict_ms_per_trial= anneal_ms_per_trial=
//       the tuner's own time (run()'s wall time minus the measurer's, which a decorator Measurer
//       adds up) per trial, over the seeds' jobs: the transfer prior, once per job (TaskStatus::
//       prior_s: the history, its features, the fit), the strategy's next_batch and update calls
//       (SearchStats), and the rest (the log's inserts, the job loop). refit_ms_per_plan: the
//       model's refit at the start of each plan (SearchStats::refit_s / plans). lowered_per_trial
//       and feature_ms_per_trial: candidates lowered for their features and the time that took;
//       predict_ms_per_trial: the model's predictions; anneal_ms_per_trial: annealing on the
//       proxy (large spaces).
//
// Real (--real): for each workload, one job with the local measurer (worker processes, 1 thread,
// build workers 1), strategy xgb with transfer from the dataset's records of the template's other
// workloads; then, in this process, the best config found, the default config, the dataset's best
// config and oneDNN, each built once and timed in turns five times on the same data and layouts as
// sweep_bench (bench/common/layer.h), each keeping its fastest figure:
//   tuner_real workload= trials= best_gflops= tuner_best_gflops= default_gflops= onednn_gflops=
//              ratio_onednn= ratio_default= dataset_best_gflops= dataset_best_inproc_gflops=
//              best_vs_dataset= trials_to_95= search_trials_to_95= wall_s= measure_s=
//              tuner_default_gflops= load= top5_gflops= top_ratio_onednn= confirmed= peak_gflops=
//              of_peak= onednn_of_peak=
//       The job confirms its leaders at its end (--confirm-top K, default 4, --confirm-repeats R,
//       default 2: tuner::TuneOptions), and its best is the log's best (TuningDb::best: the upper
//       median of each leader's timings), the config a build replays; confirmed: how many
//       measurements that took, on top of trials=. The curves stop at the budget.
//       best_gflops and the ratios: in this process; tuner_best_gflops: the job's own measurement;
//       dataset_best_gflops: as recorded in the dataset; trials_to_95 against the better of the
//       dataset's best and the job's (measured in different sessions: a machine shared with other
//       work is not equally fast in both: tuner_default_gflops, the default config as the job
//       measured it, against the tuner_space line's default_gflops shows how much). load: the
//       load average before/after the job. Random's expectation is on the tuner_space line.
//       top5_gflops: the fastest, in this process, of the log's five best configs (its best
//       included). peak_gflops: the core's float32 FMA peak from registers (bench/common/fma_peak.h),
//       measured in each round between the timings, the highest kept; of_peak and onednn_of_peak:
//       the tuned best's and oneDNN's share of it. No kernel passes the peak (a convolution's FLOPs
//       count the taps in the zero padding, which Kiln's templates skip, so one can show a few per
//       cent above it), so peak over oneDNN is the most any tuned config could gain on oneDNN (a
//       layer limited by memory gains less).
//   tuner_overhead mode=real ...
//   With --real-strategies (default xgb_transfer) and --real-seeds (default 1), every workload is
//   also tuned by real jobs of each listed strategy and seed (the xgb_transfer job of seed 1 is the
//   one above), in turns, so that strategies can be compared on spaces the dataset only samples,
//   where a replay is impossible. Against the best known (the dataset's best or any of the jobs'):
//   tuner_real_run workload= strategy= seed= trials= tuner_best_gflops= trials_to_95= search_trials_to_95=
//                  wall_s= load=
//   tuner_real_strategy workload= strategy= seeds= trials_to_95= reached= trials_to_95_each=
//                       search_trials_to_95= search_reached= best_frac@50= ...
//   tuner_real_ratio workload= random_over_<s>= search_random_over_<s>= (as tuner_replay_ratio)
//   tuner_real_compare_summary workloads= seeds= geomean_random_over_<s>= ...
//   Measurements of different jobs are taken at different times: on a shared machine their noise
//   does not cancel as in a replay, so these are confirmations, not the multi-seed statistics.
//   tuner_summary workloads= geomean_ratio_onednn= geomean_ratio_default= geomean_best_vs_dataset=
//                 geomean_dataset_best_ratio_onednn= geomean_top_ratio_onednn=
//       dataset_best: the dataset's best config against oneDNN (on an exhaustively measured space,
//       the best the template can do, whatever the search); top: top5_gflops against oneDNN;
//       peak_over_onednn: peak_gflops over oneDNN's, the ceiling of geomean_ratio_onednn.
//
// --plan-size P sets the model-based strategy's largest plan (default 64; without a prior plans
// start at 16 and grow with the trials), to see what it changes.
// --svg PATH: one panel per workload, best found / best known against trials, one line per
// strategy (mean over the seeds), the real run dashed.
//
// Run it pinned to one core (`taskset -c 0`): the tuner, its worker processes and the in-process
// timings then share that core, as they would on a runner with one measurement thread.
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/common/fma_peak.h"
#include "bench/common/layer.h"
#include "bench/common/line_chart.h"
#include "bench/common/split_list.h"
#include "bench/cost_model/workloads.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "db/tuning_db.h"
#include "deploy/thread_pool.h"
#include "rpc_server/measure_worker.h"
#include "tuner/measurer.h"
#include "tuner/tuner.h"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

constexpr const char *kDeviceKey = "cpu-local";  // the dataset's device class

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

using bench::split_list;

struct Options {
  std::string db;  // the dataset
  bool replay = false, real = false;
  int seeds = 10;
  int64_t replay_trials = 300;
  std::vector<std::string> strategies = {"random", "genetic", "xgb", "xgb_transfer"};
  int64_t real_trials = 300;
  int64_t confirm_top = 4;  // real mode's job (tuner::TuneOptions::confirm_top)
  int64_t confirm_repeats = 2;
  std::vector<std::string> real_strategies = {"xgb_transfer"};  // real jobs per workload and seed
  int real_seeds = 1;
  std::map<std::string, int64_t> real_trials_for;  // label -> trials
  int64_t batch = 16;
  int64_t plan_size = 0;      // 0: the tuner's default
  int64_t transfer_cap = -1;  // records per other workload for the prior; -1: the tuner's default
  std::vector<std::string> filters;
  std::string svg;
  std::string work_dir;
  bool keep = false;
  std::string target = "llvm -mcpu=native";
};

// A strategy of the benchmark: the tuner's strategy and whether transfer learning is on.
struct Strategy {
  std::string name, tuner_strategy;
  bool transfer = false;
};

Strategy strategy_of(const std::string &name) {
  if (name == "xgb_transfer") return {name, "xgb", true};
  if (name == "random" || name == "genetic" || name == "xgb" || name == "grid") return {name, name, false};
  throw UserError("unknown strategy '" + name + "'; the benchmark's are random, genetic, xgb, xgb_transfer and grid");
}

// Wraps a measurer and adds up the time spent in it, so that the tuner's own time is run()'s wall
// time minus this.
class TimedMeasurer : public tuner::Measurer {
 public:
  explicit TimedMeasurer(tuner::Measurer &inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  std::vector<tuner::MeasureOutcome> measure(const ops::Task &task, const std::string &device_key,
                                             const std::vector<autotune::Config> &configs) override {
    const double t0 = now_s();
    std::vector<tuner::MeasureOutcome> out = inner_.measure(task, device_key, configs);
    seconds_ += now_s() - t0;
    return out;
  }
  void cancel() override { inner_.cancel(); }
  double seconds() const { return seconds_; }

 private:
  tuner::Measurer &inner_;
  double seconds_ = 0;
};

// A workload with what the dataset knows of it.
struct WorkloadData {
  bench::CostModelWorkload w;
  std::unique_ptr<ops::Task> task;
  int64_t valid = 0;     // valid configs of the space
  int64_t measured = 0;  // distinct configs with a record
  bool exhaustive = false;
  double best_gflops = 0;  // best in the dataset
  double default_gflops = 0;
  std::vector<double> gflops;  // every distinct measured config (0: failed), for random's expectation
  std::optional<autotune::Config> best_config;
  std::string records;   // the dataset's records of the workload, Kiln JSON lines
  bool selected = true;  // by --workloads
};

constexpr size_t kTop = 5;  // real mode: the job's fastest configs timed again in this process

// One tuning job's result.
struct JobResult {
  std::vector<double> curve;         // best GFLOPS found after each trial
  std::vector<double> search_curve;  // the same without the default config's trial
  std::optional<autotune::Config> best_config;
  double best_gflops = 0;
  std::vector<std::pair<double, autotune::Config>> top;  // the fastest valid trials, fastest first
  double wall_s = 0, measure_s = 0, prior_s = 0;
  double default_gflops = 0;  // the default config as the job measured it
  int64_t trials = 0;
  int64_t confirmed = 0;  // the confirmation's measurements (in trials)
  tuner::SearchStats search;
  std::string message;
};

JobResult run_job(const Options &o, const std::string &log_path, const std::string &transfer_records,
                  tuner::Measurer &measurer, const WorkloadData &d, const Strategy &s, uint64_t seed, int64_t trials,
                  bool verbose, bool confirm = false) {
  db::TuningDb log = db::TuningDb::open(log_path);
  if (!transfer_records.empty()) {
    std::istringstream in(transfer_records);
    log.import_records(in);
  }
  TimedMeasurer timed(measurer);
  tuner::Tuner tuner(log, timed, o.target, kDeviceKey);
  tuner::TuneOptions to;
  to.strategy = s.tuner_strategy;
  to.transfer = s.transfer;
  to.trials = trials;
  to.batch_size = o.batch;
  to.confirm_top = confirm ? o.confirm_top : 0;
  to.confirm_repeats = o.confirm_repeats;
  to.seed = seed;
  if (o.plan_size > 0) to.search.plan_size = static_cast<size_t>(o.plan_size);
  if (o.transfer_cap >= 0) to.transfer_max_records_per_workload = o.transfer_cap;
  const int64_t job = tuner.create_job(d.w.label + "-" + s.name + "-" + std::to_string(seed),
                                       {tuner::TuneTask{d.w.template_name, d.w.args, 1.0, d.w.label}}, to);
  JobResult r;
  int64_t next_report = 64;
  const double t0 = now_s();
  const tuner::JobStatus status = tuner.run(job, [&](const tuner::JobStatus &st) {
    if (verbose && st.trials_done >= next_report) {
      std::fprintf(stderr, "%s", tuner::format_status(st).c_str());
      next_report += 64;
    }
  });
  r.wall_s = now_s() - t0;
  r.measure_s = timed.seconds();
  r.trials = status.trials_done;
  r.message = status.message;
  if (!status.tasks.empty()) {
    r.search = status.tasks.front().search;
    r.prior_s = status.tasks.front().prior_s;
    const tuner::TaskStatus &t = status.tasks.front();
    if (t.default_s) r.default_gflops = t.flop / *t.default_s / 1e9;
  }

  // The search's records in the order they were measured (the confirmation's come after them
  // and add no config: the curves stop at the budget).
  db::ExportFilter filter;
  filter.workload_key = d.task->key();
  double best = 0, best_search = 0;
  const autotune::Config def = d.task->default_config();
  int64_t seen = 0;
  log.for_each_record(filter, [&](const db::Record &rec) {
    if (!rec.job_id || *rec.job_id != job || seen++ >= trials) return;
    if (rec.valid() && rec.mean() > 0) {
      const double g = d.task->flop() / rec.mean() / 1e9;
      const autotune::Config c = d.task->space().from_record(rec.config);
      best = std::max(best, g);
      if (c != def) best_search = std::max(best_search, g);
    }
    r.curve.push_back(best);
    r.search_curve.push_back(best_search);
  });
  // The job's best and runners-up as the log ranks them (after the confirmation: by the upper
  // median of each leader's timings), i.e. what a build replays.
  const db::Target target = db::Target::make(o.target, kDeviceKey);
  for (const db::Record &rec : log.top_k(d.task->key(), target, kTop, db::Scope::kExact)) {
    r.top.emplace_back(d.task->flop() / rec.mean() / 1e9, d.task->space().from_record(rec.config));
  }
  if (!r.top.empty()) {
    r.best_config = r.top.front().second;
    r.best_gflops = r.top.front().first;
  }
  if (!status.tasks.empty()) r.confirmed = status.tasks.front().confirmed;
  return r;
}

// The first trial (1-based) whose best reaches `threshold`; nullopt when none does.
std::optional<int64_t> trials_to(const std::vector<double> &curve, double threshold) {
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i] >= threshold) return static_cast<int64_t>(i + 1);
  }
  return std::nullopt;
}

double at(const std::vector<double> &v, size_t n) {
  if (v.empty()) return 0;
  return v[std::min(n, v.size()) - 1];
}

double geomean(const std::vector<double> &v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string to95_text(const std::optional<int64_t> &t) { return t ? std::to_string(*t) : "none"; }

// The expected trials of uniform sampling without replacement until a config of at least
// `threshold` GFLOPS, from the dataset's measured configs (a uniform sample of the space, or all of
// it): (n + 1) / (k + 1) for k such configs among n, plus 1 for the default config the tuner
// measures first. ">n" when none of them reaches it.
std::optional<double> random_expectation(const WorkloadData &d, double threshold) {
  const double n = static_cast<double>(d.gflops.size());
  const double k =
      static_cast<double>(std::count_if(d.gflops.begin(), d.gflops.end(), [&](double g) { return g >= threshold; }));
  if (k == 0) return std::nullopt;
  return (n + 1) / (k + 1) + 1;
}

std::string random_expectation_text(const WorkloadData &d, double threshold) {
  const std::optional<double> e = random_expectation(d, threshold);
  return e ? fmt("%.1f", *e) : ">" + std::to_string(d.gflops.size());
}

// The trials each seed needed to reach a threshold (nullopt: not within the budget).
struct Reach {
  std::vector<std::optional<int64_t>> per_seed;
  int64_t trials = 0;  // the budget
  // The mean with a seed that never got there counted as trials + 1.
  double censored_mean() const {
    double s = 0;
    for (const auto &t : per_seed) s += t ? static_cast<double>(*t) : static_cast<double>(trials + 1);
    return per_seed.empty() ? NAN : s / static_cast<double>(per_seed.size());
  }
  int reached() const {
    return static_cast<int>(
        std::count_if(per_seed.begin(), per_seed.end(), [](const auto &t) { return t.has_value(); }));
  }
  bool all() const { return reached() == static_cast<int>(per_seed.size()); }
  std::string mean_text() const { return all() ? fmt("%.1f", censored_mean()) : "none"; }
  std::string each() const {
    std::string e;
    for (const auto &t : per_seed) e += (e.empty() ? "" : ",") + to95_text(t);
    return e;
  }
};

// Per workload and strategy: every seed's curve as fractions of the best known.
struct StrategyCurves {
  std::vector<std::vector<double>> fractions;  // per seed
  Reach to95, search_to95;                     // with and without the default config's trial
  std::vector<JobResult> jobs;
  std::vector<double> mean_curve() const {
    size_t n = 0;
    for (const auto &c : fractions) n = std::max(n, c.size());
    std::vector<double> m(n, 0);
    for (const auto &c : fractions) {
      for (size_t i = 0; i < n; ++i) m[i] += at(c, i + 1) / static_cast<double>(fractions.size());
    }
    return m;
  }
};

struct Picture {
  std::map<std::string, std::map<std::string, std::vector<double>>> replay;  // label -> strategy -> mean
  std::map<std::string, std::vector<double>> real;                           // label -> fraction curve
  // --real-strategies with more than xgb_transfer: label -> strategy -> mean fraction curve
  std::map<std::string, std::map<std::string, std::vector<double>>> real_by;
  std::map<std::string, std::string> notes;
};

// The tuner's own time per trial (run()'s wall time minus the measurer's), summed over jobs: the
// transfer prior (once per job), the strategy's calls, and the rest (log inserts, the job loop).
void print_overhead(const std::string &mode, const std::string &label, const std::string &strategy,
                    const std::vector<JobResult> &jobs) {
  double own = 0, prior = 0, search = 0, refit = 0, trials = 0, plans = 0, fits = 0;
  double lowered = 0, feature = 0, predict = 0, anneal = 0;
  for (const JobResult &j : jobs) {
    lowered += static_cast<double>(j.search.featurized);
    feature += j.search.feature_s;
    predict += j.search.predict_s;
    anneal += j.search.anneal_s;
    own += j.wall_s - j.measure_s;
    prior += j.prior_s;
    search += j.search.propose_s + j.search.update_s;
    refit += j.search.refit_s;
    trials += static_cast<double>(j.trials);
    plans += static_cast<double>(j.search.plans);
    fits += static_cast<double>(j.search.fits);
  }
  const double n = static_cast<double>(jobs.size());
  std::printf(
      "tuner_overhead mode=%s workload=%s strategy=%s runs=%zu trials=%.0f ms_per_trial=%.3f "
      "ms_per_trial_without_prior=%.3f prior_ms=%.1f search_ms_per_trial=%.3f other_ms_per_trial=%.3f "
      "refit_ms_per_plan=%s plans=%.1f fits=%.1f lowered_per_trial=%.2f feature_ms_per_trial=%.3f "
      "predict_ms_per_trial=%.3f anneal_ms_per_trial=%.3f\n",
      mode.c_str(), label.c_str(), strategy.c_str(), jobs.size(), trials / n, own / trials * 1e3,
      (own - prior) / trials * 1e3, prior / n * 1e3, search / trials * 1e3, (own - prior - search) / trials * 1e3,
      plans > 0 ? fmt("%.1f", refit / plans * 1e3).c_str() : "-", plans / n, fits / n, lowered / trials,
      feature / trials * 1e3, predict / trials * 1e3, anneal / trials * 1e3);
}

// Prints " random_over_<s>=R search_random_over_<s>=R" for every strategy of `by` but random and
// adds each ratio to `ratios` (a censored one's key to `censored`).
void print_random_ratios(const StrategyCurves &rnd, const std::map<std::string, StrategyCurves> &by,
                         std::map<std::string, std::vector<double>> *ratios, std::set<std::string> *censored) {
  for (const char *kind : {"", "search_"}) {
    const Reach &base = *kind ? rnd.search_to95 : rnd.to95;
    for (const auto &[name, sc] : by) {
      if (name == "random") continue;
      const Reach &other = *kind ? sc.search_to95 : sc.to95;
      const std::string key = std::string(kind) + "random_over_" + name;
      const double ratio = base.censored_mean() / other.censored_mean();
      (*ratios)[key].push_back(ratio);
      // A seed of random that never got there makes the ratio a lower bound; one of the other
      // strategy's, an upper bound.
      const char *mark = !base.all() && other.all() ? ">=" : base.all() && !other.all() ? "<=" : !base.all() ? "~" : "";
      if (*mark) censored->insert(key);
      std::printf(" %s=%s%.2f", key.c_str(), mark, ratio);
    }
  }
}

void print_ratio_summary(const std::map<std::string, std::vector<double>> &ratios,
                         const std::set<std::string> &censored) {
  for (const auto &[name, v] : ratios) {
    std::printf(" geomean_%s=%.2f%s", name.c_str(), geomean(v), censored.count(name) ? "(censored)" : "");
  }
}

void replay_mode(const Options &o, db::TuningDb &dataset, std::vector<WorkloadData> &data, Picture *pic) {
  tuner::ReplayMeasurer replay = tuner::ReplayMeasurer::from_log(dataset);
  std::vector<Strategy> strategies;
  for (const std::string &name : o.strategies) strategies.push_back(strategy_of(name));
  // "random_over_<s>" and "search_random_over_<s>" -> one ratio per workload
  std::map<std::string, std::vector<double>> ratios;
  std::set<std::string> lower_bound;
  int counted = 0;
  int run_index = 0;
  for (WorkloadData &d : data) {
    if (!d.selected) continue;
    if (!d.exhaustive) {
      std::printf(
          "tuner_replay workload=%s skipped=space_sampled valid=%lld measured=%lld "
          "(a replay needs every valid config measured; see tuner_real)\n",
          d.w.label.c_str(), static_cast<long long>(d.valid), static_cast<long long>(d.measured));
      pic->notes[d.w.label] =
          "space sampled (" + std::to_string(d.measured) + " of " + std::to_string(d.valid) + "): real run only";
      continue;
    }
    pic->notes[d.w.label] = "default config: " + fmt("%.2f", d.default_gflops / d.best_gflops) + " of the best";
    // The transfer set: the dataset's records of the template's other workloads.
    std::string others;
    for (const WorkloadData &e : data) {
      if (&e != &d && e.w.template_name == d.w.template_name) others += e.records;
    }
    const int64_t trials = std::min<int64_t>(o.replay_trials, d.valid);
    std::map<std::string, StrategyCurves> by;
    for (const Strategy &s : strategies) {
      StrategyCurves &sc = by[s.name];
      sc.to95.trials = sc.search_to95.trials = trials;
      for (int seed = 1; seed <= o.seeds; ++seed) {
        const std::string path = o.work_dir + "/replay-" + std::to_string(run_index++) + ".db";
        const int64_t misses_before = replay.misses();
        JobResult r = run_job(o, path, s.transfer ? others : std::string(), replay, d, s, static_cast<uint64_t>(seed),
                              trials, false);
        fs::remove(path);
        fs::remove(path + "-wal");
        fs::remove(path + "-shm");
        std::vector<double> frac, search_frac;
        for (double g : r.curve) frac.push_back(g / d.best_gflops);
        for (double g : r.search_curve) search_frac.push_back(g / d.best_gflops);
        const std::optional<int64_t> t95 = trials_to(frac, 0.95), s95 = trials_to(search_frac, 0.95);
        std::printf(
            "tuner_replay_run workload=%s strategy=%s seed=%d trials=%lld best_frac=%.3f trials_to_95=%s "
            "search_trials_to_95=%s misses=%lld wall_s=%.2f\n",
            d.w.label.c_str(), s.name.c_str(), seed, static_cast<long long>(r.trials), at(frac, frac.size()),
            to95_text(t95).c_str(), to95_text(s95).c_str(), static_cast<long long>(replay.misses() - misses_before),
            r.wall_s);
        std::fflush(stdout);
        sc.fractions.push_back(std::move(frac));
        sc.to95.per_seed.push_back(t95);
        sc.search_to95.per_seed.push_back(s95);
        sc.jobs.push_back(std::move(r));
      }
      const std::vector<double> mean = sc.mean_curve();
      pic->replay[d.w.label][s.name] = mean;
      std::printf(
          "tuner_replay workload=%s strategy=%s seeds=%d trials=%lld trials_to_95=%s reached=%d/%d "
          "trials_to_95_each=%s search_trials_to_95=%s search_reached=%d/%d search_trials_to_95_each=%s",
          d.w.label.c_str(), s.name.c_str(), o.seeds, static_cast<long long>(trials), sc.to95.mean_text().c_str(),
          sc.to95.reached(), o.seeds, sc.to95.each().c_str(), sc.search_to95.mean_text().c_str(),
          sc.search_to95.reached(), o.seeds, sc.search_to95.each().c_str());
      for (size_t n : {50, 100, 200, 300}) {
        if (static_cast<int64_t>(n) <= trials) std::printf(" best_frac@%zu=%.3f", n, at(mean, n));
      }
      std::printf("\n");
      print_overhead("replay", d.w.label, s.name, sc.jobs);
      std::fflush(stdout);
    }
    if (by.count("random")) {
      ++counted;
      const StrategyCurves &rnd = by.at("random");
      std::printf("tuner_replay_ratio workload=%s", d.w.label.c_str());
      // Random's exact expectation (the space is measured whole) over each strategy's search mean.
      const std::optional<double> expected = random_expectation(d, 0.95 * d.best_gflops);
      for (const auto &[name, sc] : by) {
        if (!expected) break;
        const std::string key = "expected_random_over_" + name;
        ratios[key].push_back(*expected / sc.search_to95.censored_mean());
        if (!sc.search_to95.all()) lower_bound.insert(key);
        std::printf(" %s=%s%.2f", key.c_str(), sc.search_to95.all() ? "" : "<=", ratios[key].back());
      }
      print_random_ratios(rnd, by, &ratios, &lower_bound);
      std::printf("\n");
    }
  }
  if (counted > 0) {
    std::printf("tuner_replay_summary workloads=%d seeds=%d trials=%lld", counted, o.seeds,
                static_cast<long long>(o.replay_trials));
    print_ratio_summary(ratios, lower_bound);
    std::printf(" goal_random_over_xgb>=3\n");
  }
  std::fflush(stdout);
}

// The machine's load average over the last minute (other work on a shared machine slows timings).
std::string load_average() {
  FILE *f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[64] = {0};
  const int got = std::fscanf(f, "%63s", buf);
  std::fclose(f);
  return got == 1 ? buf : "?";
}

constexpr int kRounds = 5;  // in-process timings of each kernel, in turns

void real_mode(const Options &o, std::vector<WorkloadData> &data, Picture *pic) {
  tuner::LocalMeasurerOptions lo;
  lo.measure.set_threads(1);
  lo.build_workers = 1;
  tuner::LocalMeasurer local(o.target, lo);
  codegen::LLVMBuildOptions build;
  build.target = o.target;
  const Strategy s = strategy_of("xgb_transfer");
  std::vector<double> ratio_onednn, ratio_default, vs_dataset, dataset_onednn, top_onednn, peak_onednn;
  std::vector<JobResult> all_jobs;
  std::map<std::string, std::vector<double>> compare_ratios;  // --real-strategies: random_over_<s>
  std::set<std::string> compare_censored;
  int compared = 0;
  int index = 0;
  for (WorkloadData &d : data) {
    if (!d.selected) continue;
    std::string others;
    for (const WorkloadData &e : data) {
      if (&e != &d && e.w.template_name == d.w.template_name) others += e.records;
    }
    const int64_t trials = o.real_trials_for.count(d.w.label) ? o.real_trials_for.at(d.w.label) : o.real_trials;
    const std::string path = o.work_dir + "/real-" + std::to_string(index++) + ".db";
    std::fprintf(stderr, "tuner_bench: real job %s, %lld trials\n", d.w.label.c_str(), static_cast<long long>(trials));
    const std::string load_before = load_average();
    const double t0 = now_s();
    JobResult r = run_job(o, path, others, local, d, s, 1, trials, true, true);
    const double job_wall = now_s() - t0;
    const std::string load = load_before + "/" + load_average();
    if (!r.best_config) {
      std::printf("tuner_real workload=%s trials=%lld failed=no_valid_config message=%s\n", d.w.label.c_str(),
                  static_cast<long long>(r.trials), r.message.c_str());
      continue;
    }

    // In this process: oneDNN, the tuned best, the default and the dataset's best, each built once
    // and timed in turns for kRounds rounds, each keeping its fastest round: a burst of other work
    // on the machine slows a round, never speeds one up.
    const bench::Layer layer = bench::layer_of(d.w.template_name, d.w.args);
    const bench::PlainInputs p = bench::plain_inputs(layer, 1);
    bench::OneDnnKernel peer(layer, p);
    bench::KilnKernel best(*d.task, layer, *r.best_config, p, build);
    bench::KilnKernel dflt(*d.task, layer, d.task->default_config(), p, build);
    std::optional<bench::KilnKernel> ds;
    if (d.best_config) ds.emplace(*d.task, layer, *d.best_config, p, build);
    // The runners-up of the job (its best is r.top[0]): what re-timing the top candidates at the
    // end of a job would pick.
    std::vector<std::unique_ptr<bench::KilnKernel>> others_top;
    for (size_t i = 1; i < r.top.size(); ++i) {
      others_top.push_back(std::make_unique<bench::KilnKernel>(*d.task, layer, r.top[i].second, p, build));
    }
    double onednn = 1e30, def_s = 1e30, best_s = 1e30, ds_s = 1e30, top_s = 1e30, peak = 0;
    for (int round = 0; round < kRounds; ++round) {
      peak = std::max(peak, bench::fma_peak_gflops(0.1));
      onednn = std::min(onednn, peer.time());
      if (best.ok()) best_s = std::min(best_s, best.time());
      if (dflt.ok()) def_s = std::min(def_s, dflt.time());
      if (ds && ds->ok()) ds_s = std::min(ds_s, ds->time());
      for (auto &k : others_top) {
        if (k->ok()) top_s = std::min(top_s, k->time());
      }
    }
    top_s = std::min(top_s, best_s);
    std::string problem;
    if (!best.ok()) {
      problem = "best_config_failed";
    } else if (!bench::matches(best.output(), peer.output(), d.task->flop())) {
      problem = "best_config_differs_from_onednn";
    }
    const double flop = d.task->flop();
    const double g_best = flop / best_s / 1e9, g_def = flop / def_s / 1e9, g_dnn = flop / onednn / 1e9;
    const double g_ds = d.best_config ? flop / ds_s / 1e9 : 0;
    const double g_top = flop / top_s / 1e9;
    const double known = std::max(d.best_gflops, r.best_gflops);
    const std::optional<int64_t> t95 = trials_to(r.curve, 0.95 * known), s95 = trials_to(r.search_curve, 0.95 * known);
    std::vector<double> frac;
    for (double g : r.curve) frac.push_back(g / known);
    pic->real[d.w.label] = frac;
    if (best.ok()) {
      ratio_onednn.push_back(g_best / g_dnn);
      ratio_default.push_back(g_best / g_def);
      if (g_ds > 0) vs_dataset.push_back(g_best / g_ds);
      top_onednn.push_back(g_top / g_dnn);
    }
    peak_onednn.push_back(peak / g_dnn);
    if (g_ds > 0) dataset_onednn.push_back(g_ds / g_dnn);
    std::printf(
        "tuner_real workload=%s trials=%lld best_gflops=%.2f tuner_best_gflops=%.2f default_gflops=%.2f "
        "onednn_gflops=%.2f ratio_onednn=%.3f ratio_default=%.3f dataset_best_gflops=%.2f "
        "dataset_best_inproc_gflops=%.2f best_vs_dataset=%.3f trials_to_95=%s search_trials_to_95=%s wall_s=%.1f "
        "measure_s=%.1f tuner_default_gflops=%.2f load=%s top%zu_gflops=%.2f top_ratio_onednn=%.3f "
        "confirmed=%lld peak_gflops=%.1f of_peak=%.3f onednn_of_peak=%.3f%s%s\n",
        d.w.label.c_str(), static_cast<long long>(r.trials), g_best, r.best_gflops, g_def, g_dnn, g_best / g_dnn,
        g_best / g_def, d.best_gflops, g_ds, g_ds > 0 ? g_best / g_ds : 0.0, to95_text(t95).c_str(),
        to95_text(s95).c_str(), job_wall, r.measure_s, r.default_gflops, load.c_str(), r.top.size(), g_top,
        g_top / g_dnn, static_cast<long long>(r.confirmed), peak, g_best / peak, g_dnn / peak,
        problem.empty() ? "" : " warning=", problem.c_str());
    print_overhead("real", d.w.label, s.name, {r});
    std::fflush(stdout);
    if (!o.keep) {
      fs::remove(path);
      fs::remove(path + "-wal");
      fs::remove(path + "-shm");
    }

    // The other strategies and seeds (--real-strategies, --real-seeds), in turns.
    std::map<std::string, std::vector<JobResult>> jobs_by;  // strategy -> per seed
    for (int seed = 1; seed <= o.real_seeds; ++seed) {
      for (const std::string &name : o.real_strategies) {
        if (name == s.name && seed == 1) {
          jobs_by[name].push_back(r);
          continue;
        }
        const std::string extra = o.work_dir + "/real-" + std::to_string(index++) + ".db";
        const Strategy es = strategy_of(name);
        std::fprintf(stderr, "tuner_bench: real job %s, %s, seed %d\n", d.w.label.c_str(), name.c_str(), seed);
        const std::string before = load_average();
        JobResult e = run_job(o, extra, es.transfer ? others : std::string(), local, d, es, static_cast<uint64_t>(seed),
                              trials, false);
        std::printf(
            "tuner_real_run workload=%s strategy=%s seed=%d trials=%lld tuner_best_gflops=%.2f wall_s=%.1f "
            "load=%s/%s\n",
            d.w.label.c_str(), name.c_str(), seed, static_cast<long long>(e.trials), e.best_gflops, e.wall_s,
            before.c_str(), load_average().c_str());
        std::fflush(stdout);
        jobs_by[name].push_back(std::move(e));
        if (!o.keep) {
          fs::remove(extra);
          fs::remove(extra + "-wal");
          fs::remove(extra + "-shm");
        }
      }
    }
    if (jobs_by.size() > 1 || o.real_seeds > 1) {
      double best_known = d.best_gflops;
      for (const auto &[name, jobs] : jobs_by) {
        for (const JobResult &j : jobs) best_known = std::max(best_known, j.best_gflops);
      }
      std::map<std::string, StrategyCurves> by;
      for (const auto &[name, jobs] : jobs_by) {
        StrategyCurves &sc = by[name];
        sc.to95.trials = sc.search_to95.trials = trials;
        for (const JobResult &j : jobs) {
          std::vector<double> f, sf;
          for (double g : j.curve) f.push_back(g / best_known);
          for (double g : j.search_curve) sf.push_back(g / best_known);
          sc.to95.per_seed.push_back(trials_to(f, 0.95));
          sc.search_to95.per_seed.push_back(trials_to(sf, 0.95));
          sc.fractions.push_back(std::move(f));
        }
        const std::vector<double> mean = sc.mean_curve();
        pic->real_by[d.w.label][name] = mean;
        std::printf(
            "tuner_real_strategy workload=%s strategy=%s seeds=%zu best_known_gflops=%.2f trials_to_95=%s "
            "reached=%d/%zu trials_to_95_each=%s search_trials_to_95=%s search_reached=%d/%zu "
            "search_trials_to_95_each=%s",
            d.w.label.c_str(), name.c_str(), jobs.size(), best_known, sc.to95.mean_text().c_str(), sc.to95.reached(),
            jobs.size(), sc.to95.each().c_str(), sc.search_to95.mean_text().c_str(), sc.search_to95.reached(),
            jobs.size(), sc.search_to95.each().c_str());
        for (size_t n : {50, 100, 200, 300}) {
          if (static_cast<int64_t>(n) <= trials) std::printf(" best_frac@%zu=%.3f", n, at(mean, n));
        }
        std::printf("\n");
      }
      if (by.count("random") && by.size() > 1) {
        ++compared;
        std::printf("tuner_real_ratio workload=%s", d.w.label.c_str());
        print_random_ratios(by.at("random"), by, &compare_ratios, &compare_censored);
        std::printf("\n");
      }
      std::fflush(stdout);
    }
    all_jobs.push_back(std::move(r));
  }
  if (compared > 0) {
    std::printf("tuner_real_compare_summary workloads=%d seeds=%d", compared, o.real_seeds);
    print_ratio_summary(compare_ratios, compare_censored);
    std::printf(" goal_random_over_xgb>=3\n");
  }
  if (!ratio_onednn.empty()) {
    print_overhead("real", "all", s.name, all_jobs);
    std::printf(
        "tuner_summary workloads=%zu geomean_ratio_onednn=%.3f geomean_ratio_default=%.3f "
        "geomean_best_vs_dataset=%.3f geomean_dataset_best_ratio_onednn=%.3f geomean_top_ratio_onednn=%.3f "
        "geomean_peak_over_onednn=%.3f goal_ratio_onednn>=1.1\n",
        ratio_onednn.size(), geomean(ratio_onednn), geomean(ratio_default), geomean(vs_dataset),
        geomean(dataset_onednn), geomean(top_onednn), geomean(peak_onednn));
  }
}

void write_picture(const std::string &path, const std::vector<WorkloadData> &data, const Picture &pic) {
  const std::vector<std::pair<std::string, std::string>> colors = {{"random", "#b2182b"},
                                                                   {"genetic", "#ef8a62"},
                                                                   {"xgb", "#2166ac"},
                                                                   {"xgb_transfer", "#1b7837"},
                                                                   {"real xgb_transfer (dashed)", "#000000"}};
  std::vector<bench::ChartPanel> panels;
  for (const WorkloadData &d : data) {
    if (!d.selected) continue;
    bench::ChartPanel p;
    p.title = d.w.label;
    if (pic.replay.count(d.w.label)) {
      for (const auto &[name, c] : colors) {
        auto it = pic.replay.at(d.w.label).find(name);
        if (it != pic.replay.at(d.w.label).end()) p.lines.push_back({name, it->second});
      }
    }
    if (pic.real_by.count(d.w.label)) {
      for (const auto &[name, c] : colors) {
        auto it = pic.real_by.at(d.w.label).find(name);
        if (it != pic.real_by.at(d.w.label).end()) p.lines.push_back({name, it->second, true});
      }
    } else if (pic.real.count(d.w.label)) {
      p.lines.push_back({"real xgb_transfer (dashed)", pic.real.at(d.w.label), true});
    }
    if (pic.notes.count(d.w.label)) p.note = pic.notes.at(d.w.label);
    if (!p.lines.empty()) panels.push_back(std::move(p));
  }
  bench::ChartOptions o;
  o.title = "Tuning jobs: best found / best known vs trials (replay: mean over seeds; dashed: real jobs; dotted: 95 %)";
  o.y_lo = 0.75;
  o.y_ticks = {0.8, 0.9, 1.0};
  o.reference = 0.95;
  o.colors = colors;
  o.columns = 4;
  bench::write_small_multiples(path, panels, o);
}

int run(const Options &o_in) {
  Options o = o_in;
  // A work directory for the dataset's copy and the jobs' temporary logs.
  bool made_dir = false;
  if (o.work_dir.empty()) {
    char tmpl[] = "/tmp/kiln-tuner-bench-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("cannot create a temporary directory");
    o.work_dir = tmpl;
    made_dir = true;
  } else {
    fs::create_directories(o.work_dir);
  }
  const std::string copy = o.work_dir + "/dataset.db";
  fs::copy_file(o.db, copy, fs::copy_options::overwrite_existing);
  for (const char *suffix : {"-wal"}) {
    if (fs::exists(o.db + suffix)) fs::copy_file(o.db + suffix, copy + suffix, fs::copy_options::overwrite_existing);
  }
  db::TuningDbOptions dbo;
  dbo.create = false;
  db::TuningDb dataset = db::TuningDb::open(copy, dbo);

  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  std::printf("tuner_env cpus=%d omp_threads=%s target=\"%s\" dataset=%s work_dir=%s\n", cpus,
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset", o.target.c_str(), o.db.c_str(),
              o.work_dir.c_str());

  const ops::Target target = driver::resolve_target(o.target);
  std::vector<WorkloadData> data;
  for (const bench::CostModelWorkload &w : bench::cost_model_workloads()) {
    WorkloadData d;
    d.w = w;
    // Every workload is loaded: the others of a template are the transfer set.
    d.selected = o.filters.empty() || std::any_of(o.filters.begin(), o.filters.end(), [&](const std::string &f) {
                   return w.label.find(f) != std::string::npos || w.template_name.find(f) != std::string::npos;
                 });
    d.task = std::make_unique<ops::Task>(w.template_name, w.args, target);
    d.valid = d.task->space().count_valid();
    std::set<int64_t> seen;
    db::ExportFilter filter;
    filter.workload_key = d.task->key();
    dataset.for_each_record(filter, [&](const db::Record &r) {
      if (r.error == db::ErrorClass::kInfra || r.config.space != d.task->space().fingerprint()) return;
      if (!seen.insert(r.config.index).second) return;
      d.gflops.push_back(r.valid() && r.mean() > 0 ? d.task->flop() / r.mean() / 1e9 : 0.0);
      if (!r.valid() || !(r.mean() > 0)) return;
      const double g = d.task->flop() / r.mean() / 1e9;
      if (g > d.best_gflops) {
        d.best_gflops = g;
        d.best_config = d.task->space().from_record(r.config);
      }
      if (r.config.index == d.task->default_config().index()) d.default_gflops = std::max(d.default_gflops, g);
    });
    d.measured = static_cast<int64_t>(seen.size());
    if (d.measured >= d.valid) {
      d.exhaustive = true;
      for (const autotune::Config &c : d.task->space().enumerate()) {
        if (!seen.count(c.index())) {
          d.exhaustive = false;
          break;
        }
      }
    }
    std::ostringstream out;
    dataset.export_records(out, db::ExportFormat::kKiln, filter);
    d.records = out.str();
    if (!d.selected) {
      data.push_back(std::move(d));
      continue;
    }
    std::printf(
        "tuner_space workload=%s template=%s valid=%lld measured=%lld exhaustive=%d best_gflops=%.2f "
        "default_gflops=%.2f random_expected_search_trials_to_95=%s\n",
        w.label.c_str(), w.template_name.c_str(), static_cast<long long>(d.valid), static_cast<long long>(d.measured),
        d.exhaustive ? 1 : 0, d.best_gflops, d.default_gflops,
        random_expectation_text(d, 0.95 * d.best_gflops).c_str());
    std::fflush(stdout);
    if (d.measured == 0) {
      std::printf("tuner_skip workload=%s reason=no_records_in_dataset\n", w.label.c_str());
      continue;
    }
    data.push_back(std::move(d));
  }

  Picture pic;
  if (o.replay) replay_mode(o, dataset, data, &pic);
  if (o.real) real_mode(o, data, &pic);
  if (!o.svg.empty()) write_picture(o.svg, data, pic);
  if (made_dir && !o.keep) fs::remove_all(o.work_dir);
  return 0;
}

[[noreturn]] void usage(const std::string &problem) {
  std::fprintf(stderr,
               "tuner_bench: %s\nusage: tuner_bench --replay DATASET [--seeds N] [--replay-trials N] "
               "[--strategies random,genetic,xgb,xgb_transfer]\n"
               "       tuner_bench --real --db DATASET [--trials N] [--trials-for LABEL=N,...] "
               "[--real-strategies LIST] [--real-seeds N] [--confirm-top K] [--confirm-repeats R]\n"
               "       common: [--workloads SUBSTR,...] [--svg PATH] [--batch B] [--plan-size P] [--work-dir DIR] "
               "[--keep] [--target T] [--transfer-cap N]\n",
               problem.c_str());
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--real") {
      o.real = true;
      continue;
    }
    if (flag == "--keep") {
      o.keep = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--replay") {
      o.replay = true;
      o.db = value;
    } else if (flag == "--db") {
      o.db = value;
    } else if (flag == "--seeds") {
      o.seeds = std::stoi(value);
    } else if (flag == "--replay-trials") {
      o.replay_trials = std::stoll(value);
    } else if (flag == "--strategies") {
      o.strategies = split_list(value);
      for (const std::string &s : o.strategies) strategy_of(s);
    } else if (flag == "--trials") {
      o.real_trials = std::stoll(value);
    } else if (flag == "--trials-for") {
      for (const std::string &item : split_list(value)) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos) usage("--trials-for takes LABEL=N,...");
        o.real_trials_for[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
      }
    } else if (flag == "--real-strategies") {
      o.real_strategies = split_list(value);
      for (const std::string &s : o.real_strategies) strategy_of(s);
    } else if (flag == "--confirm-top") {
      o.confirm_top = std::stoll(value);
    } else if (flag == "--confirm-repeats") {
      o.confirm_repeats = std::stoll(value);
    } else if (flag == "--real-seeds") {
      o.real_seeds = std::stoi(value);
    } else if (flag == "--batch") {
      o.batch = std::stoll(value);
    } else if (flag == "--plan-size") {
      o.plan_size = std::stoll(value);
    } else if (flag == "--transfer-cap") {
      o.transfer_cap = std::stoll(value);
    } else if (flag == "--workloads") {
      o.filters = split_list(value);
    } else if (flag == "--svg") {
      o.svg = value;
    } else if (flag == "--work-dir") {
      o.work_dir = value;
    } else if (flag == "--target") {
      o.target = value;
    } else {
      usage("unknown option " + flag);
    }
  }
  if (!o.replay && !o.real) usage("give --replay DATASET, --real, or both");
  if (o.db.empty()) usage("--real needs the dataset (--db DATASET) for transfer learning and the best known configs");
  if (o.seeds < 1 || o.replay_trials < 1 || o.real_trials < 1 || o.batch < 1 || o.real_seeds < 1) {
    usage("--seeds, --replay-trials, --trials, --real-seeds and --batch must be positive");
  }
  return o;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--measure-worker") == 0) return kiln::rpc::measure_worker_main();
  // oneDNN (real mode) on one thread: its OpenMP runtime reads OMP_NUM_THREADS when it loads.
  if (kiln::bench::set_onednn_single_thread_env()) execv("/proc/self/exe", argv);
  kiln::deploy::set_num_threads(1);
  try {
    return run(parse(argc, argv));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "tuner_bench: error: %s\n", e.what());
    return 1;
  }
}
