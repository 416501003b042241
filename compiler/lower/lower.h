#pragma once
// lower(): a schedule and its argument list to a LoweredFunc in the flat loop IR.
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/te/schedule.h"

namespace kiln::lower {

struct LowerOptions {
  // Print the IR and the time after every pass to stderr. Defaults to the KILN_DEBUG_LOWER
  // environment switch.
  bool debug = false;
  bool partition_loops = true;
  bool unroll = true;
  bool vectorize = true;
  bool reuse_storage = true;
  // When set, each pass's seconds are added to the entry of its name (runs accumulate), so that a
  // caller can see where lowering spends its time over many lowerings without printing the IR.
  std::map<std::string, double> *pass_seconds = nullptr;
  static LowerOptions from_env();
};

// Arguments are the tensors the caller passes (inputs and outputs, in order). Throws
// ScheduleError for an illegal schedule and ExprError for a bad argument list.
ir::LoweredFunc lower(const te::Schedule &sch, const std::vector<te::Tensor> &args, const std::string &name,
                      const LowerOptions &options = LowerOptions::from_env());

}  // namespace kiln::lower
