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

std::vector<contracts::KnobValue> knobs_from_text(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '[') {
    throw TuningDbError(TuningDbError::Kind::kBadInput, "config knobs must be an array of [knob, value] pairs");
  }
  try {
    return contracts::parse_knobs(text);
  } catch (const contracts::ConfigRecordError &e) {
    throw TuningDbError(TuningDbError::Kind::kBadInput, e.what());
  }
}

}  // namespace kiln::db
