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

// The concrete target `text` names on this machine, canonical: "llvm -mcpu=native" becomes this
// host's CPU, "llvm -mcpu=<host_cpu_name()>", with -mattr where the host's features differ from that
// CPU's; any other target is only canonicalised. The one resolution of "native": a runner
// compiles for it and answers and records with it, so that nothing is stored under "native".
// Throws UserError for a malformed target.
std::string concrete_target(std::string_view text);

// LLVM's name of this host's CPU, e.g. "znver4", "sapphirerapids".
std::string host_cpu_name();

}  // namespace kiln::driver
