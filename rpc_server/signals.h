#pragma once
// Clean shutdown of the farm's daemons: SIGINT and SIGTERM are blocked in every thread and the
// main thread waits for one of them; SIGPIPE is ignored (a peer that goes away is an error
// return, not a signal). Also a helper to publish a file in one step.
#include <string>

namespace kiln::rpc {

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts later) and
// ignores SIGPIPE. Call before starting any thread. Child processes must unblock them again
// (the measure pool's workers do).
void block_shutdown_signals();
// Waits for SIGINT or SIGTERM and returns it.
int wait_for_shutdown_signal();
// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half.
// Throws kiln::UserError when it cannot.
void write_file_atomically(const std::string &path, const std::string &text);

}  // namespace kiln::rpc
