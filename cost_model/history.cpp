#include "cost_model/history.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "contracts/error.h"
#include "contracts/json.h"

namespace kiln::cost_model {

std::vector<HistoryRow> thin_history(const std::vector<HistoryRow> &rows, size_t max_per_workload) {
  if (max_per_workload == 0) return rows;
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_workload;
  for (size_t i = 0; i < rows.size(); ++i) by_workload[{rows[i].template_name, rows[i].args_json}].push_back(i);
  std::vector<bool> keep(rows.size(), false);
  for (auto &[key, idx] : by_workload) {
    if (idx.size() <= max_per_workload) {
      for (size_t i : idx) keep[i] = true;
      continue;
    }
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t a, size_t b) { return rows[a].throughput > rows[b].throughput; });
    const size_t best = std::max<size_t>(1, max_per_workload / 4), spread = max_per_workload - best;
    for (size_t k = 0; k < best; ++k) keep[idx[k]] = true;
    // `spread` rows at even steps over the remaining ranks, the slowest (or a failure) included.
    const size_t rest = idx.size() - best;
    for (size_t k = 0; k < spread; ++k) {
      const size_t at = spread == 1 ? 0 : k * (rest - 1) / (spread - 1);
      keep[idx[best + at]] = true;
    }
  }
  std::vector<HistoryRow> out;
  out.reserve(std::min(rows.size(), max_per_workload * by_workload.size()));
  for (size_t i = 0; i < rows.size(); ++i)
    if (keep[i]) out.push_back(rows[i]);
  return out;
}

namespace {

// Features of history rows, kept for the life of the process (the tuning service runs job after
// job; each job's prior is fit on the history of the other workloads of its template, which the
// jobs before it have featurized already). Keyed by extractor, target, workload and config; at
// most kMaxRows rows (about 3.5 KB each), the oldest dropped first.
class HistoryFeatureCache {
 public:
  static constexpr size_t kMaxRows = 16384;

  // `configs`' features: cached rows, and the missing ones extracted (and kept) in one batch.
  FeatureBatch get(const FeatureExtractor &extractor, const ops::Task &task,
                   const std::vector<autotune::Config> &configs, int threads, size_t *extracted) {
    const FeatureSpec spec = extractor.spec(task);
    const std::string prefix = detail::concat(spec.extractor, "/", spec.version, "\n", task.target().str(), "\n",
                                              task.key(), "\n");
    FeatureBatch out;
    out.spec = spec;
    out.features.assign(configs.size() * spec.length, 0.0f);
    out.errors.assign(configs.size(), "");
    std::vector<autotune::Config> missing;
    std::vector<size_t> missing_at;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < configs.size(); ++i) {
        auto it = rows_.find(prefix + std::to_string(configs[i].index()));
        if (it == rows_.end() || it->second.row.size() != spec.length) {
          missing.push_back(configs[i]);
          missing_at.push_back(i);
          continue;
        }
        std::copy(it->second.row.begin(), it->second.row.end(),
                  out.features.begin() + static_cast<std::ptrdiff_t>(i * spec.length));
        out.errors[i] = it->second.error;
      }
    }
    if (missing.empty()) return out;
    const FeatureBatch fresh = extract_features(extractor, task, missing, threads);
    *extracted += missing.size();
    out.lower_seconds = fresh.lower_seconds;
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t m = 0; m < missing.size(); ++m) {
      const size_t i = missing_at[m];
      const auto begin = fresh.features.begin() + static_cast<std::ptrdiff_t>(m * spec.length);
      std::copy(begin, begin + static_cast<std::ptrdiff_t>(spec.length),
                out.features.begin() + static_cast<std::ptrdiff_t>(i * spec.length));
      out.errors[i] = fresh.errors[m];
      const std::string key = prefix + std::to_string(missing[m].index());
      if (rows_.count(key)) continue;
      if (order_.size() >= kMaxRows) {
        rows_.erase(order_.front());
        order_.pop_front();
      }
      rows_[key] = {std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(spec.length)), fresh.errors[m]};
      order_.push_back(key);
    }
    return out;
  }

 private:
  struct Row {
    std::vector<float> row;
    std::string error;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Row> rows_;
  std::deque<std::string> order_;  // oldest first
};

FeatureBatch cached_features(const FeatureExtractor &extractor, const ops::Task &task,
                             const std::vector<autotune::Config> &configs, int threads, size_t *extracted) {
  static HistoryFeatureCache cache;
  return cache.get(extractor, task, configs, threads, extracted);
}

}  // namespace

HistorySamples samples_from_history(const std::vector<HistoryRow> &rows, const FeatureExtractor &extractor,
                                    const ops::Target &target, int threads, const ops::Registry &registry) {
  HistorySamples out;
  std::set<std::string> reasons;
  auto skip = [&](size_t n, const std::string &why) {
    out.skipped += n;
    if (reasons.insert(why).second) out.skip_reasons.push_back(why);
  };

  // Rows grouped by workload, in order of first appearance.
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<const HistoryRow *>> by_workload;
  for (const HistoryRow &r : rows) {
    auto key = std::make_pair(r.template_name, r.args_json);
    if (!by_workload.count(key)) order.push_back(key);
    by_workload[key].push_back(&r);
  }

  bool have_spec = false;
  for (const auto &key : order) {
    const std::vector<const HistoryRow *> &group = by_workload[key];
    std::unique_ptr<ops::Task> task;
    try {
      task = std::make_unique<ops::Task>(key.first, contracts::Json::parse(key.second), target, registry);
    } catch (const UserError &e) {
      skip(group.size(), key.first + ": " + e.what());
      continue;
    }
    std::vector<autotune::Config> configs;
    std::vector<double> throughput;
    for (const HistoryRow *r : group) {
      try {
        configs.push_back(task->space().from_record(r->config));
        throughput.push_back(r->throughput);
      } catch (const UserError &e) {
        skip(1, key.first + ": " + e.what());
      }
    }
    if (configs.empty()) continue;
    const FeatureBatch batch = cached_features(extractor, *task, configs, threads, &out.extracted);
    if (!have_spec) {
      out.samples.spec = batch.spec;
      have_spec = true;
    } else if (batch.spec != out.samples.spec) {
      skip(configs.size(), key.first + ": features of another length than the first workload's");
      continue;
    }
    const size_t len = batch.spec.length;
    for (size_t i = 0; i < batch.rows(); ++i) {
      if (!batch.errors[i].empty()) {
        skip(1, key.first + ": " + batch.errors[i]);
        continue;
      }
      out.samples.add(std::vector<float>(batch.features.begin() + static_cast<std::ptrdiff_t>(i * len),
                                         batch.features.begin() + static_cast<std::ptrdiff_t>((i + 1) * len)),
                      throughput[i], task->key());
    }
  }
  return out;
}

}  // namespace kiln::cost_model
