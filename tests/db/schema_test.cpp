// Opening the tuning log: a new file gets the current schema; an older Kiln's file is migrated in
// one transaction; a newer Kiln's file, a foreign SQLite file, a file that is not a database and a
// truncated database are refused or reported clearly, never a crash, nothing lost.
#include "db/schema.h"
#include "db/error.h"
#include "db/sqlite_db.h"
#include "db/tuning_db.h"
#include "tests/db/db_test_util.h"

#include <gtest/gtest.h>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace kiln::db {
namespace {

using testing::TempDirTest;
namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

int64_t query_int(Database &db, const std::string &sql) {
  Statement s = db.prepare(sql);
  EXPECT_TRUE(s.step()) << sql;
  int64_t value = s.column_int64(0);
  s.reset();
  return value;
}

void expect_error(const std::function<void()> &body, TuningDbError::Kind kind, const std::string &needle) {
  try {
    body();
    FAIL() << "expected TuningDbError";
  } catch (const TuningDbError &e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class SchemaTest : public TempDirTest {};

TEST_F(SchemaTest, NewFileGetsTheCurrentSchema) {
  TuningDb db = TuningDb::open(path("new.db"));
  Database &raw = db.database();
  EXPECT_EQ(query_int(raw, "PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(query_int(raw, "PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(query_int(raw, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(query_int(raw, "PRAGMA synchronous"), 2);  // FULL
  Statement mode = raw.prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.column_text(0), "wal");
  mode.reset();
  for (const char *table : {"workload", "target", "device", "job", "record", "error_class"}) {
    EXPECT_EQ(query_int(raw, std::string("SELECT count(*) FROM sqlite_schema WHERE type = "
                                         "'table' AND name = '") +
                                 table + "'"),
              1)
        << table;
  }
  EXPECT_EQ(query_int(raw, "SELECT count(*) FROM error_class"), kErrorClassCount);
  EXPECT_EQ(db.stats().schema_version, kSchemaVersion);
  // Opening again changes nothing.
  TuningDb again = TuningDb::open(path("new.db"));
  EXPECT_EQ(again.stats().records, 0);
}

TEST_F(SchemaTest, MissingFileWithoutCreateIsNotFound) {
  TuningDbOptions options;
  options.create = false;
  expect_error([&] { TuningDb::open(path("absent.db"), options); }, TuningDbError::Kind::kNotFound, "no tuning log at");
  EXPECT_FALSE(fs::exists(path("absent.db")));
  expect_error([&] { TuningDb::open(dir_.string()); }, TuningDbError::Kind::kNotATuningLog, "is a directory");
}

// Version 1 of the schema, as an older Kiln wrote it: no flop count, no stored mean.
constexpr const char *kVersion1Schema = R"sql(
CREATE TABLE error_class (code INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE workload (id INTEGER PRIMARY KEY, workload_key TEXT NOT NULL UNIQUE,
  template_name TEXT NOT NULL, args TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX workload_by_template ON workload(template_name);
CREATE TABLE device (id INTEGER PRIMARY KEY, device_key TEXT NOT NULL UNIQUE);
CREATE TABLE target (id INTEGER PRIMARY KEY, target TEXT NOT NULL,
  device_id INTEGER NOT NULL REFERENCES device(id), model TEXT NOT NULL DEFAULT '',
  UNIQUE (target, device_id), UNIQUE (id, device_id));
CREATE TABLE job (id INTEGER PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL, trials_total INTEGER NOT NULL DEFAULT 0,
  trials_done INTEGER NOT NULL DEFAULT 0, message TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE record (id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workload(id), target_id INTEGER NOT NULL,
  device_id INTEGER NOT NULL, job_id INTEGER REFERENCES job(id) ON DELETE SET NULL,
  config_index INTEGER NOT NULL, space TEXT NOT NULL DEFAULT '', config TEXT NOT NULL,
  error_class INTEGER NOT NULL REFERENCES error_class(code), error_msg TEXT NOT NULL DEFAULT '',
  costs TEXT NOT NULL, wall_s REAL NOT NULL DEFAULT 0, runner TEXT NOT NULL DEFAULT '',
  kiln_version TEXT NOT NULL DEFAULT '', measured_at REAL NOT NULL,
  FOREIGN KEY (target_id, device_id) REFERENCES target(id, device_id));
CREATE INDEX record_by_target ON record(workload_id, target_id, error_class);
CREATE INDEX record_by_job ON record(job_id, workload_id, config_index)
  WHERE job_id IS NOT NULL;
INSERT INTO error_class VALUES (0,'OK'),(1,'INSTANTIATION'),(2,'COMPILE_HOST'),
  (3,'COMPILE_DEVICE'),(4,'RUNTIME_DEVICE'),(5,'WRONG_ANSWER'),(6,'BUILD_TIMEOUT'),
  (7,'RUN_TIMEOUT'),(8,'UNKNOWN'),(9,'INFRA');
PRAGMA application_id = 1263094862;
PRAGMA user_version = 1;
)sql";

// A version-1 file with four records of one workload on one target: 3 valid, 1 failed, and one
// "valid" record without timings (which version 2 cannot rank).
void write_version1(const std::string &file) {
  Database db(file);
  db.exec(kVersion1Schema);
  Workload w = testing::dense(64);
  Statement insert =
      db.prepare("INSERT INTO workload (workload_key, template_name, args, created_at) VALUES (?, ?, ?, 0)");
  insert.bind(1, w.key).bind(2, w.template_name).bind(3, w.args);
  insert.run();
  db.exec("INSERT INTO device (device_key) VALUES ('x86-znver4')");
  db.exec("INSERT INTO target (target, device_id, model) VALUES ('llvm -mcpu=znver4', 1, 'znver4')");
  db.exec(R"sql(
INSERT INTO record (workload_id, target_id, device_id, config_index, config, error_class,
                    costs, measured_at) VALUES
  (1, 1, 1, 10, '[["tile_x",[1,4]]]', 0, '[0.003,0.005]', 1600000001),
  (1, 1, 1, 11, '[["tile_x",[1,8]]]', 0, '[0.002,0.002]', 1600000002),
  (1, 1, 1, 12, '[["tile_x",[1,16]]]', 2, '[]', 1600000003),
  (1, 1, 1, 13, '[["tile_x",[1,32]]]', 0, '[]', 1600000004),
  (1, 1, 1, 14, '[["tile_x",[1,2]]]', 0, '[0.006]', 1600000005);
)sql");
}

TEST_F(SchemaTest, OlderSchemaIsMigratedAndKeepsItsRecords) {
  std::string file = path("v1.db");
  write_version1(file);

  TuningDb db = TuningDb::open(file);
  Database &raw = db.database();
  EXPECT_EQ(query_int(raw, "PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(query_int(raw, "SELECT count(*) FROM record"), 5);
  EXPECT_EQ(query_int(raw, "SELECT count(*) FROM sqlite_schema WHERE name = 'record_by_device'"), 1);
  EXPECT_EQ(query_int(raw, "SELECT count(*) FROM sqlite_schema WHERE name = 'record_by_config'"), 1);

  // The best record is found through the new index, with its mean computed by the migration.
  std::optional<Record> best = db.best(testing::dense(64).key, testing::znver4());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config.index, 11);
  EXPECT_DOUBLE_EQ(best->mean(), 0.002);
  std::vector<Record> top = db.top_k(testing::dense(64).key, testing::znver4(), 10);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[1].config.index, 10);
  EXPECT_EQ(top[2].config.index, 14);

  // The unrankable "valid" record became UNKNOWN rather than disappearing.
  Stats stats = db.stats();
  EXPECT_EQ(stats.records, 5);
  EXPECT_EQ(stats.valid, 3);
  EXPECT_EQ(stats.by_error[ErrorClass::kUnknown], 1);
  EXPECT_TRUE(db.check().ok()) << db.check().problems.front();

  // New records go in alongside the migrated ones.
  db.insert(testing::measured(testing::dense(64), testing::znver4(), 20, 0.001));
  EXPECT_EQ(db.best(testing::dense(64).key, testing::znver4())->config.index, 20);
}

TEST_F(SchemaTest, FailedMigrationLeavesTheFileAsItWas) {
  std::string file = path("v1-broken.db");
  write_version1(file);
  {
    // A column that the migration adds already exists, so the migration fails half-way.
    Database db(file);
    db.exec("ALTER TABLE record ADD COLUMN mean_s REAL");
  }
  EXPECT_THROW(TuningDb::open(file), TuningDbError);
  Database db(file);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), 1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM pragma_table_info('workload') WHERE name = 'flop'"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM record"), 5);
}

// A version-2 file: the current schema without the index of import's duplicate check.
void write_version2(const std::string &file) {
  {
    TuningDb db = TuningDb::open(file);
    db.insert({testing::measured(testing::dense(64), testing::znver4(), 1, 0.001),
               testing::failed(testing::dense(64), testing::znver4(), 2)});
  }
  Database db(file);
  db.exec("DROP INDEX record_by_config");
  db.exec("PRAGMA user_version = 2");
}

TEST_F(SchemaTest, Version2GetsTheConfigIndexInOneTransaction) {
  std::string file = path("v2.db");
  write_version2(file);
  {
    TuningDb db = TuningDb::open(file);
    Database &raw = db.database();
    EXPECT_EQ(query_int(raw, "PRAGMA user_version"), kSchemaVersion);
    EXPECT_EQ(query_int(raw, "SELECT count(*) FROM sqlite_schema WHERE name = 'record_by_config'"), 1);
    EXPECT_EQ(db.stats().records, 2);
    EXPECT_TRUE(db.check().ok());
  }

  // A migration that fails half-way (here: the index name is taken) leaves the file as it was.
  std::string taken = path("v2-taken.db");
  write_version2(taken);
  {
    Database db(taken);
    db.exec("CREATE TABLE record_by_config (x)");
  }
  EXPECT_THROW(TuningDb::open(taken), TuningDbError);
  Database db(taken);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), 2);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'record_by_config'"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM record"), 2);
}

std::string file_bytes(const std::string &file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A reader opens the log read-only: every query works, every write is refused with kReadOnly, and
// the file is not changed, created or initialised.
TEST_F(SchemaTest, ReadOnlyOpenReadsAndWritesNothing) {
  std::string file = path("log.db");
  {
    TuningDb db = TuningDb::open(file);
    db.insert({testing::measured(testing::dense(64), testing::znver4(), 1, 0.001),
               testing::failed(testing::dense(64), testing::znver4(), 2)});
    db.create_job("j", {}, 1);
  }
  std::string before = file_bytes(file);
  TuningDbOptions read_only;
  read_only.read_only = true;
  {
    TuningDb db = TuningDb::open(file, read_only);
    EXPECT_TRUE(db.read_only());
    EXPECT_EQ(db.stats().records, 2);
    EXPECT_TRUE(db.best(testing::dense(64).key, testing::znver4()));
    EXPECT_EQ(db.history({"dense", "x86-znver4"}).size(), 2u);
    EXPECT_EQ(db.jobs().size(), 1u);
    EXPECT_TRUE(db.check().ok());
    std::ostringstream out;
    EXPECT_EQ(db.export_records(out, ExportFormat::kKiln), 2);

    auto refused = [&](const std::function<void()> &write) {
      expect_error(write, TuningDbError::Kind::kReadOnly, "the tuning log was opened read-only");
    };
    refused([&] { db.insert(testing::measured(testing::dense(64), testing::znver4(), 3, 0.001)); });
    refused([&] {
      std::istringstream in(out.str());
      db.import_records(in);
    });
    refused([&] {
      PruneOptions all;
      all.all = true;
      db.prune(all);
    });
    refused([&] { db.vacuum(); });
    refused([&] { db.create_job("k", {}, 1); });
    refused([&] { db.update_job(1, JobState::kDone); });
  }
  EXPECT_EQ(file_bytes(file), before);

  expect_error([&] { TuningDb::open(path("absent.db"), read_only); }, TuningDbError::Kind::kNotFound,
               "no tuning log at");
  EXPECT_FALSE(fs::exists(path("absent.db")));
  std::ofstream{path("empty.db")};
  expect_error([&] { TuningDb::open(path("empty.db"), read_only); }, TuningDbError::Kind::kNotATuningLog,
               "is empty (0 bytes)");
  EXPECT_EQ(fs::file_size(path("empty.db")), 0u);
}

// A reader reads a version-2 file as it is (the next writer migrates it); a version-1 file cannot
// be read without migrating, which a reader does where the file may be written.
TEST_F(SchemaTest, ReadOnlyOpenMigratesOnlyWhatItCannotRead) {
  TuningDbOptions read_only;
  read_only.read_only = true;
  std::string v2 = path("v2.db");
  write_version2(v2);
  {
    TuningDb db = TuningDb::open(v2, read_only);
    EXPECT_EQ(db.stats().records, 2);
    EXPECT_EQ(db.stats().schema_version, 2);
    EXPECT_TRUE(db.check().ok());
  }
  std::string v1 = path("v1.db");
  write_version1(v1);
  TuningDb db = TuningDb::open(v1, read_only);
  EXPECT_EQ(db.stats().schema_version, kSchemaVersion);
  EXPECT_EQ(db.stats().records, 5);
}

// Runs `body` in a child process without root's privileges (as nobody when the test runs as
// root, since root writes read-only files) and returns its exit status: 0, or a number that says
// which step failed, with the reason on stderr.
int run_unprivileged(const std::function<int()> &body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
                           setresuid(kNobody, kNobody, kNobody) != 0)) {
      _exit(100);
    }
    int status = 101;
    try {
      status = body();
    } catch (const std::exception &e) {
      std::fprintf(stderr, "unexpected: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(status);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Lets the unprivileged child write `file` (as root: gives it to nobody; otherwise it is the
// test's own).
void writable_by_child(const std::string &file) {
  if (geteuid() == 0) {
    ASSERT_EQ(chown(file.c_str(), kNobody, kNobody), 0);
  }
}

// What `body` throws as a TuningDbError: its kind and message, or "no error".
std::string tuning_db_error(const std::function<void()> &body) {
  try {
    body();
    return "no error";
  } catch (const TuningDbError &e) {
    return std::to_string(static_cast<int>(e.kind())) + ": " + e.what();
  }
}

// A log the user cannot write, because the file is read-only or because its directory is (where
// SQLite cannot create the WAL index): readers read it, writers are told it is read-only.
TEST_F(SchemaTest, ReadOnlyFileOrDirectoryIsReadAndWritersAreToldWhy) {
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  const std::string read_only_kind = std::to_string(static_cast<int>(TuningDbError::Kind::kReadOnly));
  auto make_log = [&](const std::string &folder) {
    fs::create_directory(path(folder));
    std::string file = path(folder + "/log.db");
    TuningDb db = TuningDb::open(file);
    db.insert(testing::measured(testing::dense(64), testing::znver4(), 1, 0.001));
    return file;
  };
  auto reader_and_writer = [&](const std::string &file, const std::string &why) {
    return run_unprivileged([&] {
      TuningDbOptions read_only;
      read_only.read_only = true;
      try {
        if (TuningDb::open(file, read_only).stats().records != 1) return 1;
      } catch (const std::exception &e) {
        std::fprintf(stderr, "reading: %s\n", e.what());
        return 2;
      }
      std::string error = tuning_db_error(
          [&] { TuningDb::open(file).insert(testing::measured(testing::dense(64), testing::znver4(), 2, 0.001)); });
      if (error.rfind(read_only_kind + ": ", 0) != 0 || error.find(why) == std::string::npos) {
        std::fprintf(stderr, "writing: %s\n", error.c_str());
        return 3;
      }
      return 0;
    });
  };

  // The file is read-only; its directory is not.
  std::string file = make_log("read-only-file");
  writable_by_child(path("read-only-file"));
  fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  EXPECT_EQ(reader_and_writer(file, "cannot write it: the file is read-only"), 0);

  // The directory (whose name holds what URIs reserve) is read-only; the file is not. Nothing may
  // be created there.
  file = make_log("read-only directory %3f?#");
  writable_by_child(file);
  fs::permissions(path("read-only directory %3f?#"), fs::perms::owner_read | fs::perms::owner_exec |
                                                         fs::perms::group_read | fs::perms::group_exec |
                                                         fs::perms::others_read | fs::perms::others_exec);
  EXPECT_EQ(reader_and_writer(file, "its directory " + path("read-only directory %3f?#") + " is read-only"), 0);
  EXPECT_FALSE(fs::exists(file + "-wal"));
  EXPECT_FALSE(fs::exists(file + "-shm"));
  fs::permissions(path("read-only directory %3f?#"), fs::perms::owner_all);
}

TEST_F(SchemaTest, NewerSchemaIsRefusedAndLeftUntouched) {
  std::string file = path("newer.db");
  {
    TuningDb db = TuningDb::open(file);
    db.insert(testing::measured(testing::dense(64), testing::znver4(), 1, 0.001));
    db.database().exec("PRAGMA user_version = 7");
  }
  auto size_before = fs::file_size(file);
  expect_error([&] { TuningDb::open(file); }, TuningDbError::Kind::kSchemaTooNew,
               "newer Kiln (tuning-log schema version 7; this Kiln reads versions up to 3)");
  Database raw(file);
  EXPECT_EQ(query_int(raw, "PRAGMA user_version"), 7);
  EXPECT_EQ(query_int(raw, "SELECT count(*) FROM record"), 1);
  EXPECT_EQ(fs::file_size(file), size_before);
}

TEST_F(SchemaTest, FileThatIsNotADatabaseIsRefused) {
  std::string file = path("notes.txt");
  {
    std::ofstream out(file);
    for (int i = 0; i < 200; ++i) out << "these are not the pages you are looking for\n";
  }
  auto size_before = fs::file_size(file);
  expect_error([&] { TuningDb::open(file); }, TuningDbError::Kind::kNotATuningLog, "is not a Kiln tuning log");
  EXPECT_EQ(fs::file_size(file), size_before);
}

TEST_F(SchemaTest, ForeignSqliteDatabaseIsRefused) {
  std::string file = path("other.db");
  OpenOptions rollback_journal;
  rollback_journal.wal = false;
  {
    Database db(file, rollback_journal);
    db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
  }
  expect_error([&] { TuningDb::open(file); }, TuningDbError::Kind::kNotATuningLog, "holding other tables");
  {
    Database db(file, rollback_journal);
    db.exec("PRAGMA application_id = 42");
  }
  expect_error([&] { TuningDb::open(file); }, TuningDbError::Kind::kNotATuningLog, "another application");
  // Refused without a change, not even to its journal mode.
  Database db(file, rollback_journal);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_schema"), 1);
  Statement mode = db.prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.step());
  EXPECT_EQ(mode.column_text(0), "delete");
}

TEST_F(SchemaTest, TruncatedDatabaseIsReportedNotCrashed) {
  std::string file = path("truncated.db");
  {
    TuningDb db = TuningDb::open(file);
    std::vector<Record> records;
    for (int i = 0; i < 3000; ++i) {
      records.push_back(testing::measured(testing::dense(16 + i % 50), testing::znver4(), i, 1e-3 + i * 1e-7));
    }
    db.insert(records);
  }  // the last connection checkpoints the WAL into the file and removes it
  ASSERT_FALSE(fs::exists(file + "-wal"));
  auto size = fs::file_size(file);
  ASSERT_GT(size, 100000u);
  fs::resize_file(file, size / 3);

  // Opening may succeed (the first pages are intact); then queries and the check report it.
  bool reported = false;
  try {
    TuningDb db = TuningDb::open(file);
    CheckReport report = db.check();
    EXPECT_FALSE(report.ok());
    reported = !report.ok();
    try {
      db.stats();
      db.top_k(testing::dense(16).key, testing::znver4(), 10);
      db.history({"dense", "x86-znver4"});
    } catch (const TuningDbError &e) {
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(TuningDbError::Kind::kCorrupt)) << e.what();
      EXPECT_NE(std::string(e.what()).find("damaged"), std::string::npos) << e.what();
    }
  } catch (const TuningDbError &e) {
    EXPECT_TRUE(e.kind() == TuningDbError::Kind::kCorrupt || e.kind() == TuningDbError::Kind::kNotATuningLog)
        << e.what();
    reported = true;
  }
  EXPECT_TRUE(reported);
}

TEST_F(SchemaTest, SeveralConnectionsCreatingTheSameFileAgree) {
  std::string file = path("race.db");
  std::vector<std::thread> threads;
  std::vector<std::string> errors(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      try {
        TuningDb db = TuningDb::open(file);
        db.insert(testing::measured(testing::dense(64), testing::znver4(), i, 0.001 * (i + 1)));
      } catch (const std::exception &e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto &t : threads) t.join();
  for (const auto &e : errors) EXPECT_EQ(e, "");
  TuningDb db = TuningDb::open(file);
  EXPECT_EQ(db.stats().records, 6);
  EXPECT_EQ(db.stats().workloads, 1);
  EXPECT_TRUE(db.check().ok());
}

}  // namespace
}  // namespace kiln::db
