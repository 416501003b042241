#pragma once
// GPU shared memory: shared allocations are made once per block (outside the thread loops), and
// barriers (sync_threads) are inserted between statements of a block's threads that write and
// then read (or read and then overwrite) shared buffers.
#include "compiler/ir/ir.h"

namespace kiln::lower {

ir::Stmt thread_sync(const ir::Stmt &s);

}  // namespace kiln::lower
