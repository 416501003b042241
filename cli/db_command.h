#pragma once
// `kiln db`: query and maintain the tuning log (db/tuning_db.h) from the command line.
#include <CLI/CLI.hpp>

namespace kiln::cli {

// Adds the `db` command group and its subcommands to the `kiln` app. A failing subcommand throws
// (cli/command.h maps it to a message and an exit status).
void add_db_command(CLI::App &kiln);

}  // namespace kiln::cli
