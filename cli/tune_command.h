#pragma once
// `kiln tune`: a tuning job run embedded in the command (the tuning log, the local sandboxed
// measurement pool, no daemon): what a user with one machine types; with --daemon, the same job
// submitted to the tuning service (kilnd) and followed there. `kiln jobs`: the jobs of a
// tuning log. `kiln db curve`: a job's tuning curves as a picture.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_tune_command(CLI::App &app);
void add_jobs_command(CLI::App &app);

// `kiln tune --resume JOB --db DB`: goes on with a job of the log, embedded in this process.
void resume_embedded(const std::string &db, int64_t job, bool json);

}  // namespace kiln::cli
