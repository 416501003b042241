// kiln: the command-line entry point. Each command group adds itself to the app from its own
// file (cli/<group>_command.cpp); this file only lists the groups and maps failures to exit codes:
// 0 success, 1 the command failed (its message is on stderr), 2 the command line was wrong.
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
  app.footer("Exit status: 0 success, 1 the command failed, 2 bad command line.");

  kiln::cli::add_db_command(app);
  kiln::cli::add_farm_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError &e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return 0;
}
