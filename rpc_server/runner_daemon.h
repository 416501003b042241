#pragma once
// The kiln-runner daemon: the process on a device of the farm. It registers with the tracker
// under a device key, serves the Runner service (Info, Measure), compiles and times candidates in
// worker processes (its own executable started with --measure-worker), and shuts down cleanly on
// SIGINT or SIGTERM. Run with --help for the flags.
#include "rpc_server/measure_extension.h"

namespace kiln::rpc {

// The whole of a runner executable's main(). With "--measure-worker" as the first argument the
// process is a measurement worker instead. `extension` is given to the pool and to the workers
// alike, so that an executable that passes one has it in both; the production kiln-runner passes
// none. Returns the exit status: 0 after a clean shutdown, 1 when the runner cannot start,
// 2 for a bad command line.
int runner_daemon_main(int argc, char **argv, const MeasureExtension &extension = {});

}  // namespace kiln::rpc
