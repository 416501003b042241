#pragma once
// `kiln farm status` (the tracker's runners and queues per device key) and `kiln measure` (one
// workload and config measured on a leased runner of the farm).
#include <CLI/CLI.hpp>

namespace kiln::cli {

// Adds the `farm` command group and the `measure` command. A failing command throws
// (cli/command.h maps it to a message and an exit status); `kiln measure` prints a result that is
// not OK and ends with CLI::RuntimeError(1).
void add_farm_commands(CLI::App &kiln);

}  // namespace kiln::cli
