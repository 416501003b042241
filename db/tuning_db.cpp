#include "contracts/workload.h"
#include "db/tuning_db.h"

#include "db/error.h"
#include "db/queries.h"
#include "db/record_json.h"
#include "db/schema.h"
#include "db/sqlite_db.h"
#include "db/version.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <istream>
#include <map>
#include <ostream>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace kiln::db {

namespace {

using Kind = TuningDbError::Kind;
using nlohmann::json;

double unix_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Resets a cached statement when the scope ends, so that no read lock outlives a query.
class Use {
 public:
  explicit Use(Statement &statement) : statement_(statement) {}
  ~Use() { statement_.reset(); }
  Use(const Use &) = delete;
  Use &operator=(const Use &) = delete;
  Statement *operator->() { return &statement_; }
  Statement &operator*() { return statement_; }

 private:
  Statement &statement_;
};

// The stored costs: a JSON array of numbers, as costs_json() writes it. Read with from_chars
// (locale-independent, exact for the shortest round-trip form); anything else goes through the
// JSON parser.
std::vector<double> parse_costs(std::string_view text) {
  std::vector<double> costs;
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    const char *p = text.data() + 1;
    const char *end = text.data() + text.size() - 1;
    bool ok = true;
    while (ok && p < end) {
      double value = 0;
      auto [next, error] = std::from_chars(p, end, value);
      ok = error == std::errc() && (next == end || *next == ',');
      costs.push_back(value);
      p = next + (next == end ? 0 : 1);
    }
    if (ok) return costs;
  }
  costs.clear();
  json parsed = json::parse(text, nullptr, false);
  if (parsed.is_array()) {
    for (const json &cost : parsed) {
      if (cost.is_number()) costs.push_back(cost.get<double>());
    }
  }
  return costs;
}

// Reads a row of KILN_DB_RECORD_SELECT (db/queries.h).
Record record_from_row(Statement &row) {
  Record record;
  record.id = row.column_int64(0);
  record.workload.key = row.column_text(1);
  record.workload.template_name = row.column_text(2);
  record.workload.args = row.column_text(3);
  record.workload.flop = row.column_double(4);
  record.target.target = row.column_text(5);
  record.target.device_key = row.column_text(6);
  record.target.model = row.column_text(7);
  if (!row.column_is_null(8)) record.job_id = row.column_int64(8);
  record.config.index = row.column_int64(9);
  record.config.space = row.column_text(10);
  record.config.knobs = knobs_from_text(row.column_view(11));
  record.error = error_class_from_code(static_cast<int>(row.column_int64(12))).value_or(ErrorClass::kUnknown);
  record.error_message = row.column_text(13);
  record.costs = parse_costs(row.column_view(14));
  record.wall_s = row.column_double(15);
  record.runner = row.column_text(16);
  record.kiln_version = row.column_text(17);
  record.timestamp = row.column_double(18);
  return record;
}

Job job_from_row(Statement &row) {
  Job job;
  job.id = row.column_int64(0);
  job.name = row.column_text(1);
  try {
    job.spec = parse_json(row.column_view(2));
  } catch (const TuningDbError &) {
    job.spec = json::object();
  }
  job.state = parse_job_state(row.column_text(3)).value_or(JobState::kFailed);
  job.trials_total = row.column_int64(4);
  job.trials_done = row.column_int64(5);
  job.message = row.column_text(6);
  job.created_at = row.column_double(7);
  job.updated_at = row.column_double(8);
  return job;
}

constexpr const char *kJobColumns = "id, name, spec, state, trials_total, trials_done, message, created_at, updated_at";

[[noreturn]] void bad_input(const std::string &message) { throw TuningDbError(Kind::kBadInput, message); }

// Workloads and target strings already checked in this batch, so that a batch of records of a
// few workloads hashes and parses each of them once.
struct Checked {
  std::unordered_map<std::string, const Workload *> workloads;  // by key
  std::unordered_set<std::string> targets;
};

// How validate() names a record's fields: as the members of Record (insert) or as the fields of a
// JSON line (import, db/FORMAT.md).
struct FieldNames {
  const char *index, *costs, *wall, *timestamp;
};
constexpr FieldNames kMemberNames{"config.index", "costs", "wall_s", "timestamp"};
constexpr FieldNames kLineNames{"field \"config.index\"", "field \"result.costs\"", "field \"result.wall\"",
                                "field \"timestamp\""};

// A number as a message shows it: shortest round-trip form, "inf" and "nan" spelled out.
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

// Checks what the schema cannot: the workload key matches its content, the target is canonical,
// numbers lie in their ranges (db/record.h). `where` names the record in messages, `names` its
// fields.
void validate(const Record &record, const std::string &where, Checked &checked,
              const FieldNames &names = kMemberNames) {
  const std::string at = where.empty() ? "" : where + ": ";
  const Workload &w = record.workload;
  if (w.template_name.empty()) bad_input(at + "workload template name is empty");
  auto seen = checked.workloads.find(w.key);
  if (seen == checked.workloads.end() || seen->second->template_name != w.template_name ||
      seen->second->args != w.args) {
    if (w.key != contracts::workload_key(w.template_name, w.args)) {
      bad_input(at + "workload key \"" + w.key + "\" does not match template " + w.template_name +
                " and its arguments (build workloads with Workload::make)");
    }
    checked.workloads[w.key] = &w;
  }
  if (!std::isfinite(w.flop) || w.flop < 0) bad_input(at + "flop count must be finite, >= 0");
  if (record.target.device_key.empty()) bad_input(at + "target has no device key");
  if (!checked.targets.count(record.target.target)) {
    if (canonical_target(record.target.target) != record.target.target) {
      bad_input(at + "target \"" + record.target.target + "\" is not canonical (build targets with Target::make)");
    }
    checked.targets.insert(record.target.target);
  }
  if (record.config.index < 0 || record.config.index > kMaxConfigIndex) {
    bad_input(at + names.index + " " + std::to_string(record.config.index) + " is out of range (0 .. 2^53)");
  }
  if (!error_class_from_code(static_cast<int>(record.error))) {
    bad_input(at + "error class " + std::to_string(static_cast<int>(record.error)) + " does not exist");
  }
  for (double cost : record.costs) {
    if (!cost_in_range(cost)) {
      bad_input(at + names.costs + " holds " + number_text(cost) +
                ": costs must be finite numbers of seconds, > 0 and below 1e6");
    }
  }
  if (record.valid() && record.costs.empty()) {
    bad_input(at + names.costs + " is empty: a valid (OK) measurement needs at least one cost");
  }
  if (!std::isfinite(record.wall_s) || record.wall_s < 0) {
    bad_input(at + names.wall + " " + number_text(record.wall_s) + ": the wall cost must be finite and >= 0");
  }
  // 0 stands for "now"; anything else must be a time Kiln could have measured at.
  if (record.timestamp != 0 &&
      !(record.timestamp >= kEarliestTimestamp && record.timestamp <= unix_now() + kTimestampLeewaySeconds)) {
    bad_input(at + names.timestamp + " " + number_text(record.timestamp) +
              " is out of range: Unix seconds from 2000-01-01 to a day from now (0: now)");
  }
}

std::string costs_json(const std::vector<double> &costs) { return json(costs).dump(); }

// Reads lines of at most `limit` bytes in blocks. Of a longer line only its length is noted: it is
// skipped up to its end, so one huge line cannot take the memory a whole-line read would.
class LineReader {
 public:
  enum class Status { kLine, kTooLong, kEnd };

  LineReader(std::istream &in, size_t limit) : in_(in), limit_(limit), buffer_(size_t{1} << 16) {}

  // The next line, without its '\n'.
  Status next(std::string &line) {
    line.clear();
    bool started = false, too_long = false;
    for (;;) {
      if (pos_ == end_ && !fill()) {
        if (!started) return Status::kEnd;
        return too_long ? Status::kTooLong : Status::kLine;
      }
      started = true;
      const char *begin = buffer_.data() + pos_;
      const char *newline = static_cast<const char *>(std::memchr(begin, '\n', end_ - pos_));
      size_t length = newline ? static_cast<size_t>(newline - begin) : end_ - pos_;
      if (!too_long && line.size() + length > limit_) {
        too_long = true;
        line.clear();
      }
      if (!too_long) line.append(begin, length);
      pos_ += length;
      if (newline) {
        ++pos_;
        return too_long ? Status::kTooLong : Status::kLine;
      }
    }
  }

 private:
  bool fill() {
    in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    pos_ = 0;
    end_ = static_cast<size_t>(in_.gcount());
    return end_ > 0;
  }

  std::istream &in_;
  size_t limit_;
  std::vector<char> buffer_;
  size_t pos_ = 0, end_ = 0;
};

}  // namespace

// Why `path` cannot be written, as far as access() tells, or "" when it can.
std::string why_unwritable(const std::string &path) {
  namespace fs = std::filesystem;
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0) {
    return std::string("the file is read-only (") + std::strerror(errno) + ")";
  }
  fs::path directory = fs::path(path).parent_path();
  if (directory.empty()) directory = ".";
  if (::access(directory.c_str(), W_OK) != 0) {
    return "its directory " + directory.string() + " is read-only (" + std::strerror(errno) + "), and SQLite keeps " +
           fs::path(path).filename().string() + "-wal and -shm there";
  }
  return "";
}

// The TuningDbError for a failure of the machine (`e.is_environment()`) while doing `what` (empty:
// while opening).
TuningDbError environment_error(const DbError &e, const std::string &path, const std::string &what) {
  std::string at = path + ": " + (what.empty() ? "" : what + ": ");
  if (e.is_read_only() || e.is_cannot_open()) {
    std::string why = why_unwritable(path);
    if (!why.empty()) return TuningDbError(Kind::kReadOnly, at + "cannot write it: " + why);
    if (e.is_read_only()) {
      return TuningDbError(Kind::kReadOnly, at + "cannot write it (a read-only file system, or opened read-only)");
    }
  }
  return TuningDbError(Kind::kStorage, at + e.environment_reason() + " (" + e.what() + ")");
}

// --- Impl ----------------------------------------------------------------------------------------

struct TuningDb::Impl {
  Database db;
  std::string path;
  TuningDbOptions options;
  bool created = false;  // this open() created the schema
  std::unordered_map<std::string, Statement> statements;
  std::minstd_rand rng{std::random_device{}()};

  Impl(Database database, std::string file, const TuningDbOptions &opts)
      : db(std::move(database)), path(std::move(file)), options(opts) {}

  // Refuses a write on a log opened for reading.
  void require_writable(const std::string &what) const {
    if (options.read_only) {
      throw TuningDbError(Kind::kReadOnly, path + ": " + what + ": the tuning log was opened read-only");
    }
  }

  Statement &statement(const std::string &sql) {
    auto it = statements.find(sql);
    if (it == statements.end()) it = statements.emplace(sql, db.prepare(sql)).first;
    return it->second;
  }

  // Throws what a failed SQLite call means: a TuningDbError for what the user can act on (a damaged
  // file, a lock held too long, the machine's failures), the DbError itself, with the file and
  // the operation added, for a bug in Kiln.
  [[noreturn]] void raise(const DbError &e, const std::string &what) const {
    if (e.is_corrupt()) {
      throw TuningDbError(Kind::kCorrupt, path + ": " + what + ": the database file is damaged (" + e.what() +
                                              "); `kiln db check` reports what is wrong");
    }
    if (e.is_busy()) {
      throw TuningDbError(Kind::kBusy, path + ": " + what + ": still locked by other connections after " +
                                           std::to_string(options.retry_deadline.count()) + " ms of retries (" +
                                           e.what() + ")");
    }
    if (e.is_environment()) throw environment_error(e, path, what);
    throw DbError(path + ": " + what + ": " + e.what(), e.code());
  }

  // Waits a randomised, growing time before the next attempt; false once the deadline is near.
  bool back_off(std::chrono::steady_clock::time_point deadline, int attempt) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    int cap_ms = std::min(1 << std::min(attempt, 7), 100);
    std::uniform_int_distribution<int> jitter(1, cap_ms);
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(jitter(rng)), deadline - now));
    return true;
  }

  // Runs `body` in a write transaction (BEGIN IMMEDIATE) and commits unless `commit` is false.
  // While other connections hold the lock, the whole transaction is retried with back-off until
  // the retry deadline, so `body` must only touch the database and its own locals.
  template <class F>
  auto write(const std::string &what, F &&body, bool commit = true) -> decltype(body()) {
    require_writable(what);
    auto deadline = std::chrono::steady_clock::now() + options.retry_deadline;
    for (int attempt = 0;; ++attempt) {
      try {
        Transaction transaction(db);
        if constexpr (std::is_void_v<decltype(body())>) {
          body();
          if (commit) transaction.commit();
          return;
        } else {
          auto result = body();
          if (commit) transaction.commit();
          return result;
        }
      } catch (const DbError &e) {
        if (!e.is_busy() || !back_off(deadline, attempt)) raise(e, what);
      }
    }
  }

  // Runs a read-only `body`, retrying while the database is busy (rare in WAL mode: recovery or
  // a checkpoint in progress).
  template <class F>
  auto read(const std::string &what, F &&body) -> decltype(body()) {
    auto deadline = std::chrono::steady_clock::now() + options.retry_deadline;
    for (int attempt = 0;; ++attempt) {
      try {
        return body();
      } catch (const DbError &e) {
        if (!e.is_busy() || !back_off(deadline, attempt)) raise(e, what);
      }
    }
  }

  // --- lookups ---

  std::optional<int64_t> device_id(const std::string &device_key) {
    Use q(statement("SELECT id FROM device WHERE device_key = ?"));
    q->bind(1, device_key);
    if (!q->step()) return std::nullopt;
    return q->column_int64(0);
  }

  std::optional<int64_t> target_id(const std::string &target, int64_t device) {
    Use q(statement("SELECT id FROM target WHERE target = ? AND device_id = ?"));
    q->bind(1, target).bind(2, device);
    if (!q->step()) return std::nullopt;
    return q->column_int64(0);
  }

  // --- inserting ---

  // Ids resolved within one write transaction. They are dropped with it, so a rolled-back
  // transaction never leaves a stale id behind.
  struct BatchIds {
    std::unordered_map<std::string, int64_t> workloads;
    std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> targets;
    std::unordered_set<int64_t> jobs;
  };

  int64_t ensure_workload(const Workload &w, BatchIds &ids) {
    auto it = ids.workloads.find(w.key);
    if (it != ids.workloads.end()) return it->second;
    int64_t id;
    {
      Use q(statement("SELECT id, template_name, args FROM workload WHERE workload_key = ?"));
      q->bind(1, w.key);
      if (q->step()) {
        if (q->column_text(1) != w.template_name || q->column_text(2) != w.args) {
          bad_input("workload key " + w.key + " is stored with different content");
        }
        id = q->column_int64(0);
        ids.workloads.emplace(w.key, id);
        return id;
      }
    }
    Use insert(
        statement("INSERT INTO workload (workload_key, template_name, args, flop, created_at) "
                  "VALUES (?, ?, ?, ?, ?)"));
    insert->bind(1, w.key).bind(2, w.template_name).bind(3, w.args).bind(4, w.flop);
    insert->bind(5, unix_now());
    insert->run();
    id = db.last_insert_rowid();
    ids.workloads.emplace(w.key, id);
    return id;
  }

  std::pair<int64_t, int64_t> ensure_target(const Target &t, BatchIds &ids) {
    auto key = std::make_pair(t.target, t.device_key);
    auto it = ids.targets.find(key);
    if (it != ids.targets.end()) return it->second;
    std::optional<int64_t> device = device_id(t.device_key);
    if (!device) {
      Use insert(statement("INSERT INTO device (device_key) VALUES (?)"));
      insert->bind(1, t.device_key);
      insert->run();
      device = db.last_insert_rowid();
    }
    std::optional<int64_t> target = target_id(t.target, *device);
    if (!target) {
      Use insert(statement("INSERT INTO target (target, device_id, model) VALUES (?, ?, ?)"));
      insert->bind(1, t.target).bind(2, *device).bind(3, t.model);
      insert->run();
      target = db.last_insert_rowid();
    }
    auto ids_pair = std::make_pair(*target, *device);
    ids.targets.emplace(key, ids_pair);
    return ids_pair;
  }

  void ensure_job(int64_t job, BatchIds &ids) {
    if (ids.jobs.count(job)) return;
    Use q(statement("SELECT 1 FROM job WHERE id = ?"));
    q->bind(1, job);
    if (!q->step()) bad_input("job " + std::to_string(job) + " does not exist");
    ids.jobs.insert(job);
  }

  // Inserts one validated record inside the current write transaction. With `skip_duplicate`,
  // a record identical to a stored one (same workload, target, config, result, runner and time)
  // is not inserted again and 0 is returned.
  int64_t insert_one(const Record &r, BatchIds &ids, bool skip_duplicate = false) {
    int64_t workload = ensure_workload(r.workload, ids);
    auto [target, device] = ensure_target(r.target, ids);
    if (r.job_id) ensure_job(*r.job_id, ids);
    double timestamp = r.timestamp > 0 ? r.timestamp : unix_now();
    const std::string &version = r.kiln_version.empty() ? kiln_version() : r.kiln_version;
    std::optional<double> mean;
    if (r.valid()) mean = r.mean();

    if (skip_duplicate) {
      Use q(statement(queries::kDuplicate));
      q->bind(1, workload).bind(2, target).bind(3, static_cast<int>(r.error));
      if (mean) {
        q->bind(4, *mean);
      } else {
        q->bind_null(4);
      }
      q->bind(5, r.config.index).bind(6, timestamp).bind(7, r.runner).bind(8, r.config.space);
      if (q->step()) return 0;
    }

    Use insert(
        statement("INSERT INTO record (workload_id, target_id, device_id, job_id, config_index, space, "
                  "config, error_class, error_msg, costs, mean_s, wall_s, runner, kiln_version, "
                  "measured_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert->bind(1, workload).bind(2, target).bind(3, device);
    if (r.job_id) {
      insert->bind(4, *r.job_id);
    } else {
      insert->bind_null(4);
    }
    insert->bind(5, r.config.index).bind(6, r.config.space);
    try {
      insert->bind(7, r.config.knobs_json());
    } catch (const contracts::ConfigRecordError &e) {
      bad_input(e.what());
    }
    insert->bind(8, static_cast<int>(r.error)).bind(9, r.error_message);
    insert->bind(10, costs_json(r.costs));
    if (mean) {
      insert->bind(11, *mean);
    } else {
      insert->bind_null(11);
    }
    insert->bind(12, r.wall_s).bind(13, r.runner).bind(14, version).bind(15, timestamp);
    insert->run();
    return db.last_insert_rowid();
  }

  void add_job_progress(const std::unordered_map<int64_t, int64_t> &counts) {
    for (const auto &[job, count] : counts) {
      Use update(statement("UPDATE job SET trials_done = trials_done + ?, updated_at = ? WHERE id = ?"));
      update->bind(1, count).bind(2, unix_now()).bind(3, job);
      update->run();
    }
  }

  // --- querying ---

  // The valid records of one config on one target, fastest first (ties: stored first).
  std::vector<Record> config_records(const std::string &key, const Target &target, const Config &config) {
    std::vector<Record> all;
    Use q(statement(queries::kConfigRecords));
    q->bind(1, key)
        .bind(2, canonical_target(target.target))
        .bind(3, target.device_key)
        .bind(4, config.index)
        .bind(5, config.space);
    while (q->step()) all.push_back(record_from_row(*q));
    std::sort(all.begin(), all.end(), ranks_before);
    return all;
  }

  static bool ranks_before(const Record &a, const Record &b) {
    return a.mean() < b.mean() || (a.mean() == b.mean() && a.id < b.id);
  }

  // The k best configs, each as the record at the upper median of its valid records on its
  // target (TuningDb::top_k). `fastest` yields valid records fastest first; each config met there
  // for the first time has its records read by a seek on the config. A config's upper median is
  // never below its fastest record, so reading stops once k configs rank at or below the next
  // record's mean: every config not yet met would rank after them.
  std::vector<RankedConfig> ranked(Use &fastest, int64_t k) {
    auto before = [](const RankedConfig &a, const RankedConfig &b) { return ranks_before(a.median, b.median); };
    std::vector<RankedConfig> best;  // at most k, in rank order
    std::set<std::tuple<std::string, std::string, int64_t, std::string>> met;
    while (fastest->step()) {
      Record r = record_from_row(*fastest);
      if (static_cast<int64_t>(best.size()) == k && r.mean() > best.back().median.mean()) break;
      if (!met.emplace(r.target.target, r.target.device_key, r.config.index, r.config.space).second) continue;
      std::vector<Record> all = config_records(r.workload.key, r.target, r.config);
      if (all.empty()) all.push_back(std::move(r));
      RankedConfig c{std::move(all[all.size() / 2]), static_cast<int64_t>(all.size())};
      best.insert(std::upper_bound(best.begin(), best.end(), c, before), std::move(c));
      if (static_cast<int64_t>(best.size()) > k) best.pop_back();
    }
    return best;
  }

  // One read snapshot for the whole lookup (when no transaction is open already).
  std::vector<RankedConfig> lookup(const std::string &key, const Target &query, int64_t k, Scope scope) {
    if (k <= 0) return {};
    std::optional<Transaction> snapshot;
    if (db.autocommit()) snapshot.emplace(db, Transaction::Mode::kRead);
    if (scope != Scope::kDeviceClass) {
      std::string target = canonical_target(query.target);
      Use exact(statement(queries::kRankedOnTarget));
      exact->bind(1, key).bind(2, target).bind(3, query.device_key).bind(4, int64_t{-1});
      std::vector<RankedConfig> configs = ranked(exact, k);
      if (!configs.empty() || scope == Scope::kExact) return configs;
    }
    Use by_class(statement(queries::kRankedOnDevice));
    by_class->bind(1, key).bind(2, query.device_key).bind(3, int64_t{-1});
    return ranked(by_class, k);
  }

  void for_each(const ExportFilter &filter, int64_t limit, const std::function<void(const Record &)> &visit) {
    std::string sql = KILN_DB_RECORD_SELECT "WHERE 1";
    std::vector<std::string> params;
    if (!filter.template_name.empty()) {
      sql += " AND w.template_name = ?";
      params.push_back(filter.template_name);
    }
    if (!filter.device_key.empty()) {
      sql += " AND d.device_key = ?";
      params.push_back(filter.device_key);
    }
    if (!filter.workload_key.empty()) {
      sql += " AND w.workload_key = ?";
      params.push_back(filter.workload_key);
    }
    if (filter.valid_only) sql += " AND r.error_class = 0";
    sql += " ORDER BY r.id";
    if (limit > 0) sql += " LIMIT " + std::to_string(limit);
    Statement q = db.prepare(sql);
    for (size_t i = 0; i < params.size(); ++i) q.bind(static_cast<int>(i + 1), params[i]);
    while (q.step()) visit(record_from_row(q));
  }
};

// --- TuningDb ------------------------------------------------------------------------------------

TuningDb::TuningDb(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TuningDb::TuningDb(TuningDb &&) noexcept = default;
TuningDb &TuningDb::operator=(TuningDb &&) noexcept = default;
TuningDb::~TuningDb() = default;

const std::string &TuningDb::path() const { return impl_->path; }
Database &TuningDb::database() { return impl_->db; }

namespace {

// What a failed SQLite call while opening `path` means (see Impl::raise); busy is retried first.
[[noreturn]] void opening_failed(const DbError &e, const std::string &path) {
  if (e.is_not_a_database()) {
    throw TuningDbError(Kind::kNotATuningLog, path + " is not a Kiln tuning log (SQLite: file is not a database)");
  }
  if (e.is_corrupt()) {
    throw TuningDbError(Kind::kCorrupt, path + " is damaged and cannot be opened (" + std::string(e.what()) + ")");
  }
  if (e.is_busy()) {
    throw TuningDbError(Kind::kBusy, path + ": opening: still locked by other connections (" + e.what() + ")");
  }
  if (e.is_environment()) throw environment_error(e, path, "");
  throw DbError("opening " + path + ": " + e.what(), e.code());
}

// Runs `body` until it does not fail with SQLITE_BUSY or the deadline passes.
template <class F>
auto retrying(const std::string &path, std::chrono::milliseconds deadline_after, F &&body) -> decltype(body()) {
  auto deadline = std::chrono::steady_clock::now() + deadline_after;
  std::minstd_rand rng{std::random_device{}()};
  for (int attempt = 0;; ++attempt) {
    try {
      return body();
    } catch (const DbError &e) {
      if (e.is_busy() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(
            std::uniform_int_distribution<int>(1, std::min(1 << std::min(attempt, 7), 100))(rng)));
        continue;
      }
      opening_failed(e, path);
    }
  }
}

// Reads what every reader reads first, so that a file it cannot read fails here: the header
// (through the WAL index of a WAL file) and the schema.
void probe(Database &db, const std::string &path) {
  check_openable(db, path);
  Statement schema = db.prepare("SELECT count(*) FROM sqlite_schema");
  schema.step();
  schema.reset();
}

// Opens `path` for reading only. A reader of a WAL file needs its WAL index (PATH-shm), which it
// creates when it is missing; in a directory it cannot write it cannot, and SQLite reports that as
// a write to a read-only database. There the file is read as immutable (no locks, no index): no
// writer can be at work in a directory no one can write, but a WAL that still holds changes would
// be ignored, so that case is refused.
Database open_for_reading(const std::string &path, const TuningDbOptions &options) {
  OpenOptions read;
  read.busy_timeout = options.busy_timeout;
  read.read_only = true;
  try {
    Database db(path, read);
    probe(db, path);
    return db;
  } catch (const DbError &e) {
    if (!e.is_read_only() && !e.is_cannot_open()) throw;
  }
  std::string why = why_unwritable(path);
  if (why.empty()) {
    // It can be written after all: the WAL needs recovering after a crash, which only a writer
    // may do. A connection that could write does it, and this one writes nothing else.
    OpenOptions write;
    write.busy_timeout = options.busy_timeout;
    write.create = false;
    write.wal = false;
    Database db(path, write);
    probe(db, path);
    return db;
  }
  std::error_code ec;
  auto wal_bytes = std::filesystem::file_size(path + "-wal", ec);
  if (!ec && wal_bytes > 0) {
    throw TuningDbError(Kind::kReadOnly, "cannot read " + path + ": " + why + "; its last changes are still in " +
                                             path + "-wal, which only a process that may write there can read");
  }
  read.immutable = true;
  Database db(path, read);
  probe(db, path);
  return db;
}

}  // namespace

TuningDb TuningDb::open(const std::string &path, const TuningDbOptions &options) {
  namespace fs = std::filesystem;
  bool in_memory = path == ":memory:";
  bool create = options.create && !options.read_only;
  std::error_code ec;
  if (!in_memory) {
    if (path.empty()) throw TuningDbError(Kind::kNotFound, "no tuning-log path given");
    if (fs::is_directory(path, ec)) {
      throw TuningDbError(Kind::kNotATuningLog, path + " is a directory, not a Kiln tuning log");
    }
    bool exists = fs::exists(path, ec);
    if (!exists && !create) throw TuningDbError(Kind::kNotFound, "no tuning log at " + path);
    if (exists && !create && fs::file_size(path, ec) == 0 && !ec) {
      throw TuningDbError(Kind::kNotATuningLog, path +
                                                    " is empty (0 bytes), not a Kiln tuning log; a command that "
                                                    "writes to it, such as `kiln db import`, makes it one");
    }
  }

  if (options.read_only && !in_memory) {
    Database db = retrying(path, options.retry_deadline, [&] { return open_for_reading(path, options); });
    if (is_empty_database(db)) {
      throw TuningDbError(Kind::kNotATuningLog, path + " is an empty SQLite database, not a Kiln tuning log");
    }
    int version = schema_version(db);
    if (version < kMinReadableSchemaVersion) {
      // Too old to read as it is: migrated by a writer first, where the file may be written.
      std::string why = why_unwritable(path);
      if (!why.empty()) {
        throw TuningDbError(Kind::kReadOnly, "cannot read " + path + ": its tuning-log schema version " +
                                                 std::to_string(version) + " must first be migrated to " +
                                                 std::to_string(kSchemaVersion) + ", which needs writing it, but " +
                                                 why);
      }
      TuningDbOptions writer = options;
      writer.read_only = false;
      writer.create = false;
      open(path, writer);
      return open(path, options);
    }
    retrying(path, options.retry_deadline, [&] {
      db.exec("PRAGMA cache_size = -65536");  // 64 MiB of page cache
      db.exec("PRAGMA temp_store = MEMORY");
    });
    return TuningDb(std::make_unique<Impl>(std::move(db), path, options));
  }

  OpenOptions open_options;
  open_options.busy_timeout = options.busy_timeout;
  open_options.create = create;
  open_options.wal = false;  // not before check_openable(): a refused file is left as it was
  return retrying(path, options.retry_deadline, [&] {
    Database db(path, open_options);
    if (db.read_only()) {
      // SQLite opens a write-protected file for reading instead; this caller means to write.
      std::string why = why_unwritable(path);
      throw TuningDbError(Kind::kReadOnly,
                          path + ": cannot write it: " + (why.empty() ? "the file is write-protected" : why));
    }
    check_openable(db, path);
    db.enable_wal();
    db.exec(options.durable ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA cache_size = -65536");  // 64 MiB of page cache
    db.exec("PRAGMA temp_store = MEMORY");
    bool created = prepare_schema(db, path);
    auto impl = std::make_unique<Impl>(std::move(db), path, options);
    impl->created = created;
    return TuningDb(std::move(impl));
  });
}

bool TuningDb::created() const { return impl_->created; }
bool TuningDb::read_only() const { return impl_->options.read_only; }

std::vector<int64_t> TuningDb::insert(const std::vector<Record> &records) {
  Checked checked;
  for (size_t i = 0; i < records.size(); ++i) {
    validate(records[i], "record " + std::to_string(i + 1) + " of " + std::to_string(records.size()), checked);
  }
  if (records.empty()) return {};
  return impl_->write("inserting " + std::to_string(records.size()) + " records", [&] {
    Impl::BatchIds ids;
    std::unordered_map<int64_t, int64_t> job_counts;
    std::vector<int64_t> result;
    result.reserve(records.size());
    for (const Record &record : records) {
      result.push_back(impl_->insert_one(record, ids));
      if (record.job_id) ++job_counts[*record.job_id];
    }
    impl_->add_job_progress(job_counts);
    return result;
  });
}

int64_t TuningDb::insert(const Record &record) { return insert(std::vector<Record>{record})[0]; }

std::optional<Record> TuningDb::best(const std::string &workload_key, const Target &target, Scope scope) {
  std::vector<Record> top = top_k(workload_key, target, 1, scope);
  if (top.empty()) return std::nullopt;
  return std::move(top[0]);
}

std::vector<Record> TuningDb::config_records(const std::string &workload_key, const Target &target,
                                             const Config &config) {
  return impl_->read("reading a config's records", [&] { return impl_->config_records(workload_key, target, config); });
}

std::vector<RankedConfig> TuningDb::ranked_configs(const std::string &workload_key, const Target &target, int64_t k,
                                                   Scope scope) {
  return impl_->read("looking up the best configs", [&] { return impl_->lookup(workload_key, target, k, scope); });
}

std::vector<Record> TuningDb::top_k(const std::string &workload_key, const Target &target, int64_t k, Scope scope) {
  std::vector<Record> records;
  for (RankedConfig &c : ranked_configs(workload_key, target, k, scope)) records.push_back(std::move(c.median));
  return records;
}

std::vector<Record> TuningDb::history(const HistoryQuery &query) {
  if (query.template_name.empty() || query.device_key.empty()) {
    bad_input("history needs a template name and a device key");
  }
  ExportFilter filter;
  filter.template_name = query.template_name;
  filter.device_key = query.device_key;
  filter.valid_only = query.valid_only;
  return impl_->read("reading history", [&] {
    std::vector<Record> records;
    impl_->for_each(filter, query.limit, [&](const Record &r) { records.push_back(r); });
    return records;
  });
}

void TuningDb::for_each_record(const ExportFilter &filter, const std::function<void(const Record &)> &visit) {
  // Not retried: `visit` may already have seen records when the database turns out to be busy.
  try {
    impl_->for_each(filter, 0, visit);
  } catch (const DbError &e) {
    impl_->raise(e, "reading records");
  }
}

std::optional<Workload> TuningDb::workload(const std::string &key) {
  return impl_->read("looking up a workload", [&]() -> std::optional<Workload> {
    Use q(impl_->statement("SELECT workload_key, template_name, args, flop FROM workload WHERE workload_key = ?"));
    q->bind(1, key);
    if (!q->step()) return std::nullopt;
    Workload w;
    w.key = q->column_text(0);
    w.template_name = q->column_text(1);
    w.args = q->column_text(2);
    w.flop = q->column_double(3);
    return w;
  });
}

std::vector<Workload> TuningDb::workloads_with_prefix(const std::string &prefix, int64_t limit) {
  return impl_->read("looking up workloads", [&] {
    // Keys are lower-case hex, so every key with this prefix sorts below prefix + 'g'.
    Use q(
        impl_->statement("SELECT workload_key, template_name, args, flop FROM workload "
                         "WHERE workload_key >= ? AND workload_key < ? ORDER BY workload_key LIMIT ?"));
    q->bind(1, prefix).bind(2, prefix + "g").bind(3, limit);
    std::vector<Workload> result;
    while (q->step()) {
      Workload w;
      w.key = q->column_text(0);
      w.template_name = q->column_text(1);
      w.args = q->column_text(2);
      w.flop = q->column_double(3);
      result.push_back(std::move(w));
    }
    return result;
  });
}

std::vector<WorkloadSummary> TuningDb::workloads(const std::string &template_name, int64_t limit) {
  return impl_->read("listing workloads", [&] {
    std::string sql =
        "SELECT w.workload_key, w.template_name, w.args, w.flop, count(r.id), "
        "count(CASE WHEN r.error_class = 0 THEN 1 END), min(r.mean_s) "
        "FROM workload w LEFT JOIN record r ON r.workload_id = w.id";
    if (!template_name.empty()) sql += " WHERE w.template_name = ?";
    sql += " GROUP BY w.id ORDER BY w.template_name, w.workload_key";
    if (limit > 0) sql += " LIMIT " + std::to_string(limit);
    Statement q = impl_->db.prepare(sql);
    if (!template_name.empty()) q.bind(1, template_name);
    std::vector<WorkloadSummary> result;
    while (q.step()) {
      WorkloadSummary s;
      s.workload.key = q.column_text(0);
      s.workload.template_name = q.column_text(1);
      s.workload.args = q.column_text(2);
      s.workload.flop = q.column_double(3);
      s.records = q.column_int64(4);
      s.valid = q.column_int64(5);
      if (!q.column_is_null(6)) s.best_mean_s = q.column_double(6);
      result.push_back(std::move(s));
    }
    return result;
  });
}

std::vector<Target> TuningDb::targets_named(const std::string &target_string) {
  std::string canonical = canonical_target(target_string);
  return impl_->read("looking up targets", [&] {
    Use q(
        impl_->statement("SELECT t.target, d.device_key, t.model FROM target t JOIN device d ON d.id = t.device_id "
                         "WHERE t.target = ? ORDER BY d.device_key"));
    q->bind(1, canonical);
    std::vector<Target> result;
    while (q->step()) result.push_back({q->column_text(0), q->column_text(1), q->column_text(2)});
    return result;
  });
}

std::optional<Target> TuningDb::only_target_named(const std::string &target_string) {
  std::vector<Target> known = targets_named(target_string);
  if (known.empty()) return std::nullopt;
  if (known.size() > 1) {
    std::string classes;
    for (const auto &t : known) classes += (classes.empty() ? "" : ", ") + t.device_key;
    throw TuningDbError(TuningDbError::Kind::kBadInput, "target \"" + known[0].target +
                                                            "\" was measured on several device classes (" + classes +
                                                            "); name one of them");
  }
  return known[0];
}

std::vector<Target> TuningDb::targets() {
  return impl_->read("listing targets", [&] {
    Use q(
        impl_->statement("SELECT t.target, d.device_key, t.model FROM target t JOIN device d ON d.id = t.device_id "
                         "ORDER BY d.device_key, t.target"));
    std::vector<Target> result;
    while (q->step()) result.push_back({q->column_text(0), q->column_text(1), q->column_text(2)});
    return result;
  });
}

// --- jobs ----------------------------------------------------------------------------------------

int64_t TuningDb::create_job(const std::string &name, const json &spec, int64_t trials_total) {
  if (trials_total < 0) bad_input("job " + name + ": trials_total must be >= 0");
  std::string spec_text = canonical_json(spec.is_null() ? json::object() : spec);
  return impl_->write("creating job " + name, [&] {
    Use insert(
        impl_->statement("INSERT INTO job (name, spec, state, trials_total, created_at, updated_at) "
                         "VALUES (?, ?, 'pending', ?, ?, ?)"));
    double now = unix_now();
    insert->bind(1, name).bind(2, spec_text).bind(3, trials_total).bind(4, now).bind(5, now);
    insert->run();
    return impl_->db.last_insert_rowid();
  });
}

void TuningDb::update_job(int64_t job_id, JobState state, const std::optional<std::string> &message) {
  impl_->write("updating job " + std::to_string(job_id), [&] {
    Use update(
        impl_->statement("UPDATE job SET state = ?, message = coalesce(?, message), updated_at = ? WHERE id = ?"));
    update->bind(1, to_string(state));
    if (message) {
      update->bind(2, *message);
    } else {
      update->bind_null(2);
    }
    update->bind(3, unix_now()).bind(4, job_id);
    update->run();
    if (impl_->db.changes() == 0) {
      throw TuningDbError(Kind::kNotFound, "job " + std::to_string(job_id) + " does not exist");
    }
  });
}

void TuningDb::set_job_total(int64_t job_id, int64_t trials_total) {
  if (trials_total < 0) bad_input("trials_total must be >= 0");
  impl_->write("updating job " + std::to_string(job_id), [&] {
    Use update(impl_->statement("UPDATE job SET trials_total = ?, updated_at = ? WHERE id = ?"));
    update->bind(1, trials_total).bind(2, unix_now()).bind(3, job_id);
    update->run();
    if (impl_->db.changes() == 0) {
      throw TuningDbError(Kind::kNotFound, "job " + std::to_string(job_id) + " does not exist");
    }
  });
}

std::optional<Job> TuningDb::job(int64_t job_id) {
  return impl_->read("reading job", [&]() -> std::optional<Job> {
    Use q(impl_->statement(std::string("SELECT ") + kJobColumns + " FROM job WHERE id = ?"));
    q->bind(1, job_id);
    if (!q->step()) return std::nullopt;
    return job_from_row(*q);
  });
}

std::vector<Job> TuningDb::jobs() {
  return impl_->read("listing jobs", [&] {
    Use q(impl_->statement(std::string("SELECT ") + kJobColumns + " FROM job ORDER BY id"));
    std::vector<Job> result;
    while (q->step()) result.push_back(job_from_row(*q));
    return result;
  });
}

JobProgress TuningDb::job_progress(int64_t job_id) {
  return impl_->read("reading job progress", [&] {
    // One read transaction, so the job row and its records are seen at the same moment.
    Transaction snapshot(impl_->db, Transaction::Mode::kRead);
    JobProgress progress;
    {
      Use q(impl_->statement(std::string("SELECT ") + kJobColumns + " FROM job WHERE id = ?"));
      q->bind(1, job_id);
      if (!q->step()) {
        throw TuningDbError(Kind::kNotFound, "job " + std::to_string(job_id) + " does not exist");
      }
      progress.job = job_from_row(*q);
    }
    Use q(impl_->statement(queries::kJobMeasured));
    q->bind(1, job_id);
    while (q->step()) {
      progress.measured[q->column_text(0)].insert(q->column_int64(1));
      ++progress.records;
    }
    return progress;
  });
}

// --- maintenance ---------------------------------------------------------------------------------

Stats TuningDb::stats() {
  return impl_->read("computing statistics", [&] {
    Stats s;
    auto count = [&](const char *sql) {
      Use q(impl_->statement(sql));
      return q->step() ? q->column_int64(0) : int64_t{0};
    };
    s.schema_version = schema_version(impl_->db);
    s.workloads = count("SELECT count(*) FROM workload");
    s.targets = count("SELECT count(*) FROM target");
    s.devices = count("SELECT count(*) FROM device");
    s.jobs = count("SELECT count(*) FROM job");
    s.file_bytes = count("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size");
    Use q(
        impl_->statement("SELECT error_class, count(*), min(measured_at), max(measured_at) FROM record "
                         "GROUP BY error_class"));
    while (q->step()) {
      ErrorClass error = error_class_from_code(static_cast<int>(q->column_int64(0))).value_or(ErrorClass::kUnknown);
      int64_t n = q->column_int64(1);
      s.by_error[error] += n;
      s.records += n;
      if (error == ErrorClass::kOk) s.valid += n;
      double first = q->column_double(2), last = q->column_double(3);
      s.first_timestamp = s.first_timestamp ? std::min(*s.first_timestamp, first) : first;
      s.last_timestamp = s.last_timestamp ? std::max(*s.last_timestamp, last) : last;
    }
    return s;
  });
}

PruneResult TuningDb::prune(const PruneOptions &options) {
  if (options.keep < 0) bad_input("prune: the number of records to keep must be >= 0");
  bool scoped = !options.template_name.empty() || !options.device_key.empty() || !options.workload_key.empty();
  if (!scoped && !options.all) {
    bad_input("prune: name what to prune (a template, a device class or a workload), or all records");
  }
  if (scoped && options.all) bad_input("prune: all records, or a template, device class or workload, not both");
  // The scope as a condition on a record row, and its parameters in order.
  std::string scope = "1";
  std::vector<std::string> params;
  if (!options.template_name.empty()) {
    scope += " AND workload_id IN (SELECT id FROM workload WHERE template_name = ?)";
    params.push_back(options.template_name);
  }
  if (!options.device_key.empty()) {
    scope += " AND device_id = (SELECT id FROM device WHERE device_key = ?)";
    params.push_back(options.device_key);
  }
  if (!options.workload_key.empty()) {
    scope += " AND workload_id = (SELECT id FROM workload WHERE workload_key = ?)";
    params.push_back(options.workload_key);
  }
  constexpr const char *kUnfinishedJob =
      "(job_id IS NULL OR job_id NOT IN "
      "(SELECT id FROM job WHERE state IN ('pending', 'running', 'paused')))";
  auto known = [&](const char *sql, const std::string &value, const std::string &what) {
    if (value.empty()) return;
    Statement q = impl_->db.prepare(sql);
    q.bind(1, value);
    if (!q.step()) bad_input("prune: no " + what + " in " + impl_->path);
    q.reset();
  };
  return impl_->write(
      "pruning",
      [&] {
        known("SELECT 1 FROM workload WHERE template_name = ?", options.template_name,
              "workload of template \"" + options.template_name + "\"");
        known("SELECT 1 FROM device WHERE device_key = ?", options.device_key,
              "device class \"" + options.device_key + "\"");
        known("SELECT 1 FROM workload WHERE workload_key = ?", options.workload_key,
              "workload " + options.workload_key);
        // Runs a DELETE whose parameters are the scope's, then `last` if given.
        auto run = [&](const std::string &sql, std::optional<int64_t> last) {
          Statement del = impl_->db.prepare(sql);
          int index = 1;
          for (const std::string &p : params) del.bind(index++, p);
          if (last) del.bind(index, *last);
          del.run();
          return impl_->db.changes();
        };
        auto pragma_value = [&](const char *name) {
          Statement q = impl_->db.prepare(std::string("PRAGMA ") + name);
          int64_t value = q.step() ? q.column_int64(0) : 0;
          q.reset();
          return value;
        };
        auto free_pages = [&] { return pragma_value("freelist_count"); };
        PruneResult result;
        int64_t free_before = free_pages();
        result.deleted_valid = run(
            std::string("DELETE FROM record WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY "
                        "workload_id, target_id ORDER BY mean_s, id) AS rank FROM record WHERE error_class = 0 "
                        "AND ") +
                scope + ") WHERE rank > ?) AND " + kUnfinishedJob,
            options.keep);
        if (!options.keep_failed) {
          result.deleted_failed =
              run(std::string("DELETE FROM record WHERE error_class != 0 AND ") + scope + " AND " + kUnfinishedJob,
                  std::nullopt);
        }
        int64_t free_after = free_pages(), page_size = pragma_value("page_size");
        result.freed_bytes = (free_after - free_before) * page_size;
        result.free_bytes = free_after * page_size;
        Use q(impl_->statement("SELECT count(*) FROM record"));
        result.kept = q->step() ? q->column_int64(0) : 0;
        return result;
      },
      !options.dry_run);
}

CheckReport TuningDb::check() {
  CheckReport report;
  auto problem = [&](const std::string &text) { report.problems.push_back(text); };
  try {
    impl_->read("checking", [&] {
      report.problems.clear();
      Statement integrity = impl_->db.prepare("PRAGMA integrity_check");
      while (integrity.step()) {
        std::string line = integrity.column_text(0);
        if (line != "ok") problem("integrity: " + line);
      }
      if (!report.ok()) return;  // the remaining checks read the damaged tables

      Statement foreign = impl_->db.prepare("PRAGMA foreign_key_check");
      while (foreign.step()) {
        problem("foreign key: " + foreign.column_text(0) + " row " + std::to_string(foreign.column_int64(1)) +
                " refers to a missing " + foreign.column_text(2) + " row");
      }
      // A reader reads an older readable version as it is; the next writer migrates it.
      int version = schema_version(impl_->db);
      if (version < kMinReadableSchemaVersion || version > kSchemaVersion) {
        problem("schema version " + std::to_string(version) + ", expected " + std::to_string(kSchemaVersion));
      }
      Statement mean = impl_->db.prepare("SELECT count(*) FROM record WHERE (error_class = 0) != (mean_s IS NOT NULL)");
      if (mean.step() && mean.column_int64(0) > 0) {
        problem(std::to_string(mean.column_int64(0)) +
                " records whose mean does not agree with their error class (valid records need "
                "a mean, failed ones must have none)");
      }
      mean.reset();
      Statement devices = impl_->db.prepare(
          "SELECT count(*) FROM record r JOIN target t ON t.id = r.target_id "
          "WHERE t.device_id != r.device_id");
      if (devices.step() && devices.column_int64(0) > 0) {
        problem(std::to_string(devices.column_int64(0)) + " records whose device class differs from their target's");
      }
      devices.reset();

      // Numbers outside the ranges insert keeps them in (db/record.h): rows of a log written before
      // the checks, or by another tool.
      auto out_of_range = [&](const std::string &condition, const std::string &what) {
        Statement q = impl_->db.prepare("SELECT id FROM record WHERE " + condition + " ORDER BY id");
        int64_t n = 0;
        std::string ids;
        while (q.step()) {
          if (++n <= 10) ids += (n > 1 ? ", " : "") + std::to_string(q.column_int64(0));
        }
        if (n > 10) ids += ", ...";
        if (n > 0) problem(std::to_string(n) + " records " + what + " (record ids " + ids + ")");
      };
      out_of_range(
          "typeof(config_index) != 'integer' OR config_index < 0 OR config_index > " + std::to_string(kMaxConfigIndex),
          "with a config index outside 0 .. 2^53");
      out_of_range("NOT (measured_at >= " + number_text(kEarliestTimestamp) +
                       " AND measured_at <= " + number_text(unix_now() + kTimestampLeewaySeconds) + ")",
                   "with a timestamp outside 2000-01-01 .. a day from now");
      out_of_range(
          "CASE WHEN json_valid(costs) AND json_type(costs) = 'array' THEN EXISTS (SELECT 1 FROM "
          "json_each(record.costs) c WHERE c.type NOT IN ('integer', 'real') OR c.value <= 0 OR "
          "c.value >= " +
              number_text(kMaxCostSeconds) + ") ELSE 1 END",
          "with costs that are not finite numbers of seconds, > 0 and below 1e6");
      out_of_range("error_class = 0 AND json_valid(costs) AND json_array_length(costs) = 0",
                   "that are valid (OK) but have no costs");
      out_of_range("NOT (wall_s >= 0 AND wall_s < 9e999)", "with a wall cost that is not a finite number >= 0");
      Statement flop = impl_->db.prepare("SELECT workload_key FROM workload WHERE NOT (flop >= 0 AND flop < 9e999)");
      while (flop.step()) problem("workload " + flop.column_text(0) + ": flop count is not a finite number >= 0");

      Statement workloads = impl_->db.prepare("SELECT workload_key, template_name, args FROM workload");
      while (workloads.step()) {
        std::string key = workloads.column_text(0);
        std::string name = workloads.column_text(1);
        std::string args = workloads.column_text(2);
        json parsed;
        try {
          parsed = parse_json(args);
        } catch (const TuningDbError &e) {
          problem("workload " + key + ": arguments are not JSON (" + e.what() + ")");
          continue;
        }
        if (canonical_json(parsed) != args) {
          problem("workload " + key + ": arguments are not in canonical form");
        } else if (contracts::workload_key(name, args) != key) {
          problem("workload " + key + ": key does not match its template and arguments");
        }
      }
    });
  } catch (const TuningDbError &e) {
    if (e.kind() != Kind::kCorrupt) throw;
    problem(e.what());
  }
  return report;
}

void TuningDb::vacuum() {
  impl_->require_writable("vacuuming");
  impl_->read("vacuuming", [&] { impl_->db.exec("VACUUM"); });
}

// --- exchange ------------------------------------------------------------------------------------

int64_t TuningDb::export_records(std::ostream &out, ExportFormat format, const ExportFilter &filter,
                                 const std::function<void(int64_t records)> &progress) {
  int64_t count = 0;
  for_each_record(filter, [&](const Record &record) {
    if (format == ExportFormat::kKiln) {
      out << record_to_json(record).dump() << '\n';
    } else {
      out << record_to_autotvm_json(record).dump() << '\n';
    }
    if (++count % 1000 == 0 && progress) progress(count);
  });
  out.flush();
  if (!out) {
    throw TuningDbError(Kind::kStorage,
                        "exporting from " + impl_->path + ": writing the records failed (the disk may be full)");
  }
  return count;
}

ImportResult TuningDb::import_records(std::istream &in, const ImportOptions &options) {
  impl_->require_writable("importing records");
  // The stream cannot be read twice, so only taking the write lock is retried; once it is held no
  // other connection can make this one wait.
  auto deadline = std::chrono::steady_clock::now() + impl_->options.retry_deadline;
  std::optional<Transaction> transaction;
  for (int attempt = 0; !transaction; ++attempt) {
    try {
      transaction.emplace(impl_->db);
    } catch (const DbError &e) {
      if (!e.is_busy() || !impl_->back_off(deadline, attempt)) {
        impl_->raise(e, "importing records");
      }
    }
  }

  ImportResult result;
  Impl::BatchIds ids;
  LineReader reader(in, kMaxRecordLineBytes);
  std::string line;
  int64_t number = 0;
  try {
    for (LineReader::Status status; (status = reader.next(line)) != LineReader::Status::kEnd;) {
      if (++number % 1000 == 0 && options.progress) options.progress(number);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (status == LineReader::Status::kLine && line.find_first_not_of(" \t") == std::string::npos) continue;
      try {
        if (status == LineReader::Status::kTooLong) {
          bad_input("longer than the limit of " + std::to_string(kMaxRecordLineBytes) + " bytes (1 MiB)");
        }
        Record record = record_from_json(parse_json(line));
        Checked checked;
        validate(record, "", checked, kLineNames);
        if (impl_->insert_one(record, ids, /*skip_duplicate=*/true) == 0) {
          ++result.duplicates;
        } else {
          ++result.imported;
        }
      } catch (const TuningDbError &e) {
        if (e.kind() != Kind::kBadInput) throw;
        if (!options.skip_bad_lines) {
          throw TuningDbError(Kind::kBadInput,
                              "line " + std::to_string(number) + ": " + e.what() + "; nothing was imported");
        }
        result.bad_lines.push_back({number, e.what()});
      }
    }
    if (in.bad()) {
      throw TuningDbError(Kind::kBadInput,
                          "reading line " + std::to_string(number + 1) + " failed; nothing was imported");
    }
    transaction->commit();
  } catch (const DbError &e) {
    impl_->raise(e, "importing records (line " + std::to_string(number) + ")");
  }
  return result;
}

}  // namespace kiln::db
