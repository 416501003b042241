#pragma once
// The reference interpreter for lowered loop IR: the oracle every back end is tested against.
//
// It is strict where compiled code would be undefined: an out-of-bounds Load or Store, integer
// division by zero, a float-to-integer cast out of range and a GPU barrier that only some threads
// of a block reach all raise kiln::RuntimeError. Integer arithmetic wraps to the width of its type,
// float32 results are rounded to float after every operation, float16 values are computed as
// float32 and rounded to half precision (to nearest even) when stored or cast to float16.
//
// GPU kernels run on the host: blockIdx.* and vthread loops run serially; the threadIdx.* loops of
// a block run as separate logical threads, each with its own variables and 'local' allocations,
// sharing the block's 'shared' allocations. Without a barrier the threads run one after the other;
// a statement that contains sync_threads is run by all threads in step, so that every thread
// finishes the statements before a barrier before any thread goes past it. Control flow around a
// barrier (loop bounds, if conditions) must then agree across the block, as CUDA requires; where it
// does not, RuntimeError names the threads that disagree.
#include <cstdint>
#include <vector>

#include "compiler/interp/value.h"
#include "compiler/ir/function.h"
#include "deploy/tensor.h"

namespace kiln::interp {

struct RunOptions {
  // Statements and loop iterations executed before a RuntimeError stops a runaway loop; 0 means
  // no limit.
  int64_t max_steps = 1'000'000'000;
  // Fill memory of Allocate statements with NaN (floats) or 0xCD bytes (integers) so that reads
  // of memory never written show up in results.
  bool poison_allocations = true;
};

// Runs `f` on `args` (one tensor per f.params entry, in order), writing its outputs in place.
// The arguments go through the checks of the compiled entry point (lower::make_packed_api), so a
// bad call fails with the message a compiled function gives, e.g. "vadd: argument 2 (B):
// expected dtype float32"; the size variables are taken from the arguments' shapes. Throws
// RuntimeError for bad arguments and runtime failures (AssertStmt, out-of-bounds access, step
// limit, divergent barrier), ExprError for a size variable no argument gives, InternalError for
// IR that is not lowered loop IR.
void run(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args, const RunOptions &opt = {});

// The value of a closed expression: one without free variables (lets bind what it uses) and
// without loads. Throws as run() does. evaluate.h builds on it.
Value eval_closed(const ir::Expr &e);

}  // namespace kiln::interp
