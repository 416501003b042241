#pragma once
// TuningDb: the tuning log. It remembers every measurement the farm makes, answers "best config
// for this workload on this target" for the compiler, gives the cost model its training data and
// lets a tuning job resume. One SQLite file in WAL mode; several processes may read and write it
// at once. A TuningDb object is one connection: use one per thread.
//
// Every failure the user can act on arrives as TuningDbError (db/error.h); a bug in Kiln (a misuse
// of SQLite, a constraint it should never violate) as DbError (db/sqlite_db.h), an InternalError.
#include "db/job.h"
#include "db/record.h"
#include "db/schema.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::db {

class Database;

struct TuningDbOptions {
  // Create the file (and its schema) when it does not exist or is empty (0 bytes). Without it, a
  // missing file is kNotFound and an empty one kNotATuningLog, and nothing is created.
  bool create = true;
  // Open for reading only: nothing is written (no schema created, no journal mode set), and every
  // write throws kReadOnly. Works on a file, or in a directory, that cannot be written. A file of
  // schema version kMinReadableSchemaVersion or later is read as it is; an older one is migrated
  // first where it may be written. `create` does not apply.
  bool read_only = false;
  // How long one SQLite call waits for another connection's lock.
  std::chrono::milliseconds busy_timeout{5000};
  // How long an operation keeps retrying (with a randomised back-off) while other connections
  // hold the lock, before TuningDbError (kBusy) reaches the caller.
  std::chrono::milliseconds retry_deadline{120000};
  // fsync on every commit (SQLite synchronous=FULL), so committed records survive a power loss as
  // well as a crash. With false (synchronous=NORMAL) they survive a process crash only.
  bool durable = true;
};

// Where best() and top_k() look.
enum class Scope {
  kExactThenClass,  // the exact target if it has a valid record, else the whole device class
  kExact,           // the exact target string on this device class only
  kDeviceClass,     // every target of the device class
};

struct HistoryQuery {
  std::string template_name;  // the template family
  std::string device_key;     // the device class
  bool valid_only = false;
  int64_t limit = 0;  // 0: all
};

// A config as best() and top_k() rank it: the record at the upper median of its valid records on
// its target, and how many valid records it has there.
struct RankedConfig {
  Record median;
  int64_t records = 0;
};

struct WorkloadSummary {
  Workload workload;
  int64_t records = 0;
  int64_t valid = 0;
  std::optional<double> best_mean_s;  // over every target
};

struct Stats {
  int schema_version = 0;
  int64_t workloads = 0;
  int64_t targets = 0;
  int64_t devices = 0;
  int64_t jobs = 0;
  int64_t records = 0;
  int64_t valid = 0;
  std::map<ErrorClass, int64_t> by_error;
  std::optional<double> first_timestamp;
  std::optional<double> last_timestamp;
  int64_t file_bytes = 0;  // the database file (without its WAL)
};

struct PruneOptions {
  int64_t keep = 1;          // valid records kept per (workload, target), the fastest
  bool keep_failed = false;  // keep failed records (otherwise they are deleted)
  bool dry_run = false;      // count what would go, delete nothing
  // What is pruned: the records of this template, device class and workload (those given, all of
  // them together), or with `all` every record. prune() refuses options that name neither, so
  // that no call empties the log by accident.
  std::string template_name;
  std::string device_key;
  std::string workload_key;
  bool all = false;
};

// Records of unfinished jobs (pending, running, paused) are never pruned: they are the jobs'
// resume state.
struct PruneResult {
  int64_t deleted_valid = 0;
  int64_t deleted_failed = 0;
  int64_t kept = 0;         // records left in the whole log
  int64_t freed_bytes = 0;  // whole pages the deleted records took, now free inside the file
  int64_t free_bytes = 0;   // every free page of the file afterwards: what vacuum() gives back
};

struct CheckReport {
  bool ok() const { return problems.empty(); }
  std::vector<std::string> problems;
};

enum class ExportFormat {
  kKiln,     // Kiln's JSON lines (db/FORMAT.md); import reads it back
  kAutoTvm,  // AutoTVM's v0.2 log layout, for comparison with TVM's tools
};

struct ExportFilter {
  std::string template_name;  // empty: all
  std::string device_key;     // empty: all
  std::string workload_key;   // empty: all
  bool valid_only = false;
};

struct ImportOptions {
  // false: the first bad line aborts the import and nothing is imported.
  // true: bad lines are reported and skipped, the good ones imported.
  bool skip_bad_lines = false;
  // Called every 1,000 lines with the number of lines read so far, for a progress display.
  std::function<void(int64_t lines)> progress;
};

struct ImportResult {
  struct BadLine {
    int64_t line = 0;  // 1-based
    std::string message;
  };
  int64_t imported = 0;
  int64_t duplicates = 0;  // lines whose record was already there (import is idempotent)
  std::vector<BadLine> bad_lines;
};

class TuningDb {
 public:
  // Opens (or creates) the tuning log at `path`, migrating an older schema in one transaction.
  // Throws TuningDbError: kNotFound (missing file and !create), kNotATuningLog, kCorrupt,
  // kSchemaTooNew, kReadOnly (a writer on a file or directory it cannot write), kStorage.
  static TuningDb open(const std::string &path, const TuningDbOptions &options = {});

  TuningDb(TuningDb &&) noexcept;
  TuningDb &operator=(TuningDb &&) noexcept;
  ~TuningDb();

  const std::string &path() const;
  // Whether open() created the schema: the file was new (or empty).
  bool created() const;
  // Whether it was opened read-only (TuningDbOptions::read_only).
  bool read_only() const;

  // --- Records ---------------------------------------------------------------------------------
  // Inserts the records in one transaction: all of them or none. Workloads, targets and device
  // classes are registered on first use. Returns the new record ids, in order. Throws
  // kBadInput (naming the record and the field) for an invalid record: numbers outside their
  // ranges (db/record.h: config index 0 .. 2^53, costs finite, > 0 and below 1e6 s, a valid record
  // with at least one, wall cost finite and >= 0, timestamp 0 or from 2000 to a day from now), a
  // job that does not exist.
  std::vector<int64_t> insert(const std::vector<Record> &records);
  int64_t insert(const Record &record);

  // The best config of the workload on the target, as one of its valid records. A config measured
  // several times on one target (a tuning job times its leaders again at its end) ranks by the
  // upper median of its records' mean costs, and the record at that median is returned: one
  // lucky timing does not make a config the best, and a config measured once ranks by its one
  // record. Ties: the record stored first. nullopt when the workload or target is unknown or has
  // no valid record in scope.
  std::optional<Record> best(const std::string &workload_key, const Target &target,
                             Scope scope = Scope::kExactThenClass);
  // The k best configs in rank order, each as its record at the upper median (as best()); in the
  // device-class scope a config on each target ranks on its own.
  std::vector<Record> top_k(const std::string &workload_key, const Target &target, int64_t k,
                            Scope scope = Scope::kExactThenClass);
  // top_k() with each config's count of valid records (a tuner times its leaders again until each
  // has enough).
  std::vector<RankedConfig> ranked_configs(const std::string &workload_key, const Target &target, int64_t k,
                                           Scope scope = Scope::kExactThenClass);
  // The valid records of one config (index and space) of the workload on one target (its exact
  // target string on its device class), fastest first: the records best() ranks the config by.
  std::vector<Record> config_records(const std::string &workload_key, const Target &target, const Config &config);
  // Every record (or every valid one) of a template family on a device class, oldest first: the
  // transfer-learning set of the cost model.
  std::vector<Record> history(const HistoryQuery &query);
  // Calls `visit` for each matching record, oldest first, without holding them all in memory.
  void for_each_record(const ExportFilter &filter, const std::function<void(const Record &)> &visit);

  // --- Workloads and targets -------------------------------------------------------------------
  std::optional<Workload> workload(const std::string &key);
  // The workloads whose key starts with `prefix` (at most `limit`), for abbreviated keys.
  std::vector<Workload> workloads_with_prefix(const std::string &prefix, int64_t limit = 2);
  // Every workload (of one template when `template_name` is not empty) with its record counts.
  std::vector<WorkloadSummary> workloads(const std::string &template_name = {}, int64_t limit = 0);
  // The registered targets whose canonical string equals canonical_target(target_string).
  std::vector<Target> targets_named(const std::string &target_string);
  // The one registered target named `target_string` (its device class found in the log), or
  // nullopt when nothing was measured on it. Throws TuningDbError (kBadInput) naming the classes
  // when it was measured on several: the caller must then name one.
  std::optional<Target> only_target_named(const std::string &target_string);
  std::vector<Target> targets();

  // --- Jobs ------------------------------------------------------------------------------------
  int64_t create_job(const std::string &name, const nlohmann::json &spec, int64_t trials_total);
  // Sets a job's state, and its message when `message` is given. Throws kNotFound.
  void update_job(int64_t job_id, JobState state, const std::optional<std::string> &message = {});
  void set_job_total(int64_t job_id, int64_t trials_total);
  std::optional<Job> job(int64_t job_id);
  std::vector<Job> jobs();
  // The job and the configs it has already measured. Throws kNotFound.
  JobProgress job_progress(int64_t job_id);

  // --- Maintenance -----------------------------------------------------------------------------
  Stats stats();
  // Throws kBadInput for options without a scope, or a template, device class or workload the
  // log does not know. vacuum() gives the freed bytes back to the file system.
  PruneResult prune(const PruneOptions &options);
  // SQLite's integrity and foreign-key checks plus Kiln's own invariants (workload keys match
  // their content, valid records have a mean, failed ones do not, numbers lie in the ranges insert
  // keeps them in).
  CheckReport check();
  // Rebuilds the file to give space freed by prune() back to the file system.
  void vacuum();

  // --- Exchange --------------------------------------------------------------------------------
  // Writes one JSON object per line; returns the number of records written. `progress`, when
  // given, is called every 1,000 records with the number written so far.
  int64_t export_records(std::ostream &out, ExportFormat format, const ExportFilter &filter = {},
                         const std::function<void(int64_t records)> &progress = {});
  // Reads Kiln JSON lines (db/FORMAT.md) in one transaction.
  ImportResult import_records(std::istream &in, const ImportOptions &options = {});

  // The underlying connection, for tests and tools that need raw SQL.
  Database &database();

 private:
  struct Impl;
  explicit TuningDb(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::db
