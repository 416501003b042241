#pragma once
// The compiler's view of a target string: the canonical target plus what the back end for its kind
// knows about it, for schedules to be sized by. This is the one place where the operator library
// meets the code generators.
#include <string_view>

#include "compiler/ops/target.h"

namespace kiln::driver {

// Parses `text` (contracts/target.h) and asks the back end of its kind: for "llvm", LLVM's
// description of the CPU ("-mcpu=native" is the host's CPU and features); other kinds get 128-bit
// vectors. Throws UserError for a malformed target, or one its back end rejects.
ops::Target resolve_target(std::string_view text);

}  // namespace kiln::driver
