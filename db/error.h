#pragma once
// TuningDbError: what the tuning log reports to its users. Every failure of a TuningDb call that
// the user can act on arrives as this one type; kind() says which mistake or condition it was, and
// what() names the file, the object and, where it helps, what to do about it. It is a user error:
// each kind is about the user's file, input or storage. A failure that is Kiln's own (a misuse of
// SQLite, a constraint Kiln should never violate) arrives instead as db::DbError
// (db/sqlite_db.h), an InternalError.
#include <string>

#include "contracts/error.h"

namespace kiln::db {

class TuningDbError : public UserError {
 public:
  enum class Kind {
    kNotFound,       // a missing database file, workload, target or job
    kNotATuningLog,  // the file is not a database, or is a database of something else
    kCorrupt,        // the file is damaged (for example truncated)
    kSchemaTooNew,   // written by a newer Kiln whose schema this Kiln does not know
    kBadInput,       // an invalid record, workload, target or import line
    kBusy,           // other processes held the lock for longer than the retry deadline
    kReadOnly,       // a write to a file (or directory) that cannot be written, or opened read-only
    kStorage,        // the machine failed: the disk is full, an I/O error, no permission, no memory
  };

  TuningDbError(Kind kind, const std::string &message) : UserError(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

}  // namespace kiln::db
