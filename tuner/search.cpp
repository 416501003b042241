#include "tuner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <list>
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

// Feature rows by config index; beyond `capacity` rows the least recently used is dropped.
class FeatureCache {
 public:
  explicit FeatureCache(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}
  const std::vector<float> *get(int64_t key) {
    auto it = rows_.find(key);
    if (it == rows_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second.second);
    return &it->second.first;
  }
  void put(int64_t key, std::vector<float> row) {
    if (auto it = rows_.find(key); it != rows_.end()) {
      it->second.first = std::move(row);
      order_.splice(order_.begin(), order_, it->second.second);
      return;
    }
    order_.push_front(key);
    rows_.emplace(key, std::make_pair(std::move(row), order_.begin()));
    while (rows_.size() > capacity_) {
      rows_.erase(order_.back());
      order_.pop_back();
    }
  }
  void grow(size_t capacity) { capacity_ = std::max(capacity_, capacity); }

 private:
  size_t capacity_;
  std::list<int64_t> order_;  // most recently used first
  std::unordered_map<int64_t, std::pair<std::vector<float>, std::list<int64_t>::iterator>> rows_;
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
    pending_.clear();
    while (out.size() < n) {
      if (plan_.empty()) {
        build_plan();
        if (plan_.empty()) break;
      }
      while (!plan_.empty() && out.size() < n) {
        if (!taken(plan_.back())) {
          pending_.insert(plan_.back().index());
          out.push_back(plan_.back());
        }
        plan_.pop_back();
      }
    }
    return out;
  }

 private:
  using Row = std::vector<float>;

  // The features of configs as one row-major matrix of the configs that can be lowered, and the
  // position in `configs` of each row. Measured configs keep their features for every refit; other
  // candidates' stay in a least-recently-used cache, and the missing ones are extracted in one
  // batch (options_.feature_threads threads).
  struct Rows {
    std::vector<float> values;
    std::vector<size_t> where;
  };
  Rows rows_of(const std::vector<Config> &configs) {
    const size_t len = cost_model::IrFeatureExtractor::kLength;
    std::vector<const Row *> found(configs.size(), nullptr);
    std::vector<Config> missing;
    std::unordered_map<int64_t, size_t> missing_at;  // config index -> position in `missing`
    for (size_t i = 0; i < configs.size(); ++i) {
      const int64_t id = configs[i].index();
      if (auto it = measured_.find(id); it != measured_.end()) {
        found[i] = &it->second;
      } else if (const Row *row = cache_.get(id)) {
        found[i] = row;
      } else if (missing_at.emplace(id, missing.size()).second) {
        missing.push_back(configs[i]);
      }
    }
    cost_model::FeatureBatch batch;
    if (!missing.empty()) {
      const double t0 = now_s();
      batch = cost_model::extract_features(extractor_, task_, missing, options_.feature_threads);
      stats_.feature_s += now_s() - t0;
      stats_.featurized += static_cast<int64_t>(missing.size());
    }
    Rows out;
    out.values.reserve(configs.size() * len);
    for (size_t i = 0; i < configs.size(); ++i) {
      const float *begin = nullptr;
      if (found[i]) {
        if (!found[i]->empty()) begin = found[i]->data();
      } else {
        const size_t m = missing_at.at(configs[i].index());
        if (batch.errors[m].empty()) begin = batch.features.data() + m * len;
      }
      if (!begin) continue;
      out.values.insert(out.values.end(), begin, begin + len);
      out.where.push_back(i);
    }
    for (size_t m = 0; m < missing.size(); ++m) {
      Row row;
      if (batch.errors[m].empty()) row.assign(batch.features.begin() + m * len, batch.features.begin() + (m + 1) * len);
      cache_.put(missing[m].index(), std::move(row));
    }
    return out;
  }

  // Model scores of configs; -inf for one that cannot be lowered.
  std::vector<double> score(const std::vector<Config> &configs) {
    const Rows rows = rows_of(configs);
    std::vector<double> out(configs.size(), -std::numeric_limits<double>::infinity());
    if (rows.where.empty()) return out;
    const double t0 = now_s();
    const std::vector<float> s = model_->predict(cost_model::IrFeatureExtractor::ir_spec(), rows.values);
    stats_.predict_s += now_s() - t0;
    for (size_t k = 0; k < rows.where.size(); ++k) out[rows.where[k]] = s[k];
    return out;
  }

  void refit() {
    if (trials().size() == fitted_rows_) return;
    const size_t len = cost_model::IrFeatureExtractor::kLength;
    std::vector<Config> fresh;
    for (const Trial &t : trials()) {
      if (!measured_.count(t.config.index())) fresh.push_back(t.config);
    }
    if (!fresh.empty()) {
      const Rows rows = rows_of(fresh);
      for (const Config &c : fresh) measured_.emplace(c.index(), Row{});
      for (size_t k = 0; k < rows.where.size(); ++k) {
        measured_[fresh[rows.where[k]].index()].assign(rows.values.begin() + k * len,
                                                       rows.values.begin() + (k + 1) * len);
      }
    }
    cost_model::Samples s;
    s.spec = cost_model::IrFeatureExtractor::ir_spec();
    for (const Trial &t : trials()) {
      const Row &f = measured_.at(t.config.index());
      if (!f.empty()) s.add(f, t.valid ? t.gflops * 1e9 : 0.0, task_.key());
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
    // Without a prior: small plans while there is little to learn from, so that the model is fit
    // early and often, larger ones (up to plan_size) as the trials add up and a refit changes
    // less. A prior ranks well from the start, and a fit on a handful of trials would only blur it:
    // plans of plan_size.
    const size_t largest = std::max<size_t>(1, options_.plan_size);
    const size_t smallest = options_.prior ? largest : std::min(largest, std::max<size_t>(1, options_.min_plan_size));
    const size_t plan = std::clamp(trials().size() / 2, smallest, largest);
    if (!model_->trained() && !options_.prior) {
      plan_ = random_unvisited(plan, pending_);
      return;
    }
    const size_t keep = std::max(plan, static_cast<size_t>(options_.diversity * static_cast<double>(plan)));
    std::vector<Config> carried;                       // the last plan's runners-up, still unvisited
    std::map<int64_t, std::pair<double, Config>> top;  // index -> (score, config)
    auto offer = [&](const Config &c, double s) {
      if (taken(c) || !std::isfinite(s)) return false;
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

    for (const Config &c : carried_) {
      if (!taken(c)) carried.push_back(c);
    }
    if (valid_count() <= options_.exhaustive_limit) {
      cache_.grow(static_cast<size_t>(valid_count()));
      if (all_valid_.empty()) all_valid_ = task_.space().enumerate();
      std::vector<Config> unvisited;
      for (const Config &c : all_valid_) {
        if (!taken(c)) unvisited.push_back(c);
      }
      const size_t shortlist = options_.shortlist * plan;
      if (shortlist > 0 && unvisited.size() > 2 * shortlist && fit_proxy()) {
        // The proxy ranks every unvisited config (a table lookup per knob); the model scores its
        // best, the last plan's runners-up and the prior's sample, so that a space is not lowered
        // whole (1,960 configs of a 3x3 convolution: 9 lowerings per trial of a 200-trial job).
        const std::vector<double> p = proxy_score(unvisited);
        std::vector<size_t> order(unvisited.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shortlist), order.end(),
                          [&](size_t a, size_t b) { return p[a] > p[b]; });
        std::vector<Config> best;
        for (size_t k = 0; k < shortlist; ++k) best.push_back(unvisited[order[k]]);
        offer_shortlist(carried, std::move(best), offer);
      } else {
        const std::vector<double> s = score(unvisited);
        for (size_t i = 0; i < unvisited.size(); ++i) offer(unvisited[i], s[i]);
      }
    } else if (fit_proxy()) {
      // The candidates: the proxy's best from its annealing (see offer_shortlist).
      const double t0 = now_s();
      std::vector<Config> best = anneal_proxy(std::max(plan, options_.shortlist * plan));
      stats_.anneal_s += now_s() - t0;
      offer_shortlist(carried, std::move(best), offer);
    } else {
      if (!carried.empty()) {
        const std::vector<double> s = score(carried);
        for (size_t i = 0; i < carried.size(); ++i) offer(carried[i], s[i]);
      }
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
    std::unordered_set<int64_t> excluded = pending_;
    for (const Config &c : chosen) excluded.insert(c.index());
    for (Config &c : random_unvisited(plan - chosen.size(), excluded)) chosen.push_back(std::move(c));
    carried_.clear();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!used[i] && !excluded.count(cands[i].second.index())) carried_.push_back(cands[i].second);
    }
    std::reverse(chosen.begin(), chosen.end());
    plan_ = std::move(chosen);
  }

  // Offers the model's scores of the last plan's runners-up (`carried`), the proxy's `best` and the
  // prior's sample of the first plan, each config once, in that order.
  template <typename Offer>
  void offer_shortlist(const std::vector<Config> &carried, std::vector<Config> best, Offer &offer) {
    std::vector<Config> shortlist = carried;
    std::unordered_set<int64_t> listed;
    for (const Config &c : shortlist) listed.insert(c.index());
    for (std::vector<Config> *more : {&best, &prior_sample_}) {
      for (Config &c : *more) {
        if (listed.insert(c.index()).second) shortlist.push_back(std::move(c));
      }
    }
    prior_sample_.clear();
    const std::vector<double> s = score(shortlist);
    for (size_t i = 0; i < shortlist.size(); ++i) offer(shortlist[i], s[i]);
  }

  // A valid config that differs from c in one knob, uniform among those (rejection sampling over
  // the single-knob moves, which is cheaper than the space's enumeration of every valid move while
  // most moves are valid); nullopt when there is none.
  std::optional<Config> neighbour(const Config &c) {
    const std::vector<autotune::Knob> &knobs = task_.space().knobs();
    int64_t moves = 0;
    for (const autotune::Knob &k : knobs) moves += k.size() - 1;
    if (moves <= 0) return std::nullopt;
    for (int tries = 0; tries < 32; ++tries) {
      int64_t r = autotune::uniform_index(rng_, moves);
      size_t k = 0;
      while (r >= knobs[k].size() - 1) r -= knobs[k++].size() - 1;
      std::vector<int64_t> digits = c.digits();
      digits[k] = r >= digits[k] ? r + 1 : r;
      Config next = task_.space().from_digits(std::move(digits));
      if (task_.space().is_valid(next)) return next;
    }
    return task_.space().neighbour(c, rng_);
  }

  // Visited, or already proposed by the next_batch call in progress.
  bool taken(const Config &c) const { return visited(c) || pending_.count(c.index()) != 0; }

  int64_t valid_count() {
    if (space_valid_ < 0) space_valid_ = task_.space().count_valid();
    return space_valid_;
  }

  // The proxy's features of a config: per knob, log2 of a split's sizes, a numeric choice's
  // value, or otherwise the value's position. A row depends on the knobs' values only, so it
  // costs a table lookup per knob.
  std::vector<float> knob_row(const Config &c) {
    const std::vector<autotune::Knob> &knobs = task_.space().knobs();
    if (knob_table_.empty()) {
      knob_table_.resize(knobs.size());
      for (size_t k = 0; k < knobs.size(); ++k) {
        for (int64_t d = 0; d < knobs[k].size(); ++d) {
          const autotune::Json &v = knobs[k].entities[static_cast<size_t>(d)];
          std::vector<float> f;
          if (knobs[k].kind == autotune::KnobKind::Split && v.is_array()) {
            for (const autotune::Json &x : v.as_array()) {
              f.push_back(static_cast<float>(std::log2(std::max<double>(1.0, static_cast<double>(x.as_int())))));
            }
          } else if (knobs[k].kind == autotune::KnobKind::Choice && v.is_number()) {
            f.push_back(static_cast<float>(v.as_double()));
          } else {
            f.push_back(static_cast<float>(d));
          }
          knob_table_[k].push_back(std::move(f));
        }
      }
      // Every value of a knob gives rows of one length (the longest; shorter ones padded).
      knob_width_.assign(knobs.size(), 0);
      for (size_t k = 0; k < knobs.size(); ++k) {
        for (const std::vector<float> &f : knob_table_[k]) knob_width_[k] = std::max(knob_width_[k], f.size());
      }
    }
    std::vector<float> row;
    for (size_t k = 0; k < knobs.size(); ++k) {
      const std::vector<float> &f = knob_table_[k][static_cast<size_t>(c.digits()[k])];
      row.insert(row.end(), f.begin(), f.end());
      row.insert(row.end(), knob_width_[k] - f.size(), 0.0f);
    }
    return row;
  }

  cost_model::FeatureSpec proxy_spec() {
    size_t len = 0;
    if (knob_width_.empty() && valid_count() > 0) knob_row(task_.default_config());
    for (size_t w : knob_width_) len += w;
    return {"knob-proxy", 1, len};
  }

  std::vector<double> proxy_score(const std::vector<Config> &configs) {
    std::vector<float> rows;
    for (const Config &c : configs) {
      const std::vector<float> r = knob_row(c);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    const double t0 = now_s();
    const std::vector<float> s = proxy_->predict(proxy_spec(), rows);
    stats_.proxy_predict_s += now_s() - t0;
    return std::vector<double>(s.begin(), s.end());
  }

  // Refits the proxy, the model of the knob values alone, on every trial. Before the first trial,
  // with a prior, it learns the prior's ranking of a random sample of 2 * shortlist * plan_size
  // configs (lowered once for the prior's features; they are candidates of the first plan too), so
  // that the first plan anneals on knob values as the later ones do, rather than lowering every
  // step of every chain for the prior. False while there is nothing to fit it on. (A sample half as
  // large found dense_16x1000x2048's best later on two seeds of ten in the replay.)
  bool fit_proxy() {
    if (options_.shortlist == 0) return false;
    if (proxy_ && proxy_rows_ == trials().size()) return true;
    cost_model::Samples s;
    s.spec = proxy_spec();
    if (trials().empty()) {
      if (!options_.prior) return false;
      std::vector<Config> sample = random_unvisited(2 * options_.shortlist * options_.plan_size, pending_);
      const std::vector<double> by_prior = score(sample);
      // The prior's order as positive labels (its scores are margins of any sign); a config that
      // cannot be lowered is a failure.
      std::vector<size_t> order(sample.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return by_prior[a] < by_prior[b]; });
      std::vector<double> label(sample.size(), 0.0);
      for (size_t r = 0; r < order.size(); ++r) {
        if (std::isfinite(by_prior[order[r]])) label[order[r]] = static_cast<double>(r + 1);
      }
      for (size_t i = 0; i < sample.size(); ++i) s.add(knob_row(sample[i]), label[i], task_.key());
      prior_sample_ = std::move(sample);  // candidates of the first plan too (their features are cached)
    } else {
      for (const Trial &t : trials()) s.add(knob_row(t.config), t.valid ? t.gflops * 1e9 : 0.0, task_.key());
    }
    if (s.rows() == 0) return false;
    const double t0 = now_s();
    if (!proxy_) proxy_ = std::make_unique<cost_model::XgbCostModel>(options_.xgb);
    proxy_->fit(s);
    stats_.refit_s += now_s() - t0;
    proxy_rows_ = trials().size();
    return true;
  }

  // Simulated annealing on the proxy's scores (cheap: no lowering): the chains persist across
  // plans, and the best `keep` unvisited configs they visit are returned, best first.
  std::vector<Config> anneal_proxy(size_t keep) {
    const size_t n = std::max<size_t>(1, options_.sa_chains);
    if (chains_.empty()) {
      for (size_t i = 0; i < n; ++i) chains_.push_back(task_.space().sample(rng_));
    }
    std::map<int64_t, std::pair<double, Config>> top;
    std::multimap<double, int64_t> by_score;  // the same, ordered
    auto offer = [&](const Config &c, double s) {
      if (taken(c) || top.count(c.index())) return false;
      if (top.size() >= keep) {
        if (s <= by_score.begin()->first) return false;
        top.erase(by_score.begin()->second);
        by_score.erase(by_score.begin());
      }
      top.emplace(c.index(), std::make_pair(s, c));
      by_score.emplace(s, c.index());
      return true;
    };
    std::vector<double> current = proxy_score(chains_);
    for (size_t i = 0; i < chains_.size(); ++i) offer(chains_[i], current[i]);
    std::uniform_real_distribution<double> u(0, 1);
    int unchanged = 0;
    const int iterations = std::max(1, options_.proxy_iterations);
    for (int it = 0; it < iterations && unchanged < options_.sa_early_stop; ++it) {
      const double temperature = 1.0 - static_cast<double>(it) / iterations;
      std::vector<Config> next = chains_;
      for (Config &c : next) {
        if (std::optional<Config> nb = neighbour(c)) c = *nb;
      }
      const std::vector<double> s = proxy_score(next);
      bool changed = false;
      for (size_t i = 0; i < chains_.size(); ++i) {
        changed = offer(next[i], s[i]) || changed;
        const double delta = s[i] - current[i];
        if (delta >= 0 || u(rng_) < std::exp(std::min(0.0, delta / (temperature + 1e-5)))) {
          chains_[i] = next[i];
          current[i] = s[i];
        }
      }
      unchanged = changed ? 0 : unchanged + 1;
    }
    std::vector<Config> out;
    for (auto it = by_score.rbegin(); it != by_score.rend(); ++it) out.push_back(top.at(it->second).second);
    return out;
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
        if (std::optional<Config> nb = neighbour(c)) c = *nb;
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
  std::unordered_map<int64_t, Row> measured_;  // features of the measured configs (empty: failed)
  FeatureCache cache_{options_.feature_cache};
  std::vector<Config> plan_;  // consumed from the back
  std::vector<Config> chains_;
  std::vector<Config> all_valid_;
  std::vector<Config> carried_;          // the last plan's candidates that were not picked
  std::unordered_set<int64_t> pending_;  // proposed by the next_batch call in progress
  size_t fitted_rows_ = 0;
  int64_t space_valid_ = -1;  // valid configs of the space, counted on first use
  std::unique_ptr<cost_model::XgbCostModel> proxy_;
  size_t proxy_rows_ = 0;
  std::vector<Config> prior_sample_;  // the sample the prior ranked for the first plan's proxy
  std::vector<std::vector<std::vector<float>>> knob_table_;  // knob -> value -> features
  std::vector<size_t> knob_width_;
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
