// kiln: the command-line entry point. Each command group adds itself to the app from its own
// file (cli/<group>_command.cpp); this file only lists the groups. How failures become messages
// and exit statuses is cli/command.h.
#include "cli/command.h"
#include "cli/db_command.h"
#include "cli/farm_command.h"

#include <CLI/CLI.hpp>

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif

int main(int argc, char **argv) {
  CLI::App app{"Kiln: a deep-learning compiler with an auto-tuning service.", "kiln"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);
  app.footer("Exit status: 0 success, 1 the command failed, 2 bad command line or internal error.");

  kiln::cli::add_db_command(app);
  kiln::cli::add_farm_commands(app);

  return kiln::cli::run(app, argc, argv);
}
