#pragma once
// Kiln's one error policy (see STYLE.md). Every error a Kiln library throws derives from one of two
// roots: UserError, caused by what the user asked for (its message names the user's object), and
// InternalError, a broken invariant inside Kiln (a bug, never the user's fault). The command-line
// tools map the first to a message and exit 1, the second to "internal error" and exit 2.
#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

// Base of every error caused by what the user asked for.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
#define KILN_CHECK(cond, ...)                                                                             \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      throw ::kiln::InternalError(                                                                        \
          ::kiln::detail::concat(__FILE__, ":", __LINE__, ": check failed: " #cond ": ", ##__VA_ARGS__)); \
    }                                                                                                     \
  } while (0)
