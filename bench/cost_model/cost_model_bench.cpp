// cost_model_bench: how well the cost model ranks schedule candidates, measured on the dataset
// that cost_model_dataset wrote (measured configs of the workloads in workloads.h). The peers are
// AutoTVM's knob features (the config's entity values) and random scores, in the same run.
//
//   cost_model_bench --db PATH [--folds K] [--threads T] [--objective rank|reg] [--seeds N]
//                    [--svg PATH]   (draws the cm_tune curves)
//
// Lines (one per case, key=value):
//   cm_throughput workload= candidates= lower_per_s= extract_per_s= knob_per_s= predict_per_s=
//   cm_lower_passes workload= lower_ms= instantiate_ms= <pass>_ms= ... (per candidate; the passes
//       by name, their times summed over the feature threads as lower_ms is)
//   cm_cv workload= features=ir|knob|random folds= spearman= recall32= fit_s=
//       k-fold cross-validation inside each workload: fit on k-1 folds, rank the held-out fold;
//       the figures are averages over the folds.
//   cm_lowo workload= features= train= spearman= recall32=
//       leave one workload out: fit on the other workloads of the same template, rank every
//       config of the held-out one.
//   cm_tune workload= strategy=transfer|xgb|random trials= best_frac=
//       a replay of model-guided tuning on the held-out workload's measured configs: plans of 64
//       picked by the model's ranking from the configs not yet "measured" (their recorded
//       throughput is revealed), the model refit after each plan; best_frac is the best
//       throughput found so far over the best in the dataset, averaged over --seeds runs.
//       transfer starts from a prior fit on the template's other workloads.
//   cm_summary within_spearman_ir= within_spearman_knob= unseen_spearman_ir= ...
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/common/line_chart.h"
#include "bench/cost_model/workloads.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "cost_model/cost_model.h"
#include "cost_model/features.h"
#include "db/tuning_db.h"

namespace {

using namespace kiln;
using cost_model::CostModel;
using cost_model::FeatureSpec;
using cost_model::Samples;
using cost_model::XgbCostModel;

struct Options {
  std::string db;
  int folds = 5;
  int threads = 0;
  int seeds = 3;
  cost_model::Objective objective = cost_model::Objective::kRank;
  std::string target = "llvm -mcpu=native";
  std::string svg;  // where to draw the tuning-replay curves
};

// The replay curves of one workload: best fraction after each trial, per strategy.
struct Curves {
  std::string label;
  std::map<std::string, std::vector<double>> by_strategy;
};

// Small multiples, one panel per workload: best throughput found / best in the dataset against
// trials, one line per strategy.
void write_svg(const std::string &path, const std::vector<Curves> &all) {
  std::vector<bench::ChartPanel> panels;
  for (const Curves &c : all) {
    bench::ChartPanel p;
    p.title = c.label;
    for (const auto &[name, v] : c.by_strategy) p.lines.push_back({name, v});
    panels.push_back(std::move(p));
  }
  bench::ChartOptions o;
  o.title = "Model-guided tuning replayed on measured configs: best found / best known vs trials (lo 0.7)";
  o.colors = {{"random", "#b2182b"}, {"transfer", "#1b7837"}, {"xgb", "#2166ac"}};
  bench::write_small_multiples(path, panels, o);
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// One workload's measured configs with both kinds of features.
struct Data {
  std::string label, template_name, key;
  std::vector<double> throughput;  // FLOP/s, 0 for a failure
  FeatureSpec ir_spec, knob_spec;
  std::vector<float> ir, knob;
  size_t rows() const { return throughput.size(); }
};

std::vector<float> rows_of(const std::vector<float> &m, size_t len, const std::vector<size_t> &idx) {
  std::vector<float> out;
  out.reserve(idx.size() * len);
  for (size_t i : idx) out.insert(out.end(), m.begin() + i * len, m.begin() + (i + 1) * len);
  return out;
}

const std::vector<float> &features_of(const Data &d, const std::string &kind) { return kind == "knob" ? d.knob : d.ir; }
const FeatureSpec &spec_of(const Data &d, const std::string &kind) { return kind == "knob" ? d.knob_spec : d.ir_spec; }

void add_rows(Samples *s, const Data &d, const std::string &kind, const std::vector<size_t> &idx) {
  const FeatureSpec &spec = spec_of(d, kind);
  s->spec = spec;
  const std::vector<float> &m = features_of(d, kind);
  for (size_t i : idx) {
    s->add(std::vector<float>(m.begin() + i * spec.length, m.begin() + (i + 1) * spec.length), d.throughput[i], d.key);
  }
}

std::unique_ptr<CostModel> make_model(const std::string &kind, const Options &o, uint64_t seed) {
  if (kind == "random") return std::make_unique<cost_model::RandomModel>(seed);
  cost_model::XgbOptions x;
  x.objective = o.objective;
  x.threads = o.threads;
  x.seed = seed;
  return std::make_unique<XgbCostModel>(x);
}

struct Quality {
  double spearman = 0, recall = 0, fit_s = 0;
};

Quality evaluate(const CostModel &model, const Data &test, const std::string &kind, const std::vector<size_t> &idx) {
  const FeatureSpec &spec = spec_of(test, kind == "random" ? "ir" : kind);
  const std::vector<float> scores = model.predict(spec, rows_of(features_of(test, kind), spec.length, idx));
  std::vector<double> truth, predicted(scores.begin(), scores.end());
  for (size_t i : idx) truth.push_back(test.throughput[i]);
  return {cost_model::spearman(truth, predicted), cost_model::recall_at_k(truth, predicted, 32), 0};
}

Quality cross_validate(const Data &d, const std::string &kind, const Options &o) {
  std::vector<size_t> order(d.rows());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(17);
  std::shuffle(order.begin(), order.end(), rng);
  Quality sum;
  for (int f = 0; f < o.folds; ++f) {
    std::vector<size_t> train, test;
    for (size_t i = 0; i < order.size(); ++i) (static_cast<int>(i % o.folds) == f ? test : train).push_back(order[i]);
    std::unique_ptr<CostModel> m = make_model(kind, o, static_cast<uint64_t>(f));
    Samples s;
    add_rows(&s, d, kind == "random" ? "ir" : kind, train);
    const double t0 = now_s();
    m->fit(s);
    sum.fit_s += now_s() - t0;
    const Quality q = evaluate(*m, d, kind, test);
    sum.spearman += q.spearman;
    sum.recall += q.recall;
  }
  return {sum.spearman / o.folds, sum.recall / o.folds, sum.fit_s / o.folds};
}

std::vector<size_t> all_rows(const Data &d) {
  std::vector<size_t> idx(d.rows());
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

// A model fit on every row of `others` (same feature kind).
std::shared_ptr<XgbCostModel> fit_on(const std::vector<const Data *> &others, const std::string &kind, const Options &o,
                                     uint64_t seed) {
  cost_model::XgbOptions x;
  x.objective = o.objective;
  x.threads = o.threads;
  x.seed = seed;
  auto m = std::make_shared<XgbCostModel>(x);
  Samples s;
  for (const Data *d : others) add_rows(&s, *d, kind, all_rows(*d));
  m->fit(s);
  return m;
}

// Replays model-guided tuning on `d`: returns the best fraction found after each trial.
std::vector<double> replay(const Data &d, const std::string &strategy, std::shared_ptr<const XgbCostModel> prior,
                           const Options &o, uint64_t seed, size_t trials) {
  const size_t plan = 64;
  const double best = *std::max_element(d.throughput.begin(), d.throughput.end());
  std::mt19937_64 rng(seed);
  std::vector<size_t> measured;
  std::vector<bool> taken(d.rows(), false);
  std::vector<double> curve;
  double found = 0;
  std::unique_ptr<CostModel> model = make_model(strategy == "random" ? "random" : "ir", o, seed);
  if (strategy == "transfer") static_cast<XgbCostModel *>(model.get())->set_prior(prior);
  while (measured.size() < std::min(trials, d.rows())) {
    std::vector<size_t> pool;
    for (size_t i = 0; i < d.rows(); ++i) {
      if (!taken[i]) pool.push_back(i);
    }
    const std::vector<float> scores = model->predict(d.ir_spec, rows_of(d.ir, d.ir_spec.length, pool));
    std::vector<size_t> order(pool.size());
    std::iota(order.begin(), order.end(), 0);
    // Ties (an untrained model) are broken at random.
    std::shuffle(order.begin(), order.end(), rng);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    // The last 5% of a plan are random (epsilon-greedy), as in TVM's tuner.
    const size_t greedy = plan - plan / 20;
    std::vector<size_t> pick;
    for (size_t k = 0; k < order.size() && pick.size() < greedy; ++k) pick.push_back(pool[order[k]]);
    std::vector<size_t> rest;
    for (size_t k = greedy; k < order.size(); ++k) rest.push_back(pool[order[k]]);
    std::shuffle(rest.begin(), rest.end(), rng);
    for (size_t k = 0; k < rest.size() && pick.size() < plan; ++k) pick.push_back(rest[k]);
    for (size_t i : pick) {
      if (measured.size() >= trials) break;
      taken[i] = true;
      measured.push_back(i);
      found = std::max(found, d.throughput[i]);
      curve.push_back(found / best);
    }
    Samples s;
    add_rows(&s, d, "ir", measured);
    model->fit(s);
  }
  return curve;
}

int run(const Options &o) {
  const ops::Target target = driver::resolve_target(o.target);
  db::TuningDbOptions dbo;
  dbo.create = false;
  db::TuningDb log = db::TuningDb::open(o.db, dbo);
  cost_model::IrFeatureExtractor ir;
  cost_model::KnobFeatureExtractor knob;

  std::vector<Data> data;
  for (const bench::CostModelWorkload &w : bench::cost_model_workloads()) {
    const ops::Task task(w.template_name, w.args, target);
    Data d;
    d.label = w.label;
    d.template_name = w.template_name;
    d.key = task.key();
    std::vector<autotune::Config> configs;
    db::ExportFilter filter;
    filter.workload_key = task.key();
    log.for_each_record(filter, [&](const db::Record &r) {
      if (r.error == db::ErrorClass::kInfra) return;
      configs.push_back(task.space().from_record(r.config));
      d.throughput.push_back(r.valid() ? task.flop() / r.mean() : 0.0);
    });
    if (configs.empty()) {
      std::printf("cm_skip workload=%s reason=no_records\n", w.label.c_str());
      continue;
    }
    const cost_model::FeatureBatch fi = cost_model::extract_features(ir, task, configs, o.threads);
    const cost_model::FeatureBatch fk = cost_model::extract_features(knob, task, configs, o.threads);
    for (size_t i = 0; i < fi.rows(); ++i) {
      if (!fi.errors[i].empty() || !fk.errors[i].empty()) {
        std::fprintf(stderr, "cost_model_bench: %s: a stored config does not build: %s%s\n", w.label.c_str(),
                     fi.errors[i].c_str(), fk.errors[i].c_str());
        return 1;
      }
    }
    d.ir_spec = fi.spec;
    d.ir = fi.features;
    d.knob_spec = fk.spec;
    d.knob = fk.features;

    // Prediction throughput: a model fit on this workload, scoring every row.
    XgbCostModel m;
    Samples s;
    add_rows(&s, d, "ir", all_rows(d));
    m.fit(s);
    const double t0 = now_s();
    int reps = 0;
    while (now_s() - t0 < 0.5) {
      m.predict(d.ir_spec, d.ir);
      ++reps;
    }
    const double predict_per_s = static_cast<double>(d.rows()) * reps / (now_s() - t0);
    std::printf(
        "cm_throughput workload=%s candidates=%zu threads=%d lower_per_s=%.0f extract_per_s=%.0f "
        "ir_wall_per_s=%.0f knob_per_s=%.0f predict_per_s=%.0f\n",
        d.label.c_str(), d.rows(), o.threads, d.rows() / std::max(fi.lower_seconds, 1e-9),
        d.rows() / std::max(fi.extract_seconds, 1e-9), d.rows() / std::max(fi.wall_seconds, 1e-9),
        d.rows() / std::max(fk.wall_seconds, 1e-9), predict_per_s);
    // Where the lowering's time goes, per candidate: the passes in the order they run, and the
    // template's compute and schedule before them.
    const double rows = static_cast<double>(std::max<size_t>(d.rows(), 1));
    double passes = 0;
    std::printf("cm_lower_passes workload=%s lower_ms=%.4f", d.label.c_str(), fi.lower_seconds * 1e3 / rows);
    for (const auto &[pass, seconds] : fi.lower_pass_seconds) passes += seconds;
    std::printf(" instantiate_ms=%.4f", (fi.lower_seconds - passes) * 1e3 / rows);
    for (const auto &[pass, seconds] : fi.lower_pass_seconds)
      std::printf(" %s_ms=%.4f", pass.c_str(), seconds * 1e3 / rows);
    std::printf("\n");
    std::fflush(stdout);
    data.push_back(std::move(d));
  }

  std::map<std::string, std::vector<double>> within, unseen, within_recall, unseen_recall;
  std::vector<Curves> curves;
  for (const Data &d : data) {
    for (const std::string kind : {"ir", "knob", "random"}) {
      const Quality q = cross_validate(d, kind, o);
      within[kind].push_back(q.spearman);
      within_recall[kind].push_back(q.recall);
      std::printf("cm_cv workload=%s features=%s rows=%zu folds=%d spearman=%.3f recall32=%.3f fit_s=%.2f\n",
                  d.label.c_str(), kind.c_str(), d.rows(), o.folds, q.spearman, q.recall, q.fit_s);
      std::fflush(stdout);
    }
  }

  for (const Data &d : data) {
    std::vector<const Data *> others;
    std::string names;
    for (const Data &e : data) {
      if (&e != &d && e.template_name == d.template_name) {
        others.push_back(&e);
        names += (names.empty() ? "" : "+") + e.label;
      }
    }
    if (others.empty()) {
      std::printf("cm_lowo workload=%s skipped=no_other_workload_of_template\n", d.label.c_str());
      continue;
    }
    for (const std::string kind : {"ir", "knob", "random"}) {
      Quality q;
      if (kind == "random") {
        cost_model::RandomModel r(1);
        q = evaluate(r, d, "random", all_rows(d));
      } else {
        bool same_length = true;
        for (const Data *e : others) same_length = same_length && spec_of(*e, kind) == spec_of(d, kind);
        if (!same_length) {
          std::printf("cm_lowo workload=%s features=%s skipped=feature_length_differs\n", d.label.c_str(),
                      kind.c_str());
          continue;
        }
        q = evaluate(*fit_on(others, kind, o, 1), d, kind, all_rows(d));
      }
      unseen[kind].push_back(q.spearman);
      unseen_recall[kind].push_back(q.recall);
      std::printf("cm_lowo workload=%s features=%s train=%s spearman=%.3f recall32=%.3f\n", d.label.c_str(),
                  kind.c_str(), names.c_str(), q.spearman, q.recall);
      std::fflush(stdout);
    }

    // Tuning replay with and without transfer.
    const size_t trials = std::min<size_t>(256, d.rows());
    const std::shared_ptr<const XgbCostModel> prior = fit_on(others, "ir", o, 7);
    curves.push_back({d.label, {}});
    for (const std::string strategy : {"transfer", "xgb", "random"}) {
      std::vector<double> mean(trials, 0);
      for (int seed = 0; seed < o.seeds; ++seed) {
        const std::vector<double> c = replay(d, strategy, prior, o, static_cast<uint64_t>(seed + 1), trials);
        for (size_t t = 0; t < trials; ++t) mean[t] += c[std::min(t, c.size() - 1)] / o.seeds;
      }
      curves.back().by_strategy[strategy] = mean;
      std::printf("cm_tune workload=%s strategy=%s", d.label.c_str(), strategy.c_str());
      for (size_t t : {16, 32, 64, 128, 192, 256}) {
        if (t <= trials) std::printf(" best_frac@%zu=%.3f", t, mean[t - 1]);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }

  if (!o.svg.empty()) write_svg(o.svg, curves);
  auto avg = [](const std::vector<double> &v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  std::printf(
      "cm_summary within_spearman_ir=%.3f within_spearman_knob=%.3f within_spearman_random=%.3f "
      "within_recall32_ir=%.3f within_recall32_knob=%.3f within_recall32_random=%.3f "
      "unseen_spearman_ir=%.3f unseen_spearman_knob=%.3f unseen_spearman_random=%.3f "
      "unseen_recall32_ir=%.3f unseen_recall32_knob=%.3f unseen_recall32_random=%.3f\n",
      avg(within["ir"]), avg(within["knob"]), avg(within["random"]), avg(within_recall["ir"]),
      avg(within_recall["knob"]), avg(within_recall["random"]), avg(unseen["ir"]), avg(unseen["knob"]),
      avg(unseen["random"]), avg(unseen_recall["ir"]), avg(unseen_recall["knob"]), avg(unseen_recall["random"]));
  return 0;
}

[[noreturn]] void usage(const std::string &problem) {
  std::fprintf(stderr,
               "cost_model_bench: %s\nusage: cost_model_bench --db PATH [--folds K] [--threads T] "
               "[--objective rank|reg] [--seeds N] [--target TARGET] [--svg PATH]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--db") {
      o.db = value;
    } else if (flag == "--folds") {
      o.folds = std::stoi(value);
    } else if (flag == "--threads") {
      o.threads = std::stoi(value);
    } else if (flag == "--seeds") {
      o.seeds = std::stoi(value);
    } else if (flag == "--target") {
      o.target = value;
    } else if (flag == "--svg") {
      o.svg = value;
    } else if (flag == "--objective") {
      if (value != "rank" && value != "reg") usage("--objective is rank or reg");
      o.objective = value == "rank" ? cost_model::Objective::kRank : cost_model::Objective::kRegression;
    } else {
      usage("unknown option " + flag);
    }
  }
  if (o.db.empty()) usage("--db is required");
  if (o.folds < 2 || o.seeds < 1) usage("--folds must be at least 2 and --seeds at least 1");
  try {
    return run(o);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "cost_model_bench: error: %s\n", e.what());
    return 1;
  }
}
