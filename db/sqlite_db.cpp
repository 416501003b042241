#include "db/sqlite_db.h"

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <utility>

namespace kiln::db {

namespace {

[[noreturn]] void throw_error(sqlite3 *db, int rc, const std::string &context) {
  std::string message = "sqlite: " + context + ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int code = db ? sqlite3_extended_errcode(db) : rc;
  throw DbError(message, code);
}

}  // namespace

bool DbError::is_busy() const {
  int primary = code_ & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

bool DbError::is_corrupt() const {
  int primary = code_ & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool DbError::is_not_a_database() const { return (code_ & 0xff) == SQLITE_NOTADB; }

bool DbError::is_read_only() const { return (code_ & 0xff) == SQLITE_READONLY; }

bool DbError::is_cannot_open() const { return (code_ & 0xff) == SQLITE_CANTOPEN; }

bool DbError::is_environment() const { return !environment_reason().empty(); }

std::string DbError::environment_reason() const {
  switch (code_ & 0xff) {
    case SQLITE_FULL:
      return "the disk is full";
    case SQLITE_IOERR:
      return "an I/O error";
    case SQLITE_CANTOPEN:
      return "a file cannot be opened";
    case SQLITE_READONLY:
      return "it cannot be written";
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return "permission denied";
    case SQLITE_NOMEM:
      return "out of memory";
    case SQLITE_NOLFS:
      return "the file system cannot hold a file this large";
    case SQLITE_PROTOCOL:
      return "file locking failed";
    default:
      return "";
  }
}

// --- Statement ---------------------------------------------------------------------------------

Statement::Statement(sqlite3 *db, sqlite3_stmt *stmt, std::string sql) : db_(db), stmt_(stmt), sql_(std::move(sql)) {}

Statement::Statement(Statement &&other) noexcept
    : db_(std::exchange(other.db_, nullptr)), stmt_(std::exchange(other.stmt_, nullptr)), sql_(std::move(other.sql_)) {}

Statement &Statement::operator=(Statement &&other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) {
    throw_error(db_, rc, "binding parameter " + std::to_string(index) + " of \"" + sql_ + "\"");
  }
}

Statement &Statement::bind(int index, int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement &Statement::bind(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

Statement &Statement::bind(int index, std::string_view text) {
  check_bind(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8), index);
  return *this;
}

Statement &Statement::bind_blob(int index, const void *data, size_t size) {
  check_bind(sqlite3_bind_blob64(stmt_, index, data, size, SQLITE_TRANSIENT), index);
  return *this;
}

Statement &Statement::bind_null(int index) {
  check_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    sqlite3_reset(stmt_);
    return false;
  }
  // The statement stays usable after reset(); the error is reported from the step.
  std::string context = "running \"" + sql_ + "\"";
  sqlite3_reset(stmt_);
  throw_error(db_, rc, context);
}

void Statement::run() {
  if (step()) {
    sqlite3_reset(stmt_);
    throw DbError("sqlite: \"" + sql_ + "\" returned rows where none were expected", SQLITE_MISUSE);
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int Statement::column_count() const { return sqlite3_column_count(stmt_); }

bool Statement::column_is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const unsigned char *text = sqlite3_column_text(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char *>(text), static_cast<size_t>(size));
}

std::string_view Statement::column_view(int column) const {
  const unsigned char *text = sqlite3_column_text(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  if (!text) return {};
  return std::string_view(reinterpret_cast<const char *>(text), static_cast<size_t>(size));
}

std::vector<uint8_t> Statement::column_blob(int column) const {
  const auto *data = static_cast<const uint8_t *>(sqlite3_column_blob(stmt_, column));
  int size = sqlite3_column_bytes(stmt_, column);
  if (!data) return {};
  return std::vector<uint8_t>(data, data + size);
}

// --- Database ----------------------------------------------------------------------------------

namespace {

// `path` as a file: URI (for URI parameters), with the characters URIs reserve escaped.
std::string file_uri(const std::string &path, const char *parameters) {
  std::string absolute = std::filesystem::absolute(path).string();
  std::string uri = "file://";
  for (char c : absolute) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  return uri + "?" + parameters;
}

}  // namespace

Database::Database(const std::string &path, const OpenOptions &options) : path_(path) {
  int flags = SQLITE_OPEN_READWRITE | (options.create ? SQLITE_OPEN_CREATE : 0);
  std::string name = path;
  if (options.read_only) {
    flags = SQLITE_OPEN_READONLY;
    if (options.immutable) {
      flags |= SQLITE_OPEN_URI;
      name = file_uri(path, "immutable=1");
    }
  }
  int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // sqlite3_open_v2 hands back a connection even on failure, to carry the error message.
    std::string message = "sqlite: opening \"" + path + "\": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    close();
    throw DbError(message, rc);
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    auto timeout_ms = options.busy_timeout.count();
    if (timeout_ms < 0 || timeout_ms > std::numeric_limits<int>::max()) {
      throw DbError("sqlite: busy timeout out of range", SQLITE_MISUSE);
    }
    sqlite3_busy_timeout(db_, static_cast<int>(timeout_ms));
    exec("PRAGMA foreign_keys = ON");
    if (options.wal && !options.read_only) enable_wal();
  } catch (...) {
    close();
    throw;
  }
}

Database::Database(Database &&other) noexcept : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database &Database::operator=(Database &&other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Database::~Database() { close(); }

void Database::close() noexcept {
  // Statements must be finalized first; sqlite3_close_v2 defers the close until they are.
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void Database::enable_wal() {
  Statement journal = prepare("PRAGMA journal_mode = WAL");
  std::string mode = journal.step() ? journal.column_text(0) : std::string();
  journal.reset();
  bool in_memory = path_ == ":memory:" || path_.empty();
  if (mode != "wal" && !in_memory) {
    throw DbError("sqlite: \"" + path_ + "\" could not be switched to WAL (journal mode is \"" + mode + "\")",
                  SQLITE_ERROR);
  }
}

void Database::exec(const std::string &sql) {
  char *error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = "sqlite: running \"" + sql + "\": " + (error ? error : sqlite3_errstr(rc));
    sqlite3_free(error);
    throw DbError(message, sqlite3_extended_errcode(db_));
  }
}

Statement Database::prepare(const std::string &sql) {
  sqlite3_stmt *stmt = nullptr;
  const char *tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size() + 1), &stmt, &tail);
  if (rc != SQLITE_OK) throw_error(db_, rc, "preparing \"" + sql + "\"");
  if (!stmt) throw DbError("sqlite: \"" + sql + "\" contains no statement", SQLITE_MISUSE);
  Statement statement(db_, stmt, sql);
  for (; tail && *tail; ++tail) {
    if (*tail != ' ' && *tail != '\n' && *tail != '\t' && *tail != '\r' && *tail != ';') {
      throw DbError("sqlite: \"" + sql + "\" holds more than one statement", SQLITE_MISUSE);
    }
  }
  return statement;
}

bool Database::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

int64_t Database::changes() const { return sqlite3_changes64(db_); }

bool Database::autocommit() const { return sqlite3_get_autocommit(db_) != 0; }

// --- Transaction -------------------------------------------------------------------------------

Transaction::Transaction(Database &db, Mode mode) : db_(db) {
  db_.exec(mode == Mode::kWrite ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
}

Transaction::~Transaction() {
  if (!done_) {
    try {
      db_.exec("ROLLBACK");
    } catch (const DbError &) {
      // The transaction is already gone (SQLite rolls back on some errors by itself).
    }
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace kiln::db
