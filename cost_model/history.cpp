#include "cost_model/history.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

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
    const FeatureBatch batch = extract_features(extractor, *task, configs, threads);
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
