#pragma once
// Internals of the cost model shared by its sources: top-k membership with ties, the recall curve
// used for early stopping, and the feature-count check. Not part of the interface.
#include <cstddef>
#include <vector>

#include "cost_model/cost_model.h"

namespace kiln::cost_model {

// The rows of `values` ranked best (highest) first, to ask which rows are in the top k. Rows tied
// with the k-th best value share the slots left after the better rows: each counts as
// (slots left) / (rows tied), the chance that a random tie-break puts it in the top k. So a
// constant ranking finds k/n of any top k, the random baseline, and no order of the rows is
// preferred. NaN ranks lowest.
class TopK {
 public:
  TopK(const double *values, size_t n);
  // Per row, its share of the top-k (1 when surely in, 0 when surely out); k is capped at n.
  void weights(size_t k, std::vector<double> &out) const;

 private:
  const double *values_;
  std::vector<size_t> order_;  // best first; ties in row order
};

// recall_at_k of n values.
double recall_at_k(const double *truth, const double *predicted, size_t n, size_t k);
// The mean of recall@1 .. recall@k (k capped at n), TVM's "a-recall@k": unlike recall@k alone it
// still tells rankings apart when k reaches the row count (where recall@k is always 1).
double recall_curve(const double *truth, const double *predicted, size_t n, size_t k);

// The number of rows of `spec` in `count` feature values; throws CostModelError when they are not
// whole rows.
size_t feature_rows(const FeatureSpec &spec, size_t count);

}  // namespace kiln::cost_model
