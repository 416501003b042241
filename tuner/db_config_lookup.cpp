#include "tuner/db_config_lookup.h"

namespace kiln::tuner {

namespace {

ops::TunedConfig tuned(const db::Record &r, const db::Target &asked) {
  ops::TunedConfig c;
  c.config = r.config;
  c.target = r.target.target;
  c.exact_target = r.target.target == asked.target;
  c.mean_s = r.mean();
  return c;
}

}  // namespace

std::optional<ops::TunedConfig> DbConfigLookup::best(const contracts::Workload &workload,
                                                     const std::string &target) const {
  std::lock_guard<std::mutex> lock(mu_);
  const db::Target t = db::Target::make(target, device_key_);
  std::optional<db::Record> r = db_.best(workload.key, t, db::Scope::kExactThenClass);
  if (!r) return std::nullopt;
  return tuned(*r, t);
}

std::vector<ops::TunedConfig> DbConfigLookup::top(const contracts::Workload &workload, const std::string &target,
                                                  int64_t k) const {
  std::vector<ops::TunedConfig> out;
  if (k <= 0) return out;
  std::lock_guard<std::mutex> lock(mu_);
  const db::Target t = db::Target::make(target, device_key_);
  for (const db::Record &r : db_.top_k(workload.key, t, k, db::Scope::kExactThenClass)) out.push_back(tuned(r, t));
  return out;
}

}  // namespace kiln::tuner
