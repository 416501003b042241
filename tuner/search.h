#pragma once
// Search strategies: which configs of a task to measure next. One interface, SearchStrategy:
// next_batch(n) proposes up to n valid configs that were never proposed or told before, update()
// tells it what they measured. Strategies (make_strategy):
//   random   uniform among the valid configs, without replacement
//   grid     the valid configs in index order
//   genetic  TVM's GATuner: a population, elites kept, children by crossover of fitness-weighted
//            parents and per-knob mutation
//   xgb      model-based: the XGBoost cost model on IR features (cost_model/), refit from all of
//            the task's trials every plan (plans grow from 16 configs to plan_size); a plan is the
//            best unvisited configs the model finds, by scoring every valid config when the space
//            is small and otherwise from a shortlist that simulated-annealing chains, persistent
//            across plans, find on a cheap proxy (a model of the knob values alone); the plan is
//            picked for diversity among the top candidates and its last 5 % are random
//            (epsilon-greedy). An optional prior (transfer learning from the tuning log) ranks the
//            first plan.
// Constraints of the space are never violated: every proposal comes from the space's valid
// configs. A config is never proposed twice, nor one told through update() (a resumed job tells
// the strategy what the log already holds before asking for more).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/ops/registry.h"
#include "cost_model/cost_model.h"

namespace kiln::tuner {

// A measured config as a strategy sees it.
struct Trial {
  autotune::Config config;
  bool valid = false;  // measured without error
  double gflops = 0;   // when valid: the task's FLOPs / mean seconds / 1e9
};

struct SearchOptions {
  uint64_t seed = 0;

  // genetic
  size_t population = 64;
  size_t elites = 3;
  double mutation_prob = 0.1;

  // xgb
  // Without a prior, a plan holds trials / 2 configs, at least min_plan_size and at most
  // plan_size: the first plans are small, so that the model is fit after few trials, the later
  // ones large, so that refits (tens of milliseconds each) stay rare. With a prior every plan
  // holds plan_size.
  size_t plan_size = 64;
  size_t min_plan_size = 16;
  double epsilon = 0.05;  // the random share of each plan
  // Spaces with at most this many valid configs are scored exhaustively (their features are
  // extracted once and cached); larger ones are searched by annealing.
  int64_t exhaustive_limit = 2048;
  size_t sa_chains = 64;
  int sa_iterations = 40;  // per plan; the chains persist across plans
  int sa_early_stop = 8;   // iterations without a change of the top candidates
  // Large spaces, once the model has been fit: the chains anneal on a proxy (an XGBoost model of
  // the knob values alone, refit with the model), which costs no lowering, for up to
  // proxy_iterations steps per plan; the proxy's best shortlist * plan_size configs, with the last
  // plan's runners-up, are then lowered and scored by the model. 0: anneal on the model itself.
  size_t shortlist = 4;
  int proxy_iterations = 100;
  double diversity = 2.0;  // the plan is picked among the top diversity * plan_size candidates
  cost_model::XgbOptions xgb;
  std::shared_ptr<const cost_model::XgbCostModel> prior;  // transfer learning; may be null
  int feature_threads = 0;                                // 0: one per core
  // Candidates whose features are kept (least recently used dropped first; about 3.5 KB each).
  // The measured configs' features are kept apart, for every refit.
  size_t feature_cache = 16384;
};

// What a strategy has spent so far, in wall seconds on the thread that calls it: for progress
// reports and the tuner benchmark (bench/tuner), which reports the search's share of the tuner's
// overhead per trial and the model's refit time per plan.
struct SearchStats {
  int64_t batches = 0;         // next_batch calls
  double propose_s = 0;        // inside next_batch: for xgb the plans (features, refits, scoring) included
  double update_s = 0;         // inside update()
  int64_t plans = 0;           // xgb: plans built
  int64_t fits = 0;            // xgb: model fits (a plan refits when trials were added since the last)
  double refit_s = 0;          // xgb: refitting at the start of each plan (features of new trials, the
                               // model's fit and the proxy's)
  int64_t featurized = 0;      // xgb: candidates lowered for their features (cache misses)
  double feature_s = 0;        // xgb: extracting those features (wall)
  double predict_s = 0;        // xgb: the model's predictions
  double anneal_s = 0;         // xgb: annealing on the proxy, its predictions included
  double proxy_predict_s = 0;  // xgb: the proxy's predictions (part of anneal_s)
};

class SearchStrategy {
 public:
  SearchStrategy(const ops::Task &task, SearchOptions options);
  virtual ~SearchStrategy();
  SearchStrategy(const SearchStrategy &) = delete;
  SearchStrategy &operator=(const SearchStrategy &) = delete;

  virtual std::string name() const = 0;

  // Up to `n` valid configs never proposed nor told before; fewer (possibly none) once the
  // space runs out.
  std::vector<autotune::Config> next_batch(size_t n);
  // What measured configs gave (those of next_batch, or records of the log on resume).
  void update(const std::vector<Trial> &trials);

  bool visited(const autotune::Config &config) const;
  size_t visited_count() const { return visited_.size(); }
  // Every valid config has been proposed or told.
  bool exhausted() const;
  // The fastest valid trial told so far.
  std::optional<Trial> best() const;
  const std::vector<Trial> &trials() const { return trials_; }
  const SearchStats &stats() const { return stats_; }

 protected:
  // Up to n valid configs for which visited() is false; the base marks them visited.
  virtual std::vector<autotune::Config> propose(size_t n) = 0;
  virtual void on_update(const std::vector<Trial> &trials) { (void)trials; }
  // Up to n valid, unvisited configs drawn uniformly (excluding `also_excluded`).
  std::vector<autotune::Config> random_unvisited(size_t n, const std::unordered_set<int64_t> &also_excluded = {});

  const ops::Task &task_;
  SearchOptions options_;
  std::mt19937_64 rng_;
  SearchStats stats_;

 private:
  std::unordered_set<int64_t> visited_;
  std::vector<Trial> trials_;
  mutable int64_t valid_count_ = -1;  // count_valid(), computed on first use
};

// "random", "grid", "genetic" or "xgb"; throws UserError naming the known strategies otherwise.
std::unique_ptr<SearchStrategy> make_strategy(const std::string &name, const ops::Task &task,
                                              SearchOptions options = {});
std::vector<std::string> strategy_names();

}  // namespace kiln::tuner
