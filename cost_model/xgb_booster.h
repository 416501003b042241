#pragma once
// XgbBooster: an owned XGBoost gradient-boosted model, trained and queried on dense features.
// xgboost/c_api.h is included only by cost_model/*.cpp.
#include <cstddef>
#include <cstdint>
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

class XgbBooster {
 public:
  // Trains `rounds` boosting rounds with one label per row. For ranking objectives,
  // `group_sizes` splits the rows into consecutive query groups and must sum to the row count;
  // leave it empty otherwise. Throws std::invalid_argument for inconsistent sizes and XgbError
  // for anything XGBoost rejects (an unknown objective, a bad parameter value).
  static XgbBooster train(const DenseMatrix &features, const std::vector<float> &labels,
                          const std::vector<unsigned> &group_sizes, const XgbParams &params, int rounds);

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

  // The model as bytes (XGBoost's UBJSON model format).
  std::vector<char> save() const;

  // Number of feature columns the model was trained on.
  size_t num_features() const;

 private:
  explicit XgbBooster(void *handle) : handle_(handle) {}

  void *handle_ = nullptr;  // BoosterHandle
};

}  // namespace kiln::cost_model
