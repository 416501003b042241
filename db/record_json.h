#pragma once
// Records as JSON lines: Kiln's own exchange format (db/FORMAT.md), which import reads back, and
// AutoTVM's v0.2 log layout, written for comparison with TVM's tools.
#include "db/record.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string_view>

namespace kiln::db {

// The version of Kiln's JSON-lines record format that this Kiln writes and reads.
constexpr int kRecordFormatVersion = 1;
// The longest line import reads, in bytes; a longer one is a bad line.
constexpr size_t kMaxRecordLineBytes = size_t{1} << 20;

// JSON text as the tuning log reads it (an import line, stored arguments): nested at most
// contracts::kJsonMaxDepth deep, which is checked before nlohmann's parser and writer (both of
// which would recurse once per level) see it. Throws TuningDbError (kBadInput): "not valid JSON",
// or "JSON nested deeper than 256 levels at byte N".
nlohmann::json parse_json(std::string_view text);

// One line of Kiln's format (without the newline). The job id is local to a database and is not
// written. Every number written is one: a record holding a non-finite number, or valid without a
// cost (possible only in a log written before insert checked them), is refused with TuningDbError
// (kCorrupt) naming the record and the field, never written with a null.
nlohmann::ordered_json record_to_json(const Record &record);
// Parses one line of Kiln's format into a record (id 0, no job). Throws TuningDbError
// (kBadInput) naming the field that is missing or wrong.
Record record_from_json(const nlohmann::json &line);
// One line of AutoTVM's v0.2 log layout, refusing the same records as record_to_json. See
// db/FORMAT.md for how the fields map.
nlohmann::ordered_json record_to_autotvm_json(const Record &record);

}  // namespace kiln::db
