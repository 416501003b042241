#include "db/target.h"

#include "contracts/target.h"
#include "db/error.h"

#include <utility>

namespace kiln::db {

std::string canonical_target(std::string_view target) {
  try {
    return contracts::canonical_target(target);
  } catch (const contracts::TargetError &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, e.what());
  }
}

Target Target::make(std::string_view target, std::string device_key, std::string model) {
  Target t;
  try {
    contracts::Target parsed = contracts::Target::parse(target);
    contracts::check_device_key(device_key);
    t.target = parsed.str();
    t.model = model.empty() ? contracts::target_model(parsed) : std::move(model);
  } catch (const contracts::TargetError &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, e.what());
  }
  t.device_key = std::move(device_key);
  return t;
}

}  // namespace kiln::db
