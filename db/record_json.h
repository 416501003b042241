#pragma once
// Records as JSON lines: Kiln's own exchange format (db/FORMAT.md), which import reads back, and
// AutoTVM's v0.2 log layout, written for comparison with TVM's tools.
#include "db/record.h"

#include <nlohmann/json.hpp>

namespace kiln::db {

// The version of Kiln's JSON-lines record format that this Kiln writes and reads.
constexpr int kRecordFormatVersion = 1;

// One line of Kiln's format (without the newline). The job id is local to a database and is not
// written.
nlohmann::ordered_json record_to_json(const Record &record);
// Parses one line of Kiln's format into a record (id 0, no job). Throws TuningDbError
// (kBadInput) naming the field that is missing or wrong.
Record record_from_json(const nlohmann::json &line);
// One line of AutoTVM's v0.2 log layout. See db/FORMAT.md for how the fields map.
nlohmann::ordered_json record_to_autotvm_json(const Record &record);

}  // namespace kiln::db
