#pragma once
// The tuning log as the compiler's ConfigLookup: the best valid record of a workload on the exact
// target, else on any target of the same device class (db::Scope::kExactThenClass), and its k best
// configs from the same place (db::TuningDb::top_k).
#include <mutex>
#include <string>

#include "compiler/ops/config_lookup.h"
#include "db/tuning_db.h"

namespace kiln::tuner {

class DbConfigLookup final : public ops::ConfigLookup {
 public:
  // `db` must outlive the lookup. `device_key` names the device class of the target.
  DbConfigLookup(db::TuningDb &db, std::string device_key) : db_(db), device_key_(std::move(device_key)) {}
  std::optional<ops::TunedConfig> best(const contracts::Workload &workload, const std::string &target) const override;
  std::vector<ops::TunedConfig> top(const contracts::Workload &workload, const std::string &target,
                                    int64_t k) const override;

 private:
  db::TuningDb &db_;
  std::string device_key_;
  mutable std::mutex mu_;
};

}  // namespace kiln::tuner
