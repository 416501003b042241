#include "db/schema.h"

#include "db/error.h"
#include "db/error_class.h"
#include "db/sqlite_db.h"

#include <string>

namespace kiln::db {

namespace {

// The current schema.
//
// - workload: one row per workload key (hex SHA-256 of template name + '\n' + canonical args).
// - device: one row per device class (the device key).
// - target: one row per (canonical target string, device class).
// - job: tuning jobs with their spec, state and progress.
// - record: one row per measurement, valid or failed. device_id repeats the target's device so
//   that a device-class lookup is one index seek; the composite foreign key keeps the two in step.
//   mean_s is the mean of costs for a valid record and NULL for a failed one.
// - error_class: the names of the error codes, for people reading the file with sqlite3.
//
// "Best valid config for (workload, target)" seeks record_by_target at (workload, target, OK) and
// reads the first entry in mean order; the device-class fallback does the same on
// record_by_device; top-k reads k entries. Resume reads record_by_job. Import's duplicate check
// seeks record_by_config at (workload, target, config, time): on record_by_target every failed
// record of a workload shares one key (their mean is NULL), which made importing them quadratic.
constexpr const char *kCreateSchema = R"sql(
CREATE TABLE error_class (
  code INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);
CREATE TABLE workload (
  id INTEGER PRIMARY KEY,
  workload_key TEXT NOT NULL UNIQUE,
  template_name TEXT NOT NULL,
  args TEXT NOT NULL,
  flop REAL NOT NULL DEFAULT 0,
  created_at REAL NOT NULL
);
CREATE INDEX workload_by_template ON workload(template_name);
CREATE TABLE device (
  id INTEGER PRIMARY KEY,
  device_key TEXT NOT NULL UNIQUE
);
CREATE TABLE target (
  id INTEGER PRIMARY KEY,
  target TEXT NOT NULL,
  device_id INTEGER NOT NULL REFERENCES device(id),
  model TEXT NOT NULL DEFAULT '',
  UNIQUE (target, device_id),
  UNIQUE (id, device_id)
);
CREATE TABLE job (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  spec TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL
    CHECK (state IN ('pending', 'running', 'paused', 'done', 'failed', 'cancelled')),
  trials_total INTEGER NOT NULL DEFAULT 0,
  trials_done INTEGER NOT NULL DEFAULT 0,
  message TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL
);
CREATE TABLE record (
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workload(id),
  target_id INTEGER NOT NULL,
  device_id INTEGER NOT NULL,
  job_id INTEGER REFERENCES job(id) ON DELETE SET NULL,
  config_index INTEGER NOT NULL,
  space TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL,
  error_class INTEGER NOT NULL REFERENCES error_class(code),
  error_msg TEXT NOT NULL DEFAULT '',
  costs TEXT NOT NULL,
  mean_s REAL,
  wall_s REAL NOT NULL DEFAULT 0,
  runner TEXT NOT NULL DEFAULT '',
  kiln_version TEXT NOT NULL DEFAULT '',
  measured_at REAL NOT NULL,
  FOREIGN KEY (target_id, device_id) REFERENCES target(id, device_id)
);
CREATE INDEX record_by_target ON record(workload_id, target_id, error_class, mean_s);
CREATE INDEX record_by_device ON record(workload_id, device_id, error_class, mean_s);
CREATE INDEX record_by_job ON record(job_id, workload_id, config_index)
  WHERE job_id IS NOT NULL;
CREATE INDEX record_by_config ON record(workload_id, target_id, config_index, measured_at);
)sql";

// Migrations, each taking the schema from version `from` to `from + 1`.
struct Migration {
  int from;
  const char *sql;
};

// Version 1 had no flop count and no stored mean: best lookups read every valid record of a
// (workload, target) and averaged its costs. Version 2 stores the mean and indexes it, per target
// and per device class. A version-1 "valid" record without timings cannot be ranked and becomes
// UNKNOWN.
constexpr Migration kMigrations[] = {
    {1, R"sql(
ALTER TABLE workload ADD COLUMN flop REAL NOT NULL DEFAULT 0;
ALTER TABLE record ADD COLUMN mean_s REAL;
UPDATE record SET mean_s = (SELECT avg(value) FROM json_each(record.costs))
  WHERE error_class = 0;
UPDATE record SET error_class = 8, error_msg = 'no timings recorded'
  WHERE error_class = 0 AND mean_s IS NULL;
DROP INDEX IF EXISTS record_by_target;
CREATE INDEX record_by_target ON record(workload_id, target_id, error_class, mean_s);
CREATE INDEX record_by_device ON record(workload_id, device_id, error_class, mean_s);
)sql"},
    // Version 3 indexes records by config, for import's duplicate check.
    {2, R"sql(
CREATE INDEX record_by_config ON record(workload_id, target_id, config_index, measured_at);
)sql"},
};

int64_t pragma_int(Database &db, const char *pragma) {
  Statement statement = db.prepare(std::string("PRAGMA ") + pragma);
  int64_t value = statement.step() ? statement.column_int64(0) : 0;
  statement.reset();
  return value;
}

int64_t table_count(Database &db) {
  Statement statement = db.prepare("SELECT count(*) FROM sqlite_schema");
  int64_t value = statement.step() ? statement.column_int64(0) : 0;
  statement.reset();
  return value;
}

[[noreturn]] void too_new(const std::string &path, int64_t version) {
  throw TuningDbError(TuningDbError::Kind::kSchemaTooNew,
                      path + " was written by a newer Kiln (tuning-log schema version " + std::to_string(version) +
                          "; this Kiln reads versions up to " + std::to_string(kSchemaVersion) +
                          "). Open it with that Kiln or a newer one; this Kiln did not modify it.");
}

[[noreturn]] void foreign(const std::string &path, const std::string &why) {
  throw TuningDbError(TuningDbError::Kind::kNotATuningLog, path + " is not a Kiln tuning log (" + why + ")");
}

void create(Database &db) {
  db.exec(kCreateSchema);
  Statement insert = db.prepare("INSERT INTO error_class (code, name) VALUES (?, ?)");
  for (int code = 0; code < kErrorClassCount; ++code) {
    insert.bind(1, code).bind(2, to_string(static_cast<ErrorClass>(code)));
    insert.run();
    insert.reset();
  }
  db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion));
}

void migrate(Database &db, int64_t version) {
  for (const Migration &migration : kMigrations) {
    if (migration.from == version) {
      db.exec(migration.sql);
      ++version;
    }
  }
  db.exec("PRAGMA user_version = " + std::to_string(version));
}

}  // namespace

int schema_version(Database &db) { return static_cast<int>(pragma_int(db, "user_version")); }

bool is_empty_database(Database &db) { return pragma_int(db, "application_id") == 0 && table_count(db) == 0; }

void check_openable(Database &db, const std::string &path) {
  int64_t application = pragma_int(db, "application_id");
  int64_t version = pragma_int(db, "user_version");
  if (application == kApplicationId && version > kSchemaVersion) too_new(path, version);
  if (application != kApplicationId && application != 0) {
    foreign(path, "it is a SQLite database of another application");
  }
  if (application == 0 && table_count(db) != 0) {
    // Another connection may have created the schema between the two reads: the tables and the
    // application id are committed together, so read the id again now that tables are there.
    application = pragma_int(db, "application_id");
    version = pragma_int(db, "user_version");
    if (application == kApplicationId) {
      if (version > kSchemaVersion) too_new(path, version);
      return;
    }
    foreign(path, "it is a SQLite database holding other tables");
  }
}

bool prepare_schema(Database &db, const std::string &path) {
  check_openable(db, path);
  int64_t application = pragma_int(db, "application_id");
  int64_t version = pragma_int(db, "user_version");
  if (application == kApplicationId && version == kSchemaVersion) return false;

  // Create or migrate under the write lock, looking again: another process may have done it.
  Transaction transaction(db);
  application = pragma_int(db, "application_id");
  version = pragma_int(db, "user_version");
  bool created = false;
  if (application == 0) {
    if (table_count(db) != 0) foreign(path, "it is a SQLite database holding other tables");
    create(db);
    created = true;
  } else if (application != kApplicationId) {
    foreign(path, "it is a SQLite database of another application");
  } else if (version > kSchemaVersion) {
    too_new(path, version);
  } else if (version < 1) {
    foreign(path, "its Kiln schema version " + std::to_string(version) + " does not exist");
  } else if (version < kSchemaVersion) {
    try {
      migrate(db, version);
    } catch (const DbError &e) {
      // Busy: retried by the caller. The machine's failures (disk full, read-only): the caller
      // says so. Anything else is the file's content standing in the way.
      if (e.is_busy() || e.is_environment()) throw;
      throw TuningDbError(TuningDbError::Kind::kCorrupt, "migrating " + path + " from tuning-log schema version " +
                                                             std::to_string(version) + " to " +
                                                             std::to_string(kSchemaVersion) + " failed (" + e.what() +
                                                             "); the file was left unchanged");
    }
  }
  transaction.commit();
  return created;
}

}  // namespace kiln::db
