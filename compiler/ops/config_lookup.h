#pragma once
// ConfigLookup: how the compiler asks "the best-known config of this workload on this target" at
// build time. The compiler never includes the tuning log; the tuning log's adapter
// (tuner/db_config_lookup.h) implements this, and the commands wire it in.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
  // The `k` best valid configs known for `workload` on `target`, fastest first, from where best()
  // looks (so the first is best()'s). The layout pass reads them to choose a convolution's blocks,
  // and a kernel whose blocks are fixed takes the fastest one with its blocks. This default knows
  // only best().
  virtual std::vector<TunedConfig> top(const contracts::Workload &workload, const std::string &target,
                                       int64_t k) const {
    std::vector<TunedConfig> out;
    if (k <= 0) return out;
    if (std::optional<TunedConfig> b = best(workload, target)) out.push_back(std::move(*b));
    return out;
  }
};

}  // namespace kiln::ops
