#pragma once
// `kiln db`: query and maintain the tuning log (db/tuning_db.h) from the command line.
#include <CLI/CLI.hpp>

namespace kiln::cli {

// Adds the `db` command group and its subcommands to the `kiln` app. A failing subcommand
// prints its error on stderr and ends the parse with CLI::RuntimeError(1).
void add_db_command(CLI::App &kiln);

}  // namespace kiln::cli
