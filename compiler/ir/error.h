#pragma once
// The compiler's user errors. The two roots (UserError, InternalError) and KILN_CHECK are Kiln's
// one error policy, in contracts/error.h.
#include "contracts/error.h"

namespace kiln {

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

}  // namespace kiln
