// Samples, the random baseline and the ranking metrics. XgbCostModel is in xgb_cost_model.cpp.
#include "cost_model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "cost_model/metrics.h"

namespace kiln::cost_model {

namespace {

// "NaN", "inf" or "-inf" for a value that is not finite.
std::string non_finite_name(double v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "inf" : "-inf";
}

// The first problem of one row's features and throughput, or "" when there is none. `row` is the
// row's index, for the message.
std::string row_problem(size_t row, const float *features, size_t length, double flops_per_s) {
  for (size_t j = 0; j < length; ++j) {
    if (!std::isfinite(features[j])) {
      return detail::concat("sample ", row, ": feature ", j, " is ", non_finite_name(features[j]));
    }
  }
  if (!std::isfinite(flops_per_s))
    return detail::concat("sample ", row, ": throughput is ", non_finite_name(flops_per_s));
  if (flops_per_s < 0) return detail::concat("sample ", row, ": throughput is negative (", flops_per_s, ")");
  return "";
}

}  // namespace

Samples Samples::without(const std::string &workload) const {
  Samples out;
  out.spec = spec;
  for (size_t i = 0; i < rows(); ++i) {
    const std::string &w = workloads.empty() ? std::string() : workloads[group.empty() ? 0 : group[i]];
    if (!workloads.empty() && w == workload) continue;
    out.add(std::vector<float>(features.begin() + static_cast<std::ptrdiff_t>(i * spec.length),
                               features.begin() + static_cast<std::ptrdiff_t>((i + 1) * spec.length)),
            throughput[i], w);
  }
  return out;
}

void Samples::add(const std::vector<float> &row, double flops_per_s, const std::string &workload) {
  const size_t index = rows();
  if (row.size() != spec.length) {
    throw CostModelError(detail::concat("sample ", index, ": ", row.size(), " features, the spec says ", spec.length));
  }
  if (features.size() != index * spec.length) {
    throw CostModelError(detail::concat("samples: ", features.size(), " feature values for ", index, " rows of ",
                                        spec.length, " (the spec's length)"));
  }
  if (!group.empty() && group.size() != index) {
    throw CostModelError(detail::concat("samples: ", group.size(), " group indices for ", index, " rows"));
  }
  if (std::string problem = row_problem(index, row.data(), row.size(), flops_per_s); !problem.empty()) {
    throw CostModelError(problem);
  }

  // Everything is checked: from here on the set only grows, so a throw above leaves it as it was.
  auto found = std::find(workloads.begin(), workloads.end(), workload);
  const auto workload_index = static_cast<uint32_t>(found - workloads.begin());
  if (found == workloads.end()) workloads.push_back(workload);
  // Rows added without group indices are all of one workload: the first one named (or, when none
  // is named yet, the one named now).
  if (group.empty()) group.assign(index, 0);
  group.push_back(workload_index);
  features.insert(features.end(), row.begin(), row.end());
  throughput.push_back(flops_per_s);
}

void Samples::check() const {
  const size_t n = rows();
  if (n > 0 && spec.length == 0) throw CostModelError("samples: the feature spec has length 0");
  if (features.size() != n * spec.length) {
    throw CostModelError(detail::concat("samples: ", features.size(), " feature values for ", n, " rows of ",
                                        spec.length, " (the spec's length)"));
  }
  if (!group.empty() && group.size() != n) {
    throw CostModelError(detail::concat("samples: ", group.size(), " group indices for ", n, " rows"));
  }
  if (group.empty() && workloads.size() > 1) {
    throw CostModelError(detail::concat("samples: ", workloads.size(), " workloads but no group index per row"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (std::string problem = row_problem(i, features.data() + i * spec.length, spec.length, throughput[i]);
        !problem.empty()) {
      throw CostModelError(problem);
    }
    if (!group.empty() && group[i] >= workloads.size()) {
      throw CostModelError(detail::concat("sample ", i, ": workload index ", group[i], " is out of range (",
                                          workloads.size(), " workloads)"));
    }
  }
}

namespace {

// SplitMix64: a small, fast, well-mixed generator; its output for a given seed is the same on
// every platform, unlike the standard library's distributions.
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Throws CostModelError unless `count` values are whole rows of `spec`; returns the row count.
size_t row_count(const FeatureSpec &spec, size_t count) {
  if (spec.length == 0) {
    if (count == 0) return 0;
    throw CostModelError(detail::concat(count, " feature values for a feature spec of length 0"));
  }
  if (count % spec.length != 0) {
    throw CostModelError(
        detail::concat(count, " feature values are not whole rows of ", spec.length, " (the spec's length)"));
  }
  return count / spec.length;
}

}  // namespace

size_t feature_rows(const FeatureSpec &spec, size_t count) { return row_count(spec, count); }

RandomModel::RandomModel(uint64_t seed) : seed_(seed) {}

void RandomModel::fit(const Samples &samples) {
  // The same contract as every model's fit, although the scores do not depend on it.
  samples.check();
  if (samples.rows() == 0) throw CostModelError("no samples to fit");
}

std::vector<float> RandomModel::predict(const FeatureSpec &spec, const std::vector<float> &features) const {
  const size_t n = row_count(spec, features.size());
  // Each call draws from its own stream (seed, call number), so concurrent calls need no lock and
  // one thread's sequence of calls is the same on every run.
  uint64_t state = seed_ ^ (calls_.fetch_add(1, std::memory_order_relaxed) * 0xd1b54a32d192ed03ULL);
  std::vector<float> scores(n);
  for (float &s : scores) s = static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  return scores;
}

namespace {

// NaN sorts as the lowest value, so that a broken score cannot break the strict weak ordering
// std::sort relies on.
double sort_key(double v) { return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v; }

// Ranks 1..n by value, ascending, ties getting the average of their ranks.
std::vector<double> average_ranks(const std::vector<double> &v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sort_key(v[a]) < sort_key(v[b]); });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && sort_key(v[order[j + 1]]) == sort_key(v[order[i]])) ++j;
    double rank = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t t = i; t <= j; ++t) ranks[order[t]] = rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

double spearman(const std::vector<double> &a, const std::vector<double> &b) {
  KILN_CHECK(a.size() == b.size(), "spearman of ", a.size(), " and ", b.size(), " values");
  const size_t n = a.size();
  if (n < 2) return 0;
  std::vector<double> ra = average_ranks(a);
  std::vector<double> rb = average_ranks(b);
  const double mean = (static_cast<double>(n) + 1) / 2;  // the mean of any n average ranks
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0 || vb == 0) return 0;
  return cov / std::sqrt(va * vb);
}

TopK::TopK(const double *values, size_t n) : values_(values), order_(n) {
  std::iota(order_.begin(), order_.end(), size_t{0});
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return sort_key(values_[a]) > sort_key(values_[b]); });
}

void TopK::weights(size_t k, std::vector<double> &out) const {
  const size_t n = order_.size();
  out.assign(n, 0.0);
  k = std::min(k, n);
  if (k == 0) return;
  // The k-th best value; the rows tied with it share the slots left after the better rows.
  const double threshold = sort_key(values_[order_[k - 1]]);
  size_t first = k - 1;  // first row (in order_) tied with the threshold
  while (first > 0 && sort_key(values_[order_[first - 1]]) == threshold) --first;
  size_t end = k;  // one past the last tied row
  while (end < n && sort_key(values_[order_[end]]) == threshold) ++end;
  for (size_t i = 0; i < first; ++i) out[order_[i]] = 1.0;
  const double share = static_cast<double>(k - first) / static_cast<double>(end - first);
  for (size_t i = first; i < end; ++i) out[order_[i]] = share;
}

double recall_at_k(const std::vector<double> &truth, const std::vector<double> &predicted, size_t k) {
  KILN_CHECK(truth.size() == predicted.size(), "recall_at_k of ", truth.size(), " and ", predicted.size(), " values");
  return recall_at_k(truth.data(), predicted.data(), truth.size(), k);
}

double recall_at_k(const double *truth, const double *predicted, size_t n, size_t k) {
  k = std::min(k, n);
  if (k == 0) return 0;
  std::vector<double> wt, wp;
  TopK(truth, n).weights(k, wt);
  TopK(predicted, n).weights(k, wp);
  double found = 0;
  for (size_t i = 0; i < n; ++i) found += wt[i] * wp[i];
  return found / static_cast<double>(k);
}

double recall_curve(const double *truth, const double *predicted, size_t n, size_t k) {
  k = std::min(k, n);
  if (k == 0) return 0;
  TopK top_truth(truth, n), top_predicted(predicted, n);
  std::vector<double> wt, wp;
  double sum = 0;
  for (size_t j = 1; j <= k; ++j) {
    top_truth.weights(j, wt);
    top_predicted.weights(j, wp);
    double found = 0;
    for (size_t i = 0; i < n; ++i) found += wt[i] * wp[i];
    sum += found / static_cast<double>(j);
  }
  return sum / static_cast<double>(k);
}

}  // namespace kiln::cost_model
