#pragma once
// The tuning log's SQLite schema: creating it, recognising it, migrating older versions.
#include <cstdint>
#include <string>

namespace kiln::db {

class Database;

// The schema version this Kiln writes (PRAGMA user_version). Older files are migrated when they
// are opened; newer ones are refused.
constexpr int kSchemaVersion = 3;
// PRAGMA application_id of a Kiln tuning log: "KILN" in ASCII.
constexpr int64_t kApplicationId = 0x4b494c4e;

// Brings the file open in `db` to kSchemaVersion: creates the schema in an empty database,
// migrates an older Kiln schema in one transaction, and refuses a newer schema or a database that
// is not a Kiln tuning log (TuningDbError kSchemaTooNew, kNotATuningLog). Safe to run from several
// processes at once. SQLite errors (busy included) are passed on as DbError.
void prepare_schema(Database &db, const std::string &path);

// Refuses, without writing anything, a file that this Kiln must not change: a newer Kiln's
// tuning log (kSchemaTooNew) or a database of something else (kNotATuningLog). A file that is
// not a database at all fails here with SQLite's DbError (SQLITE_NOTADB).
void check_openable(Database &db, const std::string &path);

// The schema version stored in the file.
int schema_version(Database &db);

}  // namespace kiln::db
