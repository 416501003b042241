// `kiln jobs list|show|watch|pause|resume|cancel` on a tuning log or, with --daemon, in the tuning
// service; and `kiln db curve`. On a log: a job running in another process (`kiln tune`) sees a
// pause or cancel written to the log after its current batch; `resume` goes on with a job
// embedded in this process, as `kiln tune --resume JOB` does; `watch` follows the log.
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/daemon_client.h"
#include "cli/job_view.h"
#include "cli/table.h"
#include "cli/tune_command.h"
#include "contracts/error.h"
#include "db/tuning_db.h"
#include "rpc_server/signals.h"
#include "tuner/curves.h"
#include "tuner/job_wire.h"
#include "tuner/tuner.h"

namespace kiln::cli {

namespace {

struct JobsOptions {
  std::string db = "kiln.db";
  bool json = false;
  int64_t job = 0;
  std::string output;
  DaemonOptions daemon;
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

// Follows a job of the log until it is neither running nor pending (a tuning service may have it
// queued); Ctrl-C stops.
void watch_job(const JobsOptions &o) {
  db::TuningDb log = open_reading(o.db);
  find_job(log, o.job);
  LiveView view(std::cout, o.json);
  tuner::JobStatus status;
  for (;;) {
    status = tuner::logged_status(log, o.job);
    const bool live = status.state == "running" || status.state == "pending";
    view.update(status, !live);
    if (!live) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (o.json) return;
  std::cout << "\n";
  print_summary(std::cout, status);
  print_end(std::cout, status, fmt::format("kiln jobs --db {} resume {}", o.db, o.job));
}

void resume_job(const JobsOptions &o) {
  {
    db::TuningDb log = open_existing(o.db);
    find_job(log, o.job);
  }
  resume_embedded(o.db, o.job, o.json);
}

// --- In the tuning service ----------------------------------------------------------------------

std::string info_json(const tuner::JobReport &report) {
  kiln::v1::JobInfo info;
  tuner::report_to_proto(report, &info);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  google::protobuf::util::MessageToJsonString(info, &text, options);
  return text;
}

void daemon_list(const JobsOptions &o) {
  TunerClient client(o.daemon);
  const std::vector<tuner::JobReport> jobs = client.list();
  if (o.json) {
    std::cout << "[";
    for (size_t i = 0; i < jobs.size(); ++i) std::cout << (i ? "," : "") << info_json(jobs[i]);
    std::cout << "]\n";
    return;
  }
  Table t({"id", "name", "state", "priority", "trials", "message"});
  for (const tuner::JobReport &j : jobs) {
    t.add_row({std::to_string(j.status.job_id), abbreviate(j.name, 30), j.status.state, std::to_string(j.priority),
               fmt::format("{}/{}", j.status.trials_done, j.status.trials_total), abbreviate(j.status.message, 50)});
  }
  if (t.empty()) {
    std::cout << "no jobs in the tuning service at " << o.daemon.address << "\n";
  } else {
    t.print(std::cout);
  }
}

void print_report(const tuner::JobReport &j) {
  print_fields(std::cout, {{"job", std::to_string(j.status.job_id)},
                           {"name", j.name},
                           {"state", j.status.state},
                           {"priority", std::to_string(j.priority)},
                           {"trials", fmt::format("{}/{}", j.status.trials_done, j.status.trials_total)},
                           {"target", j.target},
                           {"device key", j.device_key},
                           {"elapsed", duration(j.status.elapsed_s)},
                           {"eta", j.status.eta_s > 0 ? duration(j.status.eta_s) : "-"},
                           {"message", j.status.message}});
}

void daemon_show(const JobsOptions &o) {
  TunerClient client(o.daemon);
  const tuner::JobReport j = client.get(o.job);
  if (o.json) {
    std::cout << info_json(j) << "\n";
    return;
  }
  print_report(j);
  std::cout << "\n";
  print_summary(std::cout, j.status);
}

void daemon_watch(const JobsOptions &o) {
  rpc::block_shutdown_signals();
  TunerClient client(o.daemon);
  LiveView view(std::cout, o.json);
  const std::optional<tuner::JobReport> end = follow_job(client, o.job, view);
  if (o.json) return;
  if (!end) {
    std::cout << fmt::format("\nstopped following job {}; it goes on in the tuning service at {}\n", o.job,
                             o.daemon.address);
    return;
  }
  std::cout << "\n";
  print_summary(std::cout, end->status);
  print_end(std::cout, end->status, fmt::format("kiln jobs --daemon {} resume {}", o.daemon.address, o.job));
}

void daemon_change(const JobsOptions &o, const char *verb) {
  TunerClient client(o.daemon);
  const std::string what = verb;
  const tuner::JobReport j = what == "pause"    ? client.pause(o.job)
                             : what == "resume" ? client.resume(o.job)
                                                : client.cancel(o.job);
  if (o.json) {
    std::cout << info_json(j) << "\n";
    return;
  }
  std::cout << fmt::format("job {} {}{}{}\n", j.status.job_id, j.status.state, j.status.message.empty() ? "" : ": ",
                           j.status.message);
  const std::string daemon = "kiln jobs --daemon " + o.daemon.address;
  if (j.status.state == "paused" || what == "pause") {
    std::cout << fmt::format("resume with: {} resume {}\n", daemon, j.status.job_id);
  } else if (what == "resume") {
    std::cout << fmt::format("follow it with: {} watch {}\n", daemon, j.status.job_id);
  }
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
  add_daemon_options(jobs, o->daemon);
  jobs->footer(
      "Without --daemon the commands work on the tuning log (--db); with --daemon ADDR, on the jobs of the\n"
      "tuning service (kilnd) at ADDR.");
  auto daemon = [o] { return !o->daemon.address.empty(); };

  jobs->add_subcommand("list", "Every job: state, trials, last message.")->callback([o, daemon] {
    daemon() ? daemon_list(*o) : list_jobs(*o);
  });
  CLI::App *show = jobs->add_subcommand("show", "One job: its spec and each task's progress.");
  show->add_option("job", o->job, "the job id")->required();
  show->callback([o, daemon] { daemon() ? daemon_show(*o) : show_job(*o); });
  CLI::App *watch = jobs->add_subcommand("watch", "Follow a job until it stops (Ctrl-C stops following).");
  watch->add_option("job", o->job, "the job id")->required();
  watch->callback([o, daemon] { daemon() ? daemon_watch(*o) : watch_job(*o); });
  CLI::App *pause = jobs->add_subcommand("pause", "Pause a job (a running one stops after its current batch).");
  pause->add_option("job", o->job, "the job id")->required();
  pause->callback(
      [o, daemon] { daemon() ? daemon_change(*o, "pause") : set_state(*o, db::JobState::kPaused, "paused"); });
  CLI::App *resume = jobs->add_subcommand(
      "resume", "Go on with a paused or failed job: queued in the service, or run here as `kiln tune --resume` does.");
  resume->add_option("job", o->job, "the job id")->required();
  resume->callback([o, daemon] { daemon() ? daemon_change(*o, "resume") : resume_job(*o); });
  CLI::App *cancel = jobs->add_subcommand("cancel", "Cancel a job for good (its records stay).");
  cancel->add_option("job", o->job, "the job id")->required();
  cancel->callback(
      [o, daemon] { daemon() ? daemon_change(*o, "cancel") : set_state(*o, db::JobState::kCancelled, "cancelled"); });

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
