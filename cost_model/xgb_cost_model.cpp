// XgbCostModel: fitting with early stopping, prediction with a prior, and the model file.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "contracts/json.h"
#include "cost_model/cost_model.h"
#include "cost_model/metrics.h"
#include "cost_model/model_file.h"
#include "cost_model/xgb_booster.h"

namespace kiln::cost_model {

namespace {

using contracts::Json;
using Clock = std::chrono::steady_clock;

// "ir features version 1 (164 values)".
std::string describe(const FeatureSpec &spec) {
  return detail::concat(spec.extractor, " features version ", spec.version, " (", spec.length, " values)");
}

const char *objective_name(Objective objective) {
  switch (objective) {
    case Objective::kRank:
      return "rank";
    case Objective::kRegression:
      return "regression";
  }
  KILN_CHECK(false, "objective ", static_cast<int>(objective));
}

const char *xgboost_objective(Objective objective) {
  switch (objective) {
    case Objective::kRank:
      return "rank:pairwise";
    case Objective::kRegression:
      return "reg:squarederror";
  }
  KILN_CHECK(false, "objective ", static_cast<int>(objective));
}

Objective objective_from_name(const std::string &name) {
  if (name == "rank") return Objective::kRank;
  if (name == "regression") return Objective::kRegression;
  throw contracts::JsonError("unknown objective '" + name + "'");
}

// A number as XGBoost reads it back exactly.
std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", v);
  return buffer;
}

// Throws CostModelError for options XGBoost does not see (XGBoost checks its own).
void check_options(const XgbOptions &o) {
  if (o.max_rounds < 1) throw CostModelError(detail::concat("xgb options: max_rounds is ", o.max_rounds, ", not >= 1"));
  if (o.early_stopping_rounds < 0) {
    throw CostModelError(
        detail::concat("xgb options: early_stopping_rounds is ", o.early_stopping_rounds, ", not >= 0"));
  }
  if (o.recall_k < 1) throw CostModelError(detail::concat("xgb options: recall_k is ", o.recall_k, ", not >= 1"));
  if (!(o.time_budget_s >= 0)) {
    throw CostModelError(detail::concat("xgb options: time_budget_s is ", o.time_budget_s, ", not >= 0"));
  }
  if (o.threads < 0) throw CostModelError(detail::concat("xgb options: threads is ", o.threads, ", not >= 0"));
}

XgbParams xgboost_params(const XgbOptions &o) {
  XgbParams params = {
      {"verbosity", "0"},
      {"objective", xgboost_objective(o.objective)},
      {"max_depth", std::to_string(o.max_depth)},
      {"gamma", number(o.gamma)},
      {"min_child_weight", number(o.min_child_weight)},
      {"subsample", number(o.subsample)},
      {"eta", number(o.eta)},
      {"lambda", number(o.lambda)},
      {"alpha", number(o.alpha)},
      {"seed", std::to_string(o.seed)},
      // The histogram method: several times faster per round than the exact one on these sizes,
      // and as deterministic.
      {"tree_method", "hist"},
  };
  // 0 leaves XGBoost's default: every core.
  if (o.threads > 0) params.emplace_back("nthread", std::to_string(o.threads));
  return params;
}

Json options_json(const XgbOptions &o) {
  return Json::object({
      {"objective", objective_name(o.objective)},
      {"max_depth", o.max_depth},
      {"gamma", o.gamma},
      {"min_child_weight", o.min_child_weight},
      {"subsample", o.subsample},
      {"eta", o.eta},
      {"lambda", o.lambda},
      {"alpha", o.alpha},
      {"max_rounds", o.max_rounds},
      {"early_stopping_rounds", o.early_stopping_rounds},
      {"recall_k", o.recall_k},
      {"time_budget_s", o.time_budget_s},
      {"threads", o.threads},
      // As a string: JSON integers here are signed 64-bit.
      {"seed", std::to_string(o.seed)},
  });
}

XgbOptions options_from_json(const Json &j) {
  XgbOptions o;
  o.objective = objective_from_name(j["objective"].as_string());
  o.max_depth = static_cast<int>(j["max_depth"].as_int());
  o.gamma = j["gamma"].as_double();
  o.min_child_weight = j["min_child_weight"].as_double();
  o.subsample = j["subsample"].as_double();
  o.eta = j["eta"].as_double();
  o.lambda = j["lambda"].as_double();
  o.alpha = j["alpha"].as_double();
  o.max_rounds = static_cast<int>(j["max_rounds"].as_int());
  o.early_stopping_rounds = static_cast<int>(j["early_stopping_rounds"].as_int());
  o.recall_k = static_cast<int>(j["recall_k"].as_int());
  o.time_budget_s = j["time_budget_s"].as_double();
  o.threads = static_cast<int>(j["threads"].as_int());
  try {
    o.seed = std::stoull(j["seed"].as_string());
  } catch (const std::logic_error &) {
    throw contracts::JsonError("seed '" + j["seed"].as_string() + "' is not a number");
  }
  return o;
}

// The samples' rows arranged for XGBoost: each workload's rows contiguous (XGBoost's query groups
// are runs of consecutive rows), in the order of the workload indices, keeping the rows' order
// within a workload.
struct Arranged {
  std::vector<float> features;
  std::vector<float> labels;          // throughput / the workload's best (failures 0)
  std::vector<unsigned> group_sizes;  // per non-empty workload
  std::vector<size_t> group_offsets;  // where each group starts; group_sizes.size() + 1 entries
  std::vector<double> truth;          // labels as doubles, for the recall of early stopping
};

Arranged arrange(const Samples &s) {
  const size_t n = s.rows();
  const size_t length = s.spec.length;
  const size_t groups = std::max<size_t>(1, s.workloads.size());
  auto group_of = [&](size_t row) -> size_t { return s.group.empty() ? 0 : s.group[row]; };

  std::vector<std::vector<size_t>> members(groups);
  for (size_t i = 0; i < n; ++i) members[group_of(i)].push_back(i);

  Arranged a;
  a.features.reserve(n * length);
  a.labels.reserve(n);
  a.group_offsets.push_back(0);
  for (const std::vector<size_t> &rows : members) {
    if (rows.empty()) continue;
    double best = 0;
    for (size_t i : rows) best = std::max(best, s.throughput[i]);
    for (size_t i : rows) {
      a.features.insert(a.features.end(), s.features.begin() + static_cast<std::ptrdiff_t>(i * length),
                        s.features.begin() + static_cast<std::ptrdiff_t>((i + 1) * length));
      // A workload whose every row failed has best 0: all its labels are 0.
      a.labels.push_back(best > 0 ? static_cast<float>(s.throughput[i] / best) : 0.0f);
    }
    a.group_sizes.push_back(static_cast<unsigned>(rows.size()));
    a.group_offsets.push_back(a.group_offsets.back() + rows.size());
  }
  a.truth.assign(a.labels.begin(), a.labels.end());
  return a;
}

// The early-stopping score of training margins: the recall curve (mean of recall@1..k, k =
// recall_k capped at the group's size) averaged over the workloads. See fit() for why the curve and
// not recall@k alone.
double training_score(const Arranged &a, const std::vector<float> &margins, size_t recall_k) {
  std::vector<double> predicted(margins.begin(), margins.end());
  double sum = 0;
  const size_t groups = a.group_sizes.size();
  for (size_t g = 0; g < groups; ++g) {
    const size_t begin = a.group_offsets[g];
    const size_t size = a.group_sizes[g];
    sum += recall_curve(a.truth.data() + begin, predicted.data() + begin, size, recall_k);
  }
  return sum / static_cast<double>(groups);
}

}  // namespace

struct XgbCostModel::Impl {
  XgbOptions options;
  // What the model was fit on (or loaded with); `spec` is meaningful once `booster` is set.
  std::optional<XgbBooster> booster;
  FeatureSpec spec;
  size_t training_rows = 0;
  std::vector<std::string> workloads;
  int rounds = 0;
  double fit_seconds = 0;
  // XGBoost's prediction writes the booster's prediction cache: calls must not overlap.
  mutable std::mutex booster_mutex;

  std::shared_ptr<const XgbCostModel> prior;
  double half_life = 64;
  double cutoff = 0.05;

  // The prior's weight after a fit on `rows` rows: 2^(-rows / half_life), 0 below the cutoff.
  double weight_after(size_t rows) const {
    if (!prior) return 0;
    double w = std::exp2(-static_cast<double>(rows) / half_life);
    return w < cutoff ? 0 : w;
  }
};

XgbCostModel::XgbCostModel(XgbOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = options; }
XgbCostModel::~XgbCostModel() = default;
XgbCostModel::XgbCostModel(XgbCostModel &&) noexcept = default;
XgbCostModel &XgbCostModel::operator=(XgbCostModel &&) noexcept = default;

bool XgbCostModel::trained() const { return impl_->booster.has_value(); }
const XgbOptions &XgbCostModel::options() const { return impl_->options; }
const FeatureSpec &XgbCostModel::spec() const { return impl_->spec; }
size_t XgbCostModel::training_rows() const { return impl_->training_rows; }
const std::vector<std::string> &XgbCostModel::training_workloads() const { return impl_->workloads; }
int XgbCostModel::rounds() const { return impl_->rounds; }
double XgbCostModel::fit_seconds() const { return impl_->fit_seconds; }

double XgbCostModel::prior_weight() const {
  if (!impl_->prior) return 0;
  if (!trained()) return 1;
  return impl_->weight_after(impl_->training_rows);
}

void XgbCostModel::set_prior(std::shared_ptr<const XgbCostModel> prior, double half_life, double cutoff) {
  if (prior) {
    if (prior.get() == this) throw CostModelError("a cost model cannot be its own prior");
    if (!prior->trained()) throw CostModelError("the prior cost model is not trained");
    if (trained() && prior->spec() != impl_->spec) {
      throw CostModelError("the prior was trained on " + describe(prior->spec()) + "; this model on " +
                           describe(impl_->spec));
    }
  }
  if (!(half_life > 0) || !std::isfinite(half_life)) {
    throw CostModelError(detail::concat("prior half-life is ", half_life, ", not a positive number of rows"));
  }
  if (!(cutoff >= 0 && cutoff <= 1))
    throw CostModelError(detail::concat("prior cutoff is ", cutoff, ", not in [0, 1]"));
  impl_->prior = std::move(prior);
  impl_->half_life = half_life;
  impl_->cutoff = cutoff;
}

void XgbCostModel::fit(const Samples &samples) {
  const Clock::time_point start = Clock::now();
  Impl &m = *impl_;
  samples.check();
  if (samples.rows() == 0) throw CostModelError("no samples to fit");
  if (trained() && samples.spec != m.spec) {
    throw CostModelError("samples are " + describe(samples.spec) + "; the model was trained on " + describe(m.spec));
  }
  if (m.prior && samples.spec != m.prior->spec()) {
    throw CostModelError("samples are " + describe(samples.spec) + "; the prior was trained on " +
                         describe(m.prior->spec()));
  }
  check_options(m.options);

  const size_t n = samples.rows();
  const Arranged a = arrange(samples);
  XgbTrainingSet set;
  set.features = {a.features.data(), n, samples.spec.length};
  set.labels = a.labels;
  if (m.options.objective == Objective::kRank) set.group_sizes = a.group_sizes;
  // Transfer learning: the trees learn what the prior's weighted margin gets wrong.
  const double weight = m.weight_after(n);
  if (weight > 0) {
    set.base_margin = m.prior->predict(samples.spec, a.features);
    for (float &v : set.base_margin) v = static_cast<float>(weight * v);
  }

  // Early stopping on the training set's recall curve. recall@k alone is no measure while a
  // workload has at most k rows (it is 1 for any ranking), which is every fit of the tuner's first
  // plans: it would keep one round. The curve, the mean of recall@1..k, still tells the rankings
  // apart, and equals recall@k's verdict when one ranking is better at every depth.
  const XgbOptions &o = m.options;
  const double budget = o.time_budget_s;
  double best_score = -1;
  int best_rounds = 0;
  auto after_round = [&](int rounds, const std::vector<float> &margins) {
    double score = training_score(a, margins, static_cast<size_t>(o.recall_k));
    if (score > best_score + 1e-12) {
      best_score = score;
      best_rounds = rounds;
    }
    if (o.early_stopping_rounds > 0 && rounds - best_rounds >= o.early_stopping_rounds) return false;
    return std::chrono::duration<double>(Clock::now() - start).count() < budget;
  };
  std::optional<XgbBooster> booster;
  try {
    booster = XgbBooster::train(set, xgboost_params(o), o.max_rounds, after_round);
    // Only the best rounds stay: the model saved and predicting is exactly the one scored best.
    if (best_rounds < booster->rounds()) booster = booster->slice(best_rounds);
  } catch (const XgbError &e) {
    throw CostModelError(std::string("fitting the cost model: ") + e.what());
  }

  // Nothing above changed the model: a failed fit leaves the previous one.
  {
    std::lock_guard<std::mutex> lock(m.booster_mutex);
    m.booster = std::move(booster);
  }
  m.spec = samples.spec;
  m.training_rows = n;
  m.workloads = samples.workloads;
  m.rounds = best_rounds;
  m.fit_seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<float> XgbCostModel::predict(const FeatureSpec &spec, const std::vector<float> &features) const {
  const Impl &m = *impl_;
  if (!trained()) {
    if (m.prior) return m.prior->predict(spec, features);
    return std::vector<float>(feature_rows(spec, features.size()), 0.0f);
  }
  if (spec != m.spec) {
    throw CostModelError("features are " + describe(spec) + "; the model was trained on " + describe(m.spec));
  }
  const size_t n = feature_rows(spec, features.size());
  if (n == 0) return {};
  std::vector<float> base_margin;
  if (double weight = prior_weight(); weight > 0) {
    base_margin = m.prior->predict(spec, features);
    for (float &v : base_margin) v = static_cast<float>(weight * v);
  }
  try {
    std::lock_guard<std::mutex> lock(m.booster_mutex);
    return m.booster->predict_margin({features.data(), n, spec.length}, base_margin);
  } catch (const XgbError &e) {
    throw CostModelError(std::string("predicting with the cost model: ") + e.what());
  }
}

void XgbCostModel::save(const std::string &path) const {
  const Impl &m = *impl_;
  if (!trained()) throw CostModelError("cannot save the cost model to " + path + ": it is not trained");
  ModelFile file;
  file.header = Json::object({
                                 {"extractor", m.spec.extractor},
                                 {"feature_version", m.spec.version},
                                 {"feature_length", m.spec.length},
                                 {"objective", objective_name(m.options.objective)},
                                 {"training_rows", m.training_rows},
                                 {"workloads", Json::array_of(m.workloads)},
                                 {"rounds", m.rounds},
                                 {"fit_seconds", m.fit_seconds},
                                 {"prior_weight", prior_weight()},
                                 {"options", options_json(m.options)},
                             })
                    .dump();
  try {
    std::lock_guard<std::mutex> lock(m.booster_mutex);
    file.model = m.booster->save();
  } catch (const XgbError &e) {
    throw CostModelError("cannot save the cost model to " + path + ": " + e.what());
  }
  write_model_file(path, encode_model_file(file));
}

XgbCostModel XgbCostModel::load(const std::string &path, const FeatureSpec *expected) {
  ModelFile file = decode_model_file(read_model_file(path), path);

  XgbCostModel model;
  Impl &m = *model.impl_;
  try {
    Json h = Json::parse(file.header);
    m.spec.extractor = h["extractor"].as_string();
    m.spec.version = static_cast<int>(h["feature_version"].as_int());
    int64_t length = h["feature_length"].as_int();
    if (length < 1) throw contracts::JsonError(detail::concat("feature_length ", length));
    m.spec.length = static_cast<size_t>(length);
    m.options = options_from_json(h["options"]);
    if (objective_from_name(h["objective"].as_string()) != m.options.objective) {
      throw contracts::JsonError("objective and options.objective differ");
    }
    int64_t rows = h["training_rows"].as_int();
    if (rows < 1) throw contracts::JsonError(detail::concat("training_rows ", rows));
    m.training_rows = static_cast<size_t>(rows);
    for (const Json &w : h["workloads"].as_array()) m.workloads.push_back(w.as_string());
    m.rounds = static_cast<int>(h["rounds"].as_int());
    m.fit_seconds = h["fit_seconds"].as_double();
  } catch (const contracts::JsonError &e) {
    throw CostModelError(path + " has an unreadable header: " + e.what());
  }
  if (expected && *expected != m.spec) {
    throw CostModelError(path + " was trained on " + describe(m.spec) + "; this build extracts " + describe(*expected));
  }
  try {
    XgbBooster booster = XgbBooster::load(file.model);
    if (booster.num_features() != m.spec.length || booster.rounds() != m.rounds) {
      throw CostModelError(detail::concat(path, " is corrupt: its XGBoost model has ", booster.num_features(),
                                          " features and ", booster.rounds(), " rounds, its header says ",
                                          m.spec.length, " and ", m.rounds));
    }
    // A saved model does not keep the thread count.
    if (m.options.threads > 0) booster.set_param("nthread", std::to_string(m.options.threads));
    m.booster = std::move(booster);
  } catch (const XgbError &e) {
    throw CostModelError(path + ": XGBoost cannot load its model: " + e.what());
  }
  return model;
}

}  // namespace kiln::cost_model
