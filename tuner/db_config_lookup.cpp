#include "tuner/db_config_lookup.h"

namespace kiln::tuner {

std::optional<ops::TunedConfig> DbConfigLookup::best(const contracts::Workload &workload,
                                                     const std::string &target) const {
  std::lock_guard<std::mutex> lock(mu_);
  const db::Target t = db::Target::make(target, device_key_);
  std::optional<db::Record> r = db_.best(workload.key, t, db::Scope::kExactThenClass);
  if (!r) return std::nullopt;
  ops::TunedConfig c;
  c.config = r->config;
  c.target = r->target.target;
  c.exact_target = r->target.target == t.target;
  c.mean_s = r->mean();
  return c;
}

}  // namespace kiln::tuner
