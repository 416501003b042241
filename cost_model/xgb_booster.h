#pragma once
// XgbBooster: an owned XGBoost gradient-boosted model, trained and queried on dense features.
// xgboost/c_api.h is included only by cost_model/*.cpp.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "contracts/error.h"

namespace kiln::cost_model {

// A failed XGBoost call, carrying XGBoost's own message: what XGBoost rejects is the caller's
// parameters or data (an unknown objective, a bad parameter value, an unreadable model).
class XgbError : public UserError {
 public:
  using UserError::UserError;
};

// A row-major matrix of `rows` x `cols` features, borrowed from the caller. NaN marks a missing
// value.
struct DenseMatrix {
  const float *data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
};

// XGBoost parameters as name/value pairs, applied in order, for example
// {{"objective", "rank:pairwise"}, {"max_depth", "6"}, {"eta", "0.3"}}.
using XgbParams = std::vector<std::pair<std::string, std::string>>;

// Called after each boosting round of XgbBooster::train with the number of rounds trained so far
// and the training rows' margins after that round (in the rows' order, base margin included).
// Returns false to stop training.
using XgbRoundCallback = std::function<bool(int rounds, const std::vector<float> &train_margins)>;

// What XgbBooster::train learns from: features, one label per row and, optionally, ranking
// groups and a base margin.
struct XgbTrainingSet {
  DenseMatrix features;
  std::vector<float> labels;
  // For ranking objectives: the sizes of consecutive query groups, summing to the row count.
  // Empty otherwise.
  std::vector<unsigned> group_sizes;
  // Per row: a margin the trees are added to (for example another model's prediction), or empty
  // for XGBoost's base_score. A model trained with a base margin must be given one at prediction.
  std::vector<float> base_margin;
};

class XgbBooster {
 public:
  // Trains `rounds` boosting rounds with one label per row. For ranking objectives,
  // `group_sizes` splits the rows into consecutive query groups and must sum to the row count;
  // leave it empty otherwise. Throws std::invalid_argument for inconsistent sizes and XgbError
  // for anything XGBoost rejects (an unknown objective, a bad parameter value).
  static XgbBooster train(const DenseMatrix &features, const std::vector<float> &labels,
                          const std::vector<unsigned> &group_sizes, const XgbParams &params, int rounds);

  // Trains round by round, at most `max_rounds` rounds, calling `after_round` (when given) after
  // each; training stops early when it returns false. The margins it sees come from XGBoost's
  // prediction cache of the training set, so they cost no full prediction. Throws XgbError as
  // the overload above; an exception from `after_round` propagates.
  static XgbBooster train(const XgbTrainingSet &set, const XgbParams &params, int max_rounds,
                          const XgbRoundCallback &after_round = nullptr);

  // A booster from bytes made by save().
  static XgbBooster load(const std::vector<char> &model);

  XgbBooster(XgbBooster &&other) noexcept;
  XgbBooster &operator=(XgbBooster &&other) noexcept;
  XgbBooster(const XgbBooster &) = delete;
  XgbBooster &operator=(const XgbBooster &) = delete;
  ~XgbBooster();

  // One score per row; for rank:pairwise a higher score means ranked earlier. Calls on one
  // booster must not overlap.
  std::vector<float> predict(const DenseMatrix &features) const;
  // The untransformed margin per row (for rank:pairwise and reg:squarederror the same values as
  // predict()), with `base_margin` (one per row, or empty for XGBoost's base_score) added.
  // Calls on one booster must not overlap.
  std::vector<float> predict_margin(const DenseMatrix &features, const std::vector<float> &base_margin) const;

  // A booster of the trees of the first `rounds` boosting rounds only, predicting as this one
  // does with iteration_end = rounds. Throws XgbError when `rounds` is not in 1..rounds().
  XgbBooster slice(int rounds) const;
  // Boosting rounds in the model.
  int rounds() const;
  // Sets a parameter on a trained or loaded booster (for example "nthread", which a saved model
  // does not keep).
  void set_param(const std::string &name, const std::string &value);

  // The model as bytes (XGBoost's UBJSON model format).
  std::vector<char> save() const;

  // Number of feature columns the model was trained on.
  size_t num_features() const;

 private:
  explicit XgbBooster(void *handle) : handle_(handle) {}
  void check_columns(const DenseMatrix &features) const;
  // Predicts on a DMatrix (a DMatrixHandle): margins, or transformed values.
  std::vector<float> predict_with(void *dmatrix, bool margin) const;

  void *handle_ = nullptr;  // BoosterHandle
};

}  // namespace kiln::cost_model
