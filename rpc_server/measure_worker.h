#pragma once
// The measurement worker: the process a runner's MeasurePool starts to compile and time
// candidates (see measure_pool.h for the whole picture and worker.proto for the messages).
//
// A worker serves one request at a time. It keeps, per workload (a few at most, least recently
// used dropped first), the parsed task, and per set of tensor shapes random inputs seeded by the
// workload key, the output buffers candidates write, and the reference output. Built candidates
// wait, JIT-compiled, until they are run or forgotten.
#include "rpc_server/measure_extension.h"

namespace kiln::rpc {

// The main() of a worker process: serves the channel on descriptor 3 until the runner closes it.
// The worker knows the builtin templates plus the extension's, and calls the extension's hooks on
// every candidate. Returns the process's exit status.
int measure_worker_main(const MeasureExtension &extension = {});

}  // namespace kiln::rpc
