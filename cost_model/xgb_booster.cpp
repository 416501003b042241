#include "cost_model/xgb_booster.h"

#include <xgboost/c_api.h>

#include <cmath>
#include <numeric>

namespace kiln::cost_model {

namespace {

// Turns a failed XGBoost call (non-zero return) into an XgbError.
void check(int rc, const char *what) {
  if (rc != 0) throw XgbError(std::string("xgboost: ") + what + ": " + XGBGetLastError());
}

// An owned DMatrix.
class DMatrix {
 public:
  explicit DMatrix(const DenseMatrix &m) {
    if (!m.data && m.rows * m.cols != 0) {
      throw XgbError("xgboost: feature matrix has no data");
    }
    check(XGDMatrixCreateFromMat(m.data, m.rows, m.cols, std::nanf(""), &handle_), "creating the feature matrix");
  }
  DMatrix(const DMatrix &) = delete;
  DMatrix &operator=(const DMatrix &) = delete;
  ~DMatrix() { XGDMatrixFree(handle_); }

  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

}  // namespace

XgbBooster XgbBooster::train(const DenseMatrix &features, const std::vector<float> &labels,
                             const std::vector<unsigned> &group_sizes, const XgbParams &params, int rounds) {
  XgbTrainingSet set{features, labels, group_sizes, {}};
  return train(set, params, rounds);
}

XgbBooster XgbBooster::train(const XgbTrainingSet &set, const XgbParams &params, int max_rounds,
                             const XgbRoundCallback &after_round) {
  const size_t rows = set.features.rows;
  if (set.labels.size() != rows) {
    throw XgbError("xgboost: " + std::to_string(set.labels.size()) + " labels for " + std::to_string(rows) + " rows");
  }
  if (!set.group_sizes.empty()) {
    size_t total = std::accumulate(set.group_sizes.begin(), set.group_sizes.end(), size_t{0});
    if (total != rows) {
      throw XgbError("xgboost: group sizes add up to " + std::to_string(total) + ", not to the " +
                     std::to_string(rows) + " rows");
    }
  }
  if (!set.base_margin.empty() && set.base_margin.size() != rows) {
    throw XgbError("xgboost: " + std::to_string(set.base_margin.size()) + " base margins for " + std::to_string(rows) +
                   " rows");
  }
  if (max_rounds < 1) throw XgbError("xgboost: training needs at least one round");

  DMatrix train_set(set.features);
  check(XGDMatrixSetFloatInfo(train_set.get(), "label", set.labels.data(), set.labels.size()), "setting labels");
  if (!set.group_sizes.empty()) {
    check(XGDMatrixSetUIntInfo(train_set.get(), "group", set.group_sizes.data(), set.group_sizes.size()),
          "setting query groups");
  }
  if (!set.base_margin.empty()) {
    check(XGDMatrixSetFloatInfo(train_set.get(), "base_margin", set.base_margin.data(), set.base_margin.size()),
          "setting the base margin");
  }

  // The training set is in the booster's cache list, so XGBoost keeps its predictions up to date
  // round by round and the margins after_round sees cost no prediction over all trees.
  DMatrixHandle cache[] = {train_set.get()};
  BoosterHandle handle = nullptr;
  check(XGBoosterCreate(cache, 1, &handle), "creating the booster");
  XgbBooster booster(handle);
  for (const auto &[name, value] : params) {
    check(XGBoosterSetParam(handle, name.c_str(), value.c_str()), ("setting parameter " + name + "=" + value).c_str());
  }
  std::vector<float> margins;
  for (int i = 0; i < max_rounds; ++i) {
    check(XGBoosterUpdateOneIter(handle, i, train_set.get()), "training");
    if (after_round) {
      margins = booster.predict_with(train_set.get(), true);
      if (!after_round(i + 1, margins)) break;
    }
  }
  return booster;
}

XgbBooster XgbBooster::load(const std::vector<char> &model) {
  BoosterHandle handle = nullptr;
  check(XGBoosterCreate(nullptr, 0, &handle), "creating the booster");
  XgbBooster booster(handle);
  check(XGBoosterLoadModelFromBuffer(handle, model.data(), model.size()), "loading a model");
  return booster;
}

XgbBooster::XgbBooster(XgbBooster &&other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }

XgbBooster &XgbBooster::operator=(XgbBooster &&other) noexcept {
  if (this != &other) {
    if (handle_) XGBoosterFree(handle_);
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

XgbBooster::~XgbBooster() {
  if (handle_) XGBoosterFree(handle_);
}

std::vector<float> XgbBooster::predict(const DenseMatrix &features) const {
  check_columns(features);
  DMatrix matrix(features);
  return predict_with(matrix.get(), false);
}

std::vector<float> XgbBooster::predict_margin(const DenseMatrix &features,
                                              const std::vector<float> &base_margin) const {
  check_columns(features);
  if (!base_margin.empty() && base_margin.size() != features.rows) {
    throw XgbError("xgboost: " + std::to_string(base_margin.size()) + " base margins for " +
                   std::to_string(features.rows) + " rows");
  }
  DMatrix matrix(features);
  if (!base_margin.empty()) {
    check(XGDMatrixSetFloatInfo(matrix.get(), "base_margin", base_margin.data(), base_margin.size()),
          "setting the base margin");
  }
  return predict_with(matrix.get(), true);
}

void XgbBooster::check_columns(const DenseMatrix &features) const {
  if (features.cols != num_features()) {
    throw XgbError("xgboost: model has " + std::to_string(num_features()) + " features, matrix has " +
                   std::to_string(features.cols));
  }
}

std::vector<float> XgbBooster::predict_with(void *dmatrix, bool margin) const {
  const char *config = margin ? R"({"type": 1, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                                R"( "strict_shape": false})"
                              : R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                                R"( "strict_shape": false})";
  const bst_ulong *shape = nullptr;
  bst_ulong dims = 0;
  const float *result = nullptr;
  check(XGBoosterPredictFromDMatrix(handle_, dmatrix, config, &shape, &dims, &result), "predicting");
  size_t count = 1;
  for (bst_ulong i = 0; i < dims; ++i) count *= shape[i];
  // The result lives in XGBoost's per-thread buffer until the next call: copy it now.
  return std::vector<float>(result, result + count);
}

XgbBooster XgbBooster::slice(int rounds) const {
  int total = this->rounds();
  if (rounds < 1 || rounds > total) {
    throw XgbError("xgboost: cannot keep " + std::to_string(rounds) + " of " + std::to_string(total) + " rounds");
  }
  BoosterHandle out = nullptr;
  int rc = XGBoosterSlice(handle_, 0, rounds, 1, &out);
  if (rc == -2) throw XgbError("xgboost: cannot keep " + std::to_string(rounds) + " rounds: out of bounds");
  check(rc, "slicing the model");
  return XgbBooster(out);
}

int XgbBooster::rounds() const {
  int n = 0;
  check(XGBoosterBoostedRounds(handle_, &n), "counting the boosting rounds");
  return n;
}

void XgbBooster::set_param(const std::string &name, const std::string &value) {
  check(XGBoosterSetParam(handle_, name.c_str(), value.c_str()), ("setting parameter " + name + "=" + value).c_str());
}

std::vector<char> XgbBooster::save() const {
  bst_ulong size = 0;
  const char *bytes = nullptr;
  check(XGBoosterSaveModelToBuffer(handle_, R"({"format": "ubj"})", &size, &bytes), "saving the model");
  return std::vector<char>(bytes, bytes + size);
}

size_t XgbBooster::num_features() const {
  bst_ulong n = 0;
  check(XGBoosterGetNumFeature(handle_, &n), "reading the feature count");
  return n;
}

}  // namespace kiln::cost_model
