#pragma once
// The lowering passes that work on flattened loop IR (Load/Store/Allocate). Each is one free
// function defined in its own file in this folder; lower() calls them in order.
#include "compiler/ir/function.h"
#include "compiler/ir/ir.h"

namespace kiln::pass {

using ir::Stmt;

// Fuses each loop marked by Stage::fuse_with_next (a pragma_fuse_with_next attribute) with the
// next loop of the same range: one loop whose body is the marked loop's body, then the next's.
// Throws ScheduleError when that could change what the code computes (fuse_loops.cpp says when).
Stmt fuse_with_next_loops(const Stmt &s);

// Software-pipelines each loop marked by Stage::pipeline (a pragma_pipeline attribute): the
// statements of an iteration's body up to and including its first serial loop (a producer computed at the
// loop, e.g. a row's statistics) run one iteration early, that loop interleaved with the body's last
// loop (the consumer of the previous row), so one loop body mixes the next row's reads with this
// row's writes; the first iteration's run before the loop. Throws ScheduleError when the two touch
// the same buffer (but for reading) or the body does not have that shape (fuse_loops.cpp).
Stmt pipeline_loops(const Stmt &s);

// Splits loops whose body is guarded by a condition on the loop variable (the tail predicates of
// non-divisible splits) into a main loop without the guard and a tail loop that keeps it.
Stmt loop_partition(const Stmt &s);

// Unrolls loops marked Unrolled (constant extent required; others become serial), and serial
// loops with a constant extent up to `auto_max_step` under a pragma_auto_unroll_max_step attr.
Stmt unroll_loops(const Stmt &s);

// Turns loops marked Vectorized into vector code (Ramp, Broadcast, vector Load/Store). A loop
// whose body cannot be vectorized (non-constant extent, inner loops, if statements depending on
// the lane, ...) is scalarized: it becomes a serial loop.
Stmt vectorize_loops(const Stmt &s);

// Reuses the memory of buffers whose lifetimes do not overlap (same scope and dtype), and merges
// allocations where possible.
Stmt storage_rewrite(const Stmt &s);

// Removes statements with no effect: empty loops, stores of a buffer never read (local buffers
// only), if statements with a constant condition, lets whose variable is unused.
Stmt remove_no_op(const Stmt &s);

// Checks the invariants of lowered IR (every variable defined before use, types consistent,
// loads/stores on known buffers, no ProducerLoad/ProducerStore/Realize left, thread bindings
// consistent). Throws InternalError naming the problem.
void verify_ir(const ir::LoweredFunc &f);

}  // namespace kiln::pass
