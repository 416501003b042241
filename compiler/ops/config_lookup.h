#pragma once
// ConfigLookup: how the compiler asks "the best-known config of this workload on this target" at
// build time. The compiler never includes the tuning log; the tuning log's adapter
// (tuner/db_config_lookup.h) implements this, and the commands wire it in.
#include <optional>
#include <string>

#include "contracts/config.h"
#include "contracts/workload.h"

namespace kiln::ops {

struct TunedConfig {
  contracts::ConfigRecord config;
  bool exact_target = true;  // recorded on this exact target, or else on another of its device class
  std::string target;        // the target it was measured on
  double mean_s = 0;         // its measured mean time
};

class ConfigLookup {
 public:
  virtual ~ConfigLookup() = default;
  // The best valid config known for `workload` on `target` (canonical), or nullopt.
  virtual std::optional<TunedConfig> best(const contracts::Workload &workload, const std::string &target) const = 0;
};

}  // namespace kiln::ops
