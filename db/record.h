#pragma once
// Config and Record: one measurement of one config of one workload on one target, as stored in
// the tuning log. Failed measurements are records too (error != kOk); they are training data and
// tell a resumed job what not to measure again.
#include "contracts/config.h"
#include "db/error_class.h"
#include "db/target.h"
#include "db/workload.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::db {

// One point of a template's config space: its index, the space fingerprint (which changes when
// the template does) and its knobs, stored as their canonical text.
using Config = contracts::ConfigRecord;

// The ranges a record's numbers must lie in. TuningDb::insert and import refuse a record outside
// them, naming the field; `kiln db check` reports stored ones (written before the checks).
// Config index: 0 .. 2^53, every integer of which a double (and so every JSON reader) holds exactly.
constexpr int64_t kMaxConfigIndex = int64_t{1} << 53;
// Costs: finite, > 0 and below this many seconds. A valid (OK) record has at least one.
constexpr double kMaxCostSeconds = 1e6;
// Whether one cost (seconds) lies in its range; for a measurer to check its timings the same way.
inline bool cost_in_range(double seconds) { return seconds > 0 && seconds < kMaxCostSeconds; }
// Timestamps: from 2000-01-01 to a day from now (clocks drift); 0 on insert means now.
constexpr double kEarliestTimestamp = 946684800;  // 2000-01-01T00:00:00Z
constexpr double kTimestampLeewaySeconds = 86400;

struct Record {
  int64_t id = 0;  // assigned by the database
  Workload workload;
  Target target;
  std::optional<int64_t> job_id;  // the tuning job that measured it, if any
  Config config;
  ErrorClass error = ErrorClass::kOk;
  std::string error_message;
  std::vector<double> costs;  // seconds, one per repeat; may be empty for a failure
  double wall_s = 0;          // total wall-clock cost of the measurement (build + run), seconds, >= 0
  std::string runner;         // identity of the runner that measured it
  std::string kiln_version;   // Kiln version of the measurer; empty on insert: this Kiln's
  double timestamp = 0;       // Unix time in seconds; 0 on insert: now

  bool valid() const { return error == ErrorClass::kOk; }
  // Mean of the costs in seconds (the ranking key of valid records); NaN when there are none.
  double mean() const;
};

// The knobs of a stored config: the canonical text [[knob, value], ...] and nothing else. Throws
// TuningDbError (kBadInput) saying what is wrong.
std::vector<contracts::KnobValue> knobs_from_text(std::string_view text);

}  // namespace kiln::db
