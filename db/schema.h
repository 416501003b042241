#pragma once
// The tuning log's SQLite schema: creating it, recognising it, migrating older versions.
#include <cstdint>
#include <string>

namespace kiln::db {

class Database;

// The schema version this Kiln writes (PRAGMA user_version). Older files are migrated when they
// are opened; newer ones are refused.
constexpr int kSchemaVersion = 3;
// The oldest schema version a reader (TuningDbOptions::read_only) reads as it is, without
// migrating it; every query that does not write works on it. Older files are migrated first,
// which needs write access.
constexpr int kMinReadableSchemaVersion = 2;
// PRAGMA application_id of a Kiln tuning log: "KILN" in ASCII.
constexpr int64_t kApplicationId = 0x4b494c4e;

// Brings the file open in `db` to kSchemaVersion: creates the schema in an empty database,
// migrates an older Kiln schema in one transaction, and refuses a newer schema or a database that
// is not a Kiln tuning log (TuningDbError kSchemaTooNew, kNotATuningLog). Safe to run from several
// processes at once. SQLite errors (busy included) are passed on as DbError. Returns true when it
// created the schema (the file was new or empty).
bool prepare_schema(Database &db, const std::string &path);

// Refuses, without writing anything, a file that this Kiln must not change: a newer Kiln's
// tuning log (kSchemaTooNew) or a database of something else (kNotATuningLog). A file that is
// not a database at all fails here with SQLite's DbError (SQLITE_NOTADB).
void check_openable(Database &db, const std::string &path);

// The schema version stored in the file.
int schema_version(Database &db);
// Whether the database holds nothing at all: no application id and no tables (a new or empty
// file).
bool is_empty_database(Database &db);

}  // namespace kiln::db
