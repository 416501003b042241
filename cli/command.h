#pragma once
// The `kiln` tool's one error policy. Commands report a failure by throwing; run() maps what comes
// out of the app to a message on stderr and an exit status, the same way for every command:
//   a kiln::UserError          "kiln <command>: error: <message>", exit status 1
//   anything else              "kiln <command>: internal error: <message>", exit status 2
//   a wrong command line       CLI11's message and usage, exit status 2; an unknown or missing
//                              command "kiln db: unknown command 'x'" and the commands there are
// where <command> is the command as given ("kiln db best", "kiln measure"). A command whose result
// is printed but is a failure (a measurement that did not come back OK) ends with
// CLI::RuntimeError(kExitFailed) and prints no error line.
#include <CLI/CLI.hpp>

#include <iostream>

namespace kiln::cli {

constexpr int kExitOk = 0;
// The command failed: a user error, or a result that says so.
constexpr int kExitFailed = 1;
// A wrong command line, or an internal error (a bug in Kiln).
constexpr int kExitUsage = 2;
constexpr int kExitInternal = 2;

// Parses `argv` with `app`, running the chosen command, and returns the exit status. Help and
// CLI11's errors go to `out` and `err`, Kiln's error lines to `err`.
int run(CLI::App &app, int argc, const char *const *argv, std::ostream &out = std::cout, std::ostream &err = std::cerr);

// Makes every command's --help list the options it inherits from the command groups above it
// ("kiln db best --help" shows --db and --json), saying where they may be given. Call it once every
// command has been added.
void show_inherited_options(CLI::App &app);

}  // namespace kiln::cli
