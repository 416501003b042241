#include "tuner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "contracts/error.h"
#include "cost_model/features.h"

namespace kiln::tuner {

using autotune::Config;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

SearchStrategy::SearchStrategy(const ops::Task &task, SearchOptions options)
    : task_(task), options_(std::move(options)), rng_(options_.seed) {}

SearchStrategy::~SearchStrategy() = default;

std::vector<Config> SearchStrategy::next_batch(size_t n) {
  const double t0 = now_s();
  ++stats_.batches;
  if (n == 0 || exhausted()) {
    stats_.propose_s += now_s() - t0;
    return {};
  }
  std::vector<Config> out = propose(n);
  std::vector<Config> fresh;
  for (Config &c : out) {
    KILN_CHECK(task_.space().is_valid(c), name(), " proposed an invalid config ", c.to_string());
    if (visited_.insert(c.index()).second) fresh.push_back(std::move(c));
    if (fresh.size() == n) break;
  }
  stats_.propose_s += now_s() - t0;
  return fresh;
}

void SearchStrategy::update(const std::vector<Trial> &trials) {
  const double t0 = now_s();
  for (const Trial &t : trials) {
    visited_.insert(t.config.index());
    trials_.push_back(t);
  }
  on_update(trials);
  stats_.update_s += now_s() - t0;
}

bool SearchStrategy::visited(const Config &config) const { return visited_.count(config.index()) != 0; }

bool SearchStrategy::exhausted() const {
  if (valid_count_ < 0) valid_count_ = task_.space().count_valid();
  return static_cast<int64_t>(visited_.size()) >= valid_count_;
}

std::optional<Trial> SearchStrategy::best() const {
  std::optional<Trial> b;
  for (const Trial &t : trials_) {
    if (t.valid && (!b || t.gflops > b->gflops)) b = t;
  }
  return b;
}

std::vector<Config> SearchStrategy::random_unvisited(size_t n, const std::unordered_set<int64_t> &also_excluded) {
  std::vector<Config> out;
  std::unordered_set<int64_t> taken;
  auto usable = [&](const Config &c) {
    return !visited_.count(c.index()) && !also_excluded.count(c.index()) && !taken.count(c.index());
  };
  // Rejection sampling while most of the space is unvisited; a scan of the valid configs once it
  // is not.
  for (size_t tries = 0; out.size() < n && tries < 64 * n + 64; ++tries) {
    Config c = task_.space().sample(rng_);
    if (usable(c)) {
      taken.insert(c.index());
      out.push_back(std::move(c));
    }
  }
  if (out.size() < n) {
    std::vector<Config> rest;
    task_.space().for_each_valid([&](const Config &c) {
      if (usable(c)) rest.push_back(c);
      return rest.size() < 200000;
    });
    std::shuffle(rest.begin(), rest.end(), rng_);
    for (Config &c : rest) {
      if (out.size() == n) break;
      taken.insert(c.index());
      out.push_back(std::move(c));
    }
  }
  return out;
}

namespace {

class RandomStrategy : public SearchStrategy {
 public:
  using SearchStrategy::SearchStrategy;
  std::string name() const override { return "random"; }

 protected:
  std::vector<Config> propose(size_t n) override { return random_unvisited(n); }
};

class GridStrategy : public SearchStrategy {
 public:
  using SearchStrategy::SearchStrategy;
  std::string name() const override { return "grid"; }

 protected:
  std::vector<Config> propose(size_t n) override {
    std::vector<Config> out;
    const int64_t size = task_.space().size();
    for (; cursor_ < size && out.size() < n; ++cursor_) {
      Config c = task_.space().get(cursor_);
      if (task_.space().is_valid(c) && !visited(c)) out.push_back(std::move(c));
    }
    return out;
  }

 private:
  int64_t cursor_ = 0;
};

// TVM's GATuner: generations of `population` configs; the next generation keeps the elites of all
// trials so far and fills up with children of fitness-weighted parents (uniform crossover of the
// knob digits, then each digit mutated with mutation_prob).
class GeneticStrategy : public SearchStrategy {
 public:
  using SearchStrategy::SearchStrategy;
  std::string name() const override { return "genetic"; }

 protected:
  std::vector<Config> propose(size_t n) override {
    if (queue_.empty()) next_generation();
    std::vector<Config> out;
    while (!queue_.empty() && out.size() < n) {
      if (!visited(queue_.back())) out.push_back(queue_.back());
      queue_.pop_back();
    }
    if (out.size() < n) {
      std::unordered_set<int64_t> chosen;
      for (const Config &c : out) chosen.insert(c.index());
      for (Config &c : random_unvisited(n - out.size(), chosen)) out.push_back(std::move(c));
    }
    return out;
  }

 private:
  void next_generation() {
    const size_t pop = std::max<size_t>(2, options_.population);
    std::vector<const Trial *> measured;
    for (const Trial &t : trials()) measured.push_back(&t);
    if (measured.size() < 2) {
      queue_ = random_unvisited(pop);
      return;
    }
    std::sort(measured.begin(), measured.end(), [](const Trial *a, const Trial *b) { return a->gflops > b->gflops; });
    std::vector<double> weight;
    for (const Trial *t : measured) weight.push_back(t->gflops + 1e-9);
    std::discrete_distribution<size_t> pick(weight.begin(), weight.end());
    const std::vector<autotune::Knob> &knobs = task_.space().knobs();
    std::unordered_set<int64_t> chosen;
    std::vector<Config> children;
    // Elites were measured already; their neighbourhood is where the children come from.
    for (size_t tries = 0; children.size() < pop && tries < pop * 20; ++tries) {
      const Config &a = measured[pick(rng_)]->config;
      const Config &b = measured[pick(rng_)]->config;
      std::vector<int64_t> digits(knobs.size());
      std::uniform_real_distribution<double> u(0, 1);
      for (size_t k = 0; k < knobs.size(); ++k) {
        digits[k] = u(rng_) < 0.5 ? a.digits()[k] : b.digits()[k];
        if (u(rng_) < options_.mutation_prob) digits[k] = autotune::uniform_index(rng_, knobs[k].size());
      }
      Config c = task_.space().from_digits(digits);
      if (!task_.space().is_valid(c) || visited(c) || chosen.count(c.index())) continue;
      chosen.insert(c.index());
      children.push_back(std::move(c));
    }
    if (children.size() < pop) {
      for (Config &c : random_unvisited(pop - children.size(), chosen)) children.push_back(std::move(c));
    }
    std::reverse(children.begin(), children.end());
    queue_ = std::move(children);
  }

  std::vector<Config> queue_;  // the current generation, consumed from the back
};

// The model-based strategy (see search.h).
class XgbStrategy : public SearchStrategy {
 public:
  XgbStrategy(const ops::Task &task, SearchOptions options) : SearchStrategy(task, std::move(options)) {
    model_ = std::make_unique<cost_model::XgbCostModel>(options_.xgb);
    if (options_.prior) model_->set_prior(options_.prior);
  }
  std::string name() const override { return "xgb"; }

 protected:
  std::vector<Config> propose(size_t n) override {
    std::vector<Config> out;
    while (out.size() < n) {
      if (plan_.empty()) {
        build_plan();
        if (plan_.empty()) break;
      }
      while (!plan_.empty() && out.size() < n) {
        if (!visited(plan_.back())) out.push_back(plan_.back());
        plan_.pop_back();
      }
    }
    return out;
  }

 private:
  // Features of configs, extracted once per config; a config that cannot be lowered gets an
  // empty vector (and is never proposed by the model).
  std::vector<const std::vector<float> *> features_of(const std::vector<Config> &configs) {
    std::vector<Config> missing;
    std::unordered_set<int64_t> seen;
    for (const Config &c : configs) {
      if (!cache_.count(c.index()) && seen.insert(c.index()).second) missing.push_back(c);
    }
    if (!missing.empty()) {
      if (cache_.size() + missing.size() > 200000) cache_.clear();
      const cost_model::FeatureBatch b =
          cost_model::extract_features(extractor_, task_, missing, options_.feature_threads);
      const size_t len = b.spec.length;
      for (size_t i = 0; i < missing.size(); ++i) {
        std::vector<float> &row = cache_[missing[i].index()];
        if (b.errors[i].empty()) row.assign(b.features.begin() + i * len, b.features.begin() + (i + 1) * len);
      }
    }
    std::vector<const std::vector<float> *> out;
    for (const Config &c : configs) out.push_back(&cache_.at(c.index()));
    return out;
  }

  // Model scores of configs; -inf for one that cannot be lowered.
  std::vector<double> score(const std::vector<Config> &configs) {
    const std::vector<const std::vector<float> *> f = features_of(configs);
    const cost_model::FeatureSpec spec = cost_model::IrFeatureExtractor::ir_spec();
    std::vector<float> rows;
    std::vector<size_t> where;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i]->empty()) continue;
      rows.insert(rows.end(), f[i]->begin(), f[i]->end());
      where.push_back(i);
    }
    std::vector<double> out(configs.size(), -std::numeric_limits<double>::infinity());
    if (where.empty()) return out;
    const std::vector<float> s = model_->predict(spec, rows);
    for (size_t k = 0; k < where.size(); ++k) out[where[k]] = s[k];
    return out;
  }

  void refit() {
    if (trials().size() == fitted_rows_) return;
    std::vector<Config> configs;
    for (const Trial &t : trials()) configs.push_back(t.config);
    const std::vector<const std::vector<float> *> f = features_of(configs);
    cost_model::Samples s;
    s.spec = cost_model::IrFeatureExtractor::ir_spec();
    for (size_t i = 0; i < trials().size(); ++i) {
      if (f[i]->empty()) continue;
      const Trial &t = trials()[i];
      s.add(*f[i], t.valid ? t.gflops * 1e9 : 0.0, task_.key());
    }
    if (s.rows() == 0) return;
    model_->fit(s);
    ++stats_.fits;
    fitted_rows_ = trials().size();
  }

  void build_plan() {
    ++stats_.plans;
    const double t0 = now_s();
    refit();
    stats_.refit_s += now_s() - t0;
    const size_t plan = std::max<size_t>(1, options_.plan_size);
    if (!model_->trained() && !options_.prior) {
      plan_ = random_unvisited(plan);
      return;
    }
    const size_t keep = std::max(plan, static_cast<size_t>(options_.diversity * static_cast<double>(plan)));
    std::map<int64_t, std::pair<double, Config>> top;  // index -> (score, config)
    auto offer = [&](const Config &c, double s) {
      if (visited(c) || !std::isfinite(s)) return false;
      if (top.count(c.index())) return false;
      if (top.size() < keep) {
        top.emplace(c.index(), std::make_pair(s, c));
        return true;
      }
      auto worst = std::min_element(top.begin(), top.end(),
                                    [](const auto &a, const auto &b) { return a.second.first < b.second.first; });
      if (s <= worst->second.first) return false;
      top.erase(worst);
      top.emplace(c.index(), std::make_pair(s, c));
      return true;
    };

    if (task_.space().count_valid() <= options_.exhaustive_limit) {
      if (all_valid_.empty()) all_valid_ = task_.space().enumerate();
      std::vector<Config> unvisited;
      for (const Config &c : all_valid_) {
        if (!visited(c)) unvisited.push_back(c);
      }
      const std::vector<double> s = score(unvisited);
      for (size_t i = 0; i < unvisited.size(); ++i) offer(unvisited[i], s[i]);
    } else {
      anneal(offer);
    }

    // Diversity-aware pick among the top candidates: each step takes the candidate with the best
    // normalised score plus the share of its knob values not yet in the plan.
    std::vector<std::pair<double, Config>> cands;
    for (auto &[index, sc] : top) cands.push_back(sc);
    std::sort(cands.begin(), cands.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
    const size_t greedy = plan - static_cast<size_t>(std::floor(options_.epsilon * static_cast<double>(plan)));
    std::vector<Config> chosen;
    std::set<std::pair<size_t, int64_t>> covered;
    std::vector<bool> used(cands.size(), false);
    const double hi = cands.empty() ? 0 : cands.front().first, lo = cands.empty() ? 0 : cands.back().first;
    const size_t knobs = task_.space().knobs().size();
    while (chosen.size() < greedy && chosen.size() < cands.size()) {
      double best = -1e300;
      size_t pick = 0;
      for (size_t i = 0; i < cands.size(); ++i) {
        if (used[i]) continue;
        size_t fresh = 0;
        for (size_t k = 0; k < knobs; ++k) fresh += covered.count({k, cands[i].second.digits()[k]}) ? 0 : 1;
        const double norm = hi > lo ? (cands[i].first - lo) / (hi - lo) : 1.0;
        const double value = norm + 0.5 * static_cast<double>(fresh) / static_cast<double>(std::max<size_t>(1, knobs));
        if (value > best) {
          best = value;
          pick = i;
        }
      }
      used[pick] = true;
      for (size_t k = 0; k < knobs; ++k) covered.insert({k, cands[pick].second.digits()[k]});
      chosen.push_back(cands[pick].second);
    }
    std::unordered_set<int64_t> taken;
    for (const Config &c : chosen) taken.insert(c.index());
    for (Config &c : random_unvisited(plan - chosen.size(), taken)) chosen.push_back(std::move(c));
    std::reverse(chosen.begin(), chosen.end());
    plan_ = std::move(chosen);
  }

  // Parallel simulated-annealing chains over neighbouring configs, scored by the model; the chains
  // persist across plans. Every config a chain visits is offered to the plan's candidates.
  template <typename Offer>
  void anneal(Offer &offer) {
    const size_t n = std::max<size_t>(1, options_.sa_chains);
    if (chains_.empty()) {
      for (size_t i = 0; i < n; ++i) chains_.push_back(task_.space().sample(rng_));
    }
    std::vector<double> current = score(chains_);
    for (size_t i = 0; i < chains_.size(); ++i) offer(chains_[i], current[i]);
    std::uniform_real_distribution<double> u(0, 1);
    int unchanged = 0;
    const int iterations = std::max(1, options_.sa_iterations);
    for (int it = 0; it < iterations && unchanged < options_.sa_early_stop; ++it) {
      const double temperature = 1.0 - static_cast<double>(it) / iterations;
      std::vector<Config> next = chains_;
      for (Config &c : next) {
        if (std::optional<Config> nb = task_.space().neighbour(c, rng_)) c = *nb;
      }
      const std::vector<double> s = score(next);
      bool changed = false;
      for (size_t i = 0; i < chains_.size(); ++i) {
        changed = offer(next[i], s[i]) || changed;
        const double delta = s[i] - current[i];
        if (std::isfinite(s[i]) && (delta >= 0 || u(rng_) < std::exp(std::min(0.0, delta / (temperature + 1e-5))))) {
          chains_[i] = next[i];
          current[i] = s[i];
        }
      }
      unchanged = changed ? 0 : unchanged + 1;
    }
  }

  cost_model::IrFeatureExtractor extractor_;
  std::unique_ptr<cost_model::XgbCostModel> model_;
  std::unordered_map<int64_t, std::vector<float>> cache_;
  std::vector<Config> plan_;  // consumed from the back
  std::vector<Config> chains_;
  std::vector<Config> all_valid_;
  size_t fitted_rows_ = 0;
};

}  // namespace

std::vector<std::string> strategy_names() { return {"random", "grid", "genetic", "xgb"}; }

std::unique_ptr<SearchStrategy> make_strategy(const std::string &name, const ops::Task &task, SearchOptions options) {
  if (name == "random") return std::make_unique<RandomStrategy>(task, std::move(options));
  if (name == "grid") return std::make_unique<GridStrategy>(task, std::move(options));
  if (name == "genetic") return std::make_unique<GeneticStrategy>(task, std::move(options));
  if (name == "xgb") return std::make_unique<XgbStrategy>(task, std::move(options));
  throw UserError("unknown search strategy '" + name + "'; the strategies are random, grid, genetic and xgb");
}

}  // namespace kiln::tuner
