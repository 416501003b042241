#pragma once
// CostModel: predicts which schedule candidates of a tuning task are fastest, from their feature
// vectors (cost_model/features.h), and learns from every measurement. The tuner is its only
// client: it keeps the task's measured samples, calls fit() with all of them every plan, and asks
// predict() to rank the candidates of the next plan.
//
// Scores only rank: a higher score means a candidate predicted to be faster. They are comparable
// within one predict() call of one model, not across models or refits.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "contracts/error.h"

namespace kiln::cost_model {

// Bad training data, a model file that is corrupt, foreign or of another feature version, features
// of the wrong length. The message names the problem (the row, the field, the file).
class CostModelError : public UserError {
 public:
  using UserError::UserError;
};

// Which features a model was trained on: a model refuses features of any other kind, version or
// length.
struct FeatureSpec {
  std::string extractor;  // "ir" or "knob"
  int version = 0;
  size_t length = 0;
  bool operator==(const FeatureSpec &o) const {
    return extractor == o.extractor && version == o.version && length == o.length;
  }
  bool operator!=(const FeatureSpec &o) const { return !(*this == o); }
};

// Measured candidates, row-major. A row is one measured config of one workload.
struct Samples {
  FeatureSpec spec;
  std::vector<float> features;  // rows() * spec.length values; every value finite
  // Per row: measured throughput in FLOP/s (> 0), or 0 for a failed candidate (any error class
  // except INFRA, which the tuner drops before it gets here).
  std::vector<double> throughput;
  // Per row: the index into `workloads` of the row's workload. Labels are normalised and ranking
  // groups are formed per workload. May be left empty when every row is of one workload.
  std::vector<uint32_t> group;
  // Workload keys (or another identity of each workload), recorded in a saved model.
  std::vector<std::string> workloads;

  size_t rows() const { return throughput.size(); }
  // Appends a row; `workload` is looked up in (or appended to) `workloads`, and `group` gets the
  // row's index into it (rows added before without group indices are taken as of the first
  // workload). Throws CostModelError for a row check() would refuse, naming it by the index it
  // would get ("sample 12: throughput is NaN"), and leaves the set as it was.
  void add(const std::vector<float> &row, double flops_per_s, const std::string &workload);
  // The rows of every workload but `workload` (a copy; the spec and the other workloads' order kept).
  Samples without(const std::string &workload) const;
  // Throws CostModelError naming the first problem: rows of the wrong length, a NaN or infinite
  // feature, a NaN, infinite or negative throughput, a group index out of range, sizes that
  // disagree.
  void check() const;
};

enum class Objective {
  kRank,        // XGBoost rank:pairwise within each workload (the default)
  kRegression,  // XGBoost reg:squarederror on the normalised labels
};

struct XgbOptions {
  Objective objective = Objective::kRank;
  // TVM's XGBoostCostModel defaults, kept where measurement did not find better ones.
  int max_depth = 3;
  double gamma = 1e-4;
  double min_child_weight = 1;
  double subsample = 1.0;
  double eta = 0.3;
  double lambda = 1;
  double alpha = 0;
  // Boosting rounds: at most max_rounds, stopping after early_stopping_rounds rounds (0: never)
  // without a better recall on the training set, and keeping the rounds that scored best. The
  // recall is that of each workload's top k (k = recall_k, or the workload's row count when
  // smaller) averaged over recall@1..k, TVM's "a-recall@k", then over the workloads: recall@k
  // alone is 1 for any ranking once k reaches the row count, as in every fit of a task's first
  // plans, and would always keep one round.
  int max_rounds = 8000;
  int early_stopping_rounds = 20;
  int recall_k = 64;
  // A fit stops adding rounds after this many seconds, keeping the best rounds so far, so that a
  // refit never stalls the tuner.
  double time_budget_s = 5.0;
  // Threads XGBoost may use; 0: all cores. One by default: the tuner's fits are small (a few
  // thousand rows), XGBoost's OpenMP threads spin while they wait, and on cores that also build and
  // time candidates more threads made a 1,000-row fit 20x slower, not faster.
  int threads = 1;
  uint64_t seed = 0;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // "xgb" or "random".
  virtual std::string name() const = 0;
  // Replaces what the model learned with a model of `samples` (the tuner refits from all of the
  // task's data every plan). Throws CostModelError for bad samples (Samples::check) or an empty
  // set, and for features of another spec than a previous fit or a loaded model's.
  virtual void fit(const Samples &samples) = 0;
  // One score per row of `features` (rows * spec.length values, row-major). Before any fit a
  // model scores every row alike (the tuner then samples at random). Throws CostModelError for a
  // length that is not a multiple of the spec's length, or features of another spec.
  virtual std::vector<float> predict(const FeatureSpec &spec, const std::vector<float> &features) const = 0;
};

// The baseline: uniform random scores (seeded), whatever it was fit on. Each predict() call draws
// new scores; a sequence of calls from one thread is the same for the same seed.
class RandomModel : public CostModel {
 public:
  explicit RandomModel(uint64_t seed = 0);
  std::string name() const override { return "random"; }
  void fit(const Samples &samples) override;
  std::vector<float> predict(const FeatureSpec &spec, const std::vector<float> &features) const override;

 private:
  uint64_t seed_;
  mutable std::atomic<uint64_t> calls_{0};  // predict() calls so far: each draws its own stream
};

// XGBoost, trained on labels = throughput / the best throughput of the row's workload (failures
// 0), refit from scratch on every fit().
//
// Transfer learning: set_prior() gives a model trained on other workloads of the same template
// family on the same device class (the tuning log's history). Until the first fit, predictions are
// the prior's. After a fit with n of the task's own rows, the prior's margin is added with the
// weight 2^(-n / prior_half_life) to both training (as XGBoost's base margin) and prediction, and
// dropped once that weight falls below prior_cutoff.
class XgbCostModel : public CostModel {
 public:
  explicit XgbCostModel(XgbOptions options = {});
  ~XgbCostModel() override;
  XgbCostModel(XgbCostModel &&) noexcept;
  XgbCostModel &operator=(XgbCostModel &&) noexcept;

  std::string name() const override { return "xgb"; }
  void fit(const Samples &samples) override;
  std::vector<float> predict(const FeatureSpec &spec, const std::vector<float> &features) const override;

  // The prior of transfer learning; it must have been fit (or loaded) on the same feature spec.
  // Throws CostModelError otherwise, and for a half-life that is not positive or a cutoff outside
  // [0, 1]. A null prior removes the prior. The prior's weight follows this model's own training
  // rows, so a prior set after a fit (for example on a loaded model that was trained with it)
  // counts from then on with the weight that fit's row count gives.
  void set_prior(std::shared_ptr<const XgbCostModel> prior, double half_life = 64, double cutoff = 0.05);
  // The weight of the prior's margin now: 1 before the first fit, then 2^(-n / half_life), 0 once
  // below the cutoff or when there is no prior.
  double prior_weight() const;

  bool trained() const;
  const XgbOptions &options() const;
  // What the last fit (or the loaded model) was trained on.
  const FeatureSpec &spec() const;
  size_t training_rows() const;
  const std::vector<std::string> &training_workloads() const;
  // Boosting rounds kept by the last fit, and its wall time.
  int rounds() const;
  double fit_seconds() const;

  // Writes the model to `path` atomically (a temporary file renamed over it): a header with the
  // feature spec, the objective, the training-set size and workloads, then XGBoost's model, and a
  // checksum. The prior is not saved. Throws CostModelError when the file cannot be written; a
  // failed save leaves no file behind and an existing one untouched.
  void save(const std::string &path) const;
  // Reads a model written by save(). Throws CostModelError for a missing, truncated, corrupt or
  // foreign file, and for one whose feature spec differs from `expected` (when given: its
  // extractor, version and length are named in the message).
  static XgbCostModel load(const std::string &path, const FeatureSpec *expected = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Ranking quality, for tests, the benchmark and the tuner's logs.
// Spearman's rank correlation of two equally long vectors (ties get average ranks); 0 when either
// is constant.
double spearman(const std::vector<double> &a, const std::vector<double> &b);
// The fraction of the true top-k rows (by `truth`, higher is better) found among the top-k rows by
// `predicted`; k is capped at the row count. Rows tied at the k-th place, in either vector, count
// in part (the expected recall over random tie-breaks), so a constant `predicted` scores k/n.
// 0 when there are no rows or k is 0.
double recall_at_k(const std::vector<double> &truth, const std::vector<double> &predicted, size_t k);

}  // namespace kiln::cost_model
