// kiln: the command-line entry point. Each command group adds itself to the app from its own
// file (cli/<group>_command.cpp); this file only lists the groups. How failures become messages
// and exit statuses is cli/command.h.
#include "cli/command.h"
#include "cli/db_command.h"
#include "cli/farm_command.h"
#include "cli/model_command.h"
#include "cli/templates_command.h"
#include "cli/tune_command.h"

#include <CLI/CLI.hpp>
#include <cstring>

#include "rpc_server/measure_worker.h"

#ifndef KILN_VERSION
#error "KILN_VERSION must be defined by the build"
#endif

int main(int argc, char **argv) {
  // `kiln tune` measures in worker processes that run this executable again.
  if (argc > 1 && std::strcmp(argv[1], "--measure-worker") == 0) return kiln::rpc::measure_worker_main();
  CLI::App app{"Kiln: a deep-learning compiler with an auto-tuning service.", "kiln"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);
  app.footer("Exit status: 0 success, 1 the command failed, 2 bad command line or internal error.");

  kiln::cli::add_db_command(app);
  kiln::cli::add_farm_commands(app);
  kiln::cli::add_tune_command(app);
  kiln::cli::add_jobs_command(app);
  kiln::cli::add_templates_command(app);
  kiln::cli::add_model_commands(app);
  kiln::cli::show_inherited_options(app);

  return kiln::cli::run(app, argc, argv);
}
