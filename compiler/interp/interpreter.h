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
  // Values of f.size_vars in order. Empty: each is taken from the arguments' shapes. Where a
  // shape determines a size variable, the given value must agree with it.
  std::vector<int64_t> size_values;
};

// Runs `f` on `args` (one tensor per f.params entry, in order), writing its outputs in place.
// Throws RuntimeError for bad arguments and runtime failures (AssertStmt, out-of-bounds access,
// step limit, divergent barrier), InternalError for IR that is not lowered loop IR.
void run(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args, const RunOptions &opt = {});

// Checks `args` against f.params (count, dtype, rank, every dimension, strides) and returns the
// values of f.size_vars: each from the first param whose shape has it as a whole dimension, or
// from `size_values` (same order as f.size_vars) when given. Throws RuntimeError naming the
// argument, e.g. "argument 2 (B): expected float32, got int32".
std::vector<int64_t> bind_size_vars(const ir::LoweredFunc &f, const std::vector<deploy::Tensor> &args,
                                    const std::vector<int64_t> &size_values = {});

}  // namespace kiln::interp
