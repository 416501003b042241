#include "db/record.h"

#include "db/error.h"

#include <cmath>
#include <limits>

namespace kiln::db {

double Record::mean() const {
  if (costs.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (double c : costs) sum += c;
  return sum / static_cast<double>(costs.size());
}

nlohmann::json knobs_to_json(const Config &config) {
  nlohmann::json knobs = nlohmann::json::array();
  for (const auto &[name, value] : config.knobs) knobs.push_back(nlohmann::json::array({name, value}));
  return knobs;
}

std::vector<std::pair<std::string, nlohmann::json>> knobs_from_json(const nlohmann::json &knobs) {
  if (!knobs.is_array()) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, "config knobs must be an array of [knob, value] pairs");
  }
  std::vector<std::pair<std::string, nlohmann::json>> result;
  result.reserve(knobs.size());
  for (const auto &pair : knobs) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
      throw TuningDbError(TuningDbError::Kind::kBadInput,
                          "config knob " + pair.dump() + " is not a [\"name\", value] pair");
    }
    result.emplace_back(pair[0].get<std::string>(), pair[1]);
  }
  return result;
}

}  // namespace kiln::db
