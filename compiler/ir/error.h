#pragma once
// The two kinds of error the compiler raises (see STYLE.md): user errors name the user's object;
// internal errors mean a bug in Kiln.
#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

// Base of every error caused by what the user asked for.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An illegal schedule request (bad split, compute_at into a non-consumer, ...). The message names
// the stage and axis. The tuner treats it as an INSTANTIATION failure.
class ScheduleError : public UserError {
 public:
  using UserError::UserError;
};

// A malformed tensor expression, a bad shape or dtype, a bad argument list.
class ExprError : public UserError {
 public:
  using UserError::UserError;
};

// The interpreter or generated code was called with bad arguments or hit a runtime check.
class RuntimeError : public UserError {
 public:
  using UserError::UserError;
};

// A broken invariant inside Kiln: a bug, never the user's fault.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace kiln

// Internal invariant check: throws InternalError with file:line and the message.
#define KILN_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw ::kiln::InternalError(::kiln::detail::concat(__FILE__, ":", __LINE__,          \
                                                         ": check failed: " #cond ": ",   \
                                                         ##__VA_ARGS__));                  \
    }                                                                                      \
  } while (0)
