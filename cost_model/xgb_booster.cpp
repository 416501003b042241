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
  if (labels.size() != features.rows) {
    throw XgbError("xgboost: " + std::to_string(labels.size()) + " labels for " + std::to_string(features.rows) +
                   " rows");
  }
  if (!group_sizes.empty()) {
    size_t total = std::accumulate(group_sizes.begin(), group_sizes.end(), size_t{0});
    if (total != features.rows) {
      throw XgbError("xgboost: group sizes add up to " + std::to_string(total) + ", not to the " +
                     std::to_string(features.rows) + " rows");
    }
  }
  if (rounds < 1) throw XgbError("xgboost: training needs at least one round");

  DMatrix train_set(features);
  check(XGDMatrixSetFloatInfo(train_set.get(), "label", labels.data(), labels.size()), "setting labels");
  if (!group_sizes.empty()) {
    check(XGDMatrixSetUIntInfo(train_set.get(), "group", group_sizes.data(), group_sizes.size()),
          "setting query groups");
  }

  DMatrixHandle cache[] = {train_set.get()};
  BoosterHandle handle = nullptr;
  check(XGBoosterCreate(cache, 1, &handle), "creating the booster");
  XgbBooster booster(handle);
  for (const auto &[name, value] : params) {
    check(XGBoosterSetParam(handle, name.c_str(), value.c_str()), ("setting parameter " + name + "=" + value).c_str());
  }
  for (int i = 0; i < rounds; ++i) {
    check(XGBoosterUpdateOneIter(handle, i, train_set.get()), "training");
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
  if (features.cols != num_features()) {
    throw XgbError("xgboost: model has " + std::to_string(num_features()) + " features, matrix has " +
                   std::to_string(features.cols));
  }
  DMatrix matrix(features);
  const char *config = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                       R"( "strict_shape": false})";
  const bst_ulong *shape = nullptr;
  bst_ulong dims = 0;
  const float *result = nullptr;
  check(XGBoosterPredictFromDMatrix(handle_, matrix.get(), config, &shape, &dims, &result), "predicting");
  size_t count = 1;
  for (bst_ulong i = 0; i < dims; ++i) count *= shape[i];
  return std::vector<float>(result, result + count);
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
