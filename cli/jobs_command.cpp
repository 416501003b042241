// `kiln jobs list|show|pause|cancel` on a tuning log, and `kiln db curve`. A job running in
// another process (`kiln tune`) sees a pause or cancel written to the log after its current
// batch; `kiln tune --resume JOB` goes on with a paused one.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/table.h"
#include "cli/tune_command.h"
#include "contracts/error.h"
#include "db/tuning_db.h"
#include "rpc_server/signals.h"
#include "tuner/curves.h"

namespace kiln::cli {

namespace {

struct JobsOptions {
  std::string db = "kiln.db";
  bool json = false;
  int64_t job = 0;
  std::string output;
};

// The log of a command that only reads it (list, show, curve): opened read-only, never created.
db::TuningDb open_reading(const std::string &path) {
  db::TuningDbOptions o;
  o.create = false;
  o.read_only = true;
  return db::TuningDb::open(path, o);
}

// The log of a command that changes a job's state: never created.
db::TuningDb open_existing(const std::string &path) {
  db::TuningDbOptions o;
  o.create = false;
  return db::TuningDb::open(path, o);
}

db::Job find_job(db::TuningDb &log, int64_t id) {
  const std::optional<db::Job> job = log.job(id);
  if (!job) throw UserError("there is no job " + std::to_string(id) + " in " + log.path());
  return *job;
}

std::string when(double unix_s) {
  if (unix_s <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_s);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&t));
  return buf;
}

void list_jobs(const JobsOptions &o) {
  db::TuningDb log = open_reading(o.db);
  const std::vector<db::Job> jobs = log.jobs();
  if (o.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const db::Job &j : jobs) {
      out.push_back({{"id", j.id},
                     {"name", j.name},
                     {"state", std::string(db::to_string(j.state))},
                     {"trials_done", j.trials_done},
                     {"trials_total", j.trials_total},
                     {"message", j.message},
                     {"created_at", j.created_at},
                     {"updated_at", j.updated_at}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  Table t({"id", "name", "state", "trials", "updated", "message"});
  for (const db::Job &j : jobs) {
    t.add_row({std::to_string(j.id), abbreviate(j.name, 30), std::string(db::to_string(j.state)),
               fmt::format("{}/{}", j.trials_done, j.trials_total), when(j.updated_at), abbreviate(j.message, 40)});
  }
  if (t.empty()) {
    std::cout << "no jobs in " << o.db << "\n";
  } else {
    t.print(std::cout);
  }
}

void show_job(const JobsOptions &o) {
  db::TuningDb log = open_reading(o.db);
  const db::Job j = find_job(log, o.job);
  const std::vector<tuner::Curve> curves = tuner::job_curves(log, o.job);
  if (o.json) {
    nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
    for (const tuner::Curve &c : curves) {
      tasks.push_back({{"name", c.name},
                       {"trials", c.best_gflops.size()},
                       {"best_gflops", c.best_gflops.empty() ? 0.0 : c.best_gflops.back()},
                       {"default_gflops", c.default_gflops}});
    }
    std::cout << nlohmann::ordered_json({{"id", j.id},
                                         {"name", j.name},
                                         {"state", std::string(db::to_string(j.state))},
                                         {"trials_done", j.trials_done},
                                         {"trials_total", j.trials_total},
                                         {"message", j.message},
                                         {"spec", j.spec},
                                         {"tasks", tasks}})
                     .dump(2)
              << "\n";
    return;
  }
  print_fields(std::cout, {{"job", std::to_string(j.id)},
                           {"name", j.name},
                           {"state", std::string(db::to_string(j.state))},
                           {"trials", fmt::format("{}/{}", j.trials_done, j.trials_total)},
                           {"target", j.spec.value("target", "")},
                           {"device key", j.spec.value("device_key", "")},
                           {"created", when(j.created_at)},
                           {"updated", when(j.updated_at)},
                           {"message", j.message}});
  std::cout << "\n";
  Table t({"task", "trials", "default GFLOPS", "best GFLOPS", "speedup"});
  for (const tuner::Curve &c : curves) {
    const double best = c.best_gflops.empty() ? 0 : c.best_gflops.back();
    t.add_row({c.name, std::to_string(c.best_gflops.size()),
               c.default_gflops > 0 ? fmt::format("{:.1f}", c.default_gflops) : "-",
               best > 0 ? fmt::format("{:.1f}", best) : "-",
               best > 0 && c.default_gflops > 0 ? fmt::format("{:.2f}x", best / c.default_gflops) : "-"});
  }
  t.print(std::cout);
}

void set_state(const JobsOptions &o, db::JobState state, const char *verb) {
  db::TuningDb log = open_existing(o.db);
  const db::Job j = find_job(log, o.job);
  if (db::is_finished(j.state)) {
    throw UserError(fmt::format("job {} is {}; only an unfinished job can be {}", j.id, db::to_string(j.state), verb));
  }
  log.update_job(o.job, state, std::string(verb) + " by kiln jobs");
  std::cout << fmt::format("job {} {}", o.job, verb);
  if (state == db::JobState::kPaused)
    std::cout << fmt::format("; resume with: kiln tune --resume {} --db {}", o.job, o.db);
  std::cout << "\n";
}

void curve(const JobsOptions &o) {
  db::TuningDb log = open_reading(o.db);
  const db::Job j = find_job(log, o.job);
  const std::string svg = tuner::curves_svg(
      tuner::job_curves(log, o.job), fmt::format("Tuning job {} ({}): best GFLOPS against trials", j.id, j.name));
  rpc::write_file_atomically(o.output, svg);
  std::cout << "wrote " << o.output << "\n";
}

}  // namespace

void add_jobs_command(CLI::App &app) {
  auto o = std::make_shared<JobsOptions>();
  CLI::App *jobs = app.add_subcommand("jobs", "The tuning jobs of a tuning log.");
  jobs->require_subcommand(1);
  jobs->fallthrough();  // --db and --json are accepted after the subcommand too
  jobs->add_option("--db", o->db, "the tuning log")->capture_default_str();
  jobs->add_flag("--json", o->json, "machine-readable JSON output");

  jobs->add_subcommand("list", "Every job: state, trials, last message.")->callback([o] { list_jobs(*o); });
  CLI::App *show = jobs->add_subcommand("show", "One job: its spec and each task's progress.");
  show->add_option("job", o->job, "the job id")->required();
  show->callback([o] { show_job(*o); });
  CLI::App *pause = jobs->add_subcommand("pause", "Pause a job (a running one stops after its current batch).");
  pause->add_option("job", o->job, "the job id")->required();
  pause->callback([o] { set_state(*o, db::JobState::kPaused, "paused"); });
  CLI::App *cancel = jobs->add_subcommand("cancel", "Cancel a job for good (its records stay).");
  cancel->add_option("job", o->job, "the job id")->required();
  cancel->callback([o] { set_state(*o, db::JobState::kCancelled, "cancelled"); });

  // `kiln db curve`: with the tuning log's other commands.
  CLI::App *db = app.get_subcommand("db");
  auto c = std::make_shared<JobsOptions>();
  CLI::App *curve_cmd = db->add_subcommand("curve", "A job's tuning curves (best GFLOPS against trials) as SVG.");
  curve_cmd->add_option("--job", c->job, "the job id")->required();
  curve_cmd->add_option("-o,--output", c->output, "the SVG file to write")->required();
  curve_cmd->callback([c, db] {
    c->db = db->get_option("--db")->as<std::string>();
    curve(*c);
  });
}

}  // namespace kiln::cli
