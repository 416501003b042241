#pragma once
// `kiln tune`: a tuning job run embedded in the command (the tuning log, the local sandboxed
// measurement pool, no daemon): what a user with one machine types. `kiln jobs`: the jobs of a
// tuning log. `kiln db curve`: a job's tuning curves as a picture.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_tune_command(CLI::App &app);
void add_jobs_command(CLI::App &app);

}  // namespace kiln::cli
