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

struct Record {
  int64_t id = 0;  // assigned by the database
  Workload workload;
  Target target;
  std::optional<int64_t> job_id;  // the tuning job that measured it, if any
  Config config;
  ErrorClass error = ErrorClass::kOk;
  std::string error_message;
  std::vector<double> costs;  // seconds, one per repeat; may be empty for a failure
  double wall_s = 0;          // total wall-clock cost of the measurement (build + run), seconds
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
