#pragma once
// Database and Statement: a thin RAII layer over one SQLite connection, for the tuning log.
// sqlite3.h is included only by db/*.cpp; other code sees the opaque handles declared here.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "contracts/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::db {

// A failed SQLite call. what() carries the context and SQLite's own message; code() is SQLite's
// extended result code (for example SQLITE_CONSTRAINT_UNIQUE). TuningDb turns the failures a user
// can act on into TuningDbError; one that escapes as DbError is unexpected, an internal error.
class DbError : public InternalError {
 public:
  DbError(const std::string &message, int code) : InternalError(message), code_(code) {}
  int code() const { return code_; }
  // Another connection holds a lock that this one needs (SQLITE_BUSY or SQLITE_LOCKED): the
  // operation may succeed when tried again.
  bool is_busy() const;
  // The file is damaged or is not a database at all (SQLITE_CORRUPT or SQLITE_NOTADB).
  bool is_corrupt() const;
  // The file is not a database at all (SQLITE_NOTADB).
  bool is_not_a_database() const;
  // Something needed cannot be written (SQLITE_READONLY): the file, its directory (where the WAL
  // index lives), or a connection opened read-only.
  bool is_read_only() const;
  // A file cannot be opened or created (SQLITE_CANTOPEN).
  bool is_cannot_open() const;
  // A failure of the machine, not of Kiln: the disk is full, an I/O error, a file that cannot be
  // opened or written, no permission, no memory, a broken file lock. A user can act on it;
  // anything else (a misuse of SQLite, a constraint Kiln should never violate, SQL that does not
  // compile) is a bug in Kiln.
  bool is_environment() const;
  // What an environment failure is, in plain words ("the disk is full").
  std::string environment_reason() const;

 private:
  int code_;
};

// A prepared statement. Parameters are numbered from 1 and columns from 0, as in SQLite.
class Statement {
 public:
  Statement(Statement &&other) noexcept;
  Statement &operator=(Statement &&other) noexcept;
  Statement(const Statement &) = delete;
  Statement &operator=(const Statement &) = delete;
  ~Statement();

  Statement &bind(int index, int64_t value);
  Statement &bind(int index, double value);
  Statement &bind(int index, std::string_view text);
  // Any other integer type (int, unsigned, size_t, bool...) binds as a 64-bit integer.
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Statement &bind(int index, T value) {
    return bind(index, static_cast<int64_t>(value));
  }
  Statement &bind_blob(int index, const void *data, size_t size);
  Statement &bind_null(int index);

  // Runs the statement to its next row: true when a row is available, false when it is done
  // (the statement is then reset, releasing its read lock, and may run again). A statement left
  // with a row pending keeps its transaction open (COMMIT fails) until reset() or destruction.
  bool step();
  // Runs a statement that returns no rows; throws if it returns one.
  void run();
  // Makes the statement ready to run again and clears its bindings.
  void reset();

  int column_count() const;
  bool column_is_null(int column) const;
  int64_t column_int64(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;
  // The text of a column without a copy; valid until the next step(), reset() or destruction.
  std::string_view column_view(int column) const;
  std::vector<uint8_t> column_blob(int column) const;

  const std::string &sql() const { return sql_; }

 private:
  friend class Database;
  Statement(sqlite3 *db, sqlite3_stmt *stmt, std::string sql);
  void check_bind(int rc, int index);

  sqlite3 *db_ = nullptr;
  sqlite3_stmt *stmt_ = nullptr;
  std::string sql_;
};

struct OpenOptions {
  // How long a writer waits for another connection's lock before failing with SQLITE_BUSY.
  std::chrono::milliseconds busy_timeout{5000};
  // Create the file when it does not exist; otherwise opening a missing file fails.
  bool create = true;
  // Switch the file to WAL journal mode on opening. Without it, enable_wal() does it later, so
  // that a caller can first check, without writing, that the file is one it may change.
  bool wal = true;
  // Open for reading only (SQLITE_OPEN_READONLY): nothing is written, not even the journal mode.
  // `create` and `wal` do not apply.
  bool read_only = false;
  // With read_only: open the file as immutable (SQLite's immutable=1), without locks and without
  // the WAL index file, for a file in a directory that cannot be written, where no writer can be.
  bool immutable = false;
};

// One connection to a database file, created if missing (unless options.create is false), in WAL
// journal mode (so readers never
// block the writer), with a busy timeout and foreign keys enforced. ":memory:" opens a private
// in-memory database (which has no WAL).
class Database {
 public:
  explicit Database(const std::string &path, const OpenOptions &options = {});
  Database(Database &&other) noexcept;
  Database &operator=(Database &&other) noexcept;
  Database(const Database &) = delete;
  Database &operator=(const Database &) = delete;
  ~Database();

  // Switches the file to WAL journal mode (a no-op for ":memory:"); throws if it cannot be.
  void enable_wal();
  // Runs one or more ';'-separated statements that return no rows.
  void exec(const std::string &sql);
  // Compiles one statement.
  Statement prepare(const std::string &sql);

  // True when the connection cannot write: opened read-only, or opened for writing on a file the
  // operating system does not let it write (SQLite then falls back to reading).
  bool read_only() const;
  int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const;
  // True while no transaction is open.
  bool autocommit() const;
  const std::string &path() const { return path_; }

 private:
  void close() noexcept;

  sqlite3 *db_ = nullptr;
  std::string path_;
};

// BEGIN IMMEDIATE on construction (taking the write lock up front, so the busy timeout applies
// here rather than at the first write); ROLLBACK on destruction unless commit() was called.
// A kRead transaction (BEGIN DEFERRED) takes no lock up front: a read-only sequence of queries in
// it sees one snapshot of the database.
class Transaction {
 public:
  enum class Mode { kWrite, kRead };
  explicit Transaction(Database &db, Mode mode = Mode::kWrite);
  Transaction(const Transaction &) = delete;
  Transaction &operator=(const Transaction &) = delete;
  ~Transaction();

  void commit();

 private:
  Database &db_;
  bool done_ = false;
};

}  // namespace kiln::db
