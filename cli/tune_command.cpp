#include "cli/tune_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_view.h"
#include "contracts/error.h"
#include "contracts/json.h"
#include "contracts/target.h"
#include "db/tuning_db.h"
#include "rpc_server/signals.h"
#include "tuner/measurer.h"
#include "tuner/presets.h"
#include "tuner/tuner.h"

namespace kiln::cli {

namespace {

struct TuneCommandOptions {
  std::string template_name, args;
  double weight = 1;
  std::string workloads_file;
  std::string preset;
  int64_t trials = -1;  // not given: 64 per task
  std::string time_budget;
  std::string strategy = "xgb";
  std::string db = "kiln.db";
  std::string target = "llvm -mcpu=native";
  std::string device_key = "local-cpu";
  int64_t batch = 16;
  int64_t early_stopping = 0;
  int64_t trials_per_task = 0;
  uint32_t threads = 0;
  bool no_transfer = false;
  bool skip_measured = false;
  bool json = false;
  int64_t resume = 0;
  std::string name;
  uint64_t seed = 0;
  int priority = 0;
  // Whether --target and --device-key were given: a daemon uses its own when they were not.
  bool target_given = false, device_key_given = false;
  DaemonOptions daemon;
};

// "90", "90s", "10m", "2h" -> seconds.
double parse_duration(const std::string &text) {
  if (text.empty()) return 0;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception &) {
    throw UserError("--time-budget: '" + text + "' is not a duration such as 90s, 10m or 2h");
  }
  const std::string unit = text.substr(used);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (scale < 0 || !(value > 0) || !std::isfinite(value)) {
    throw UserError("--time-budget: '" + text + "' is not a duration such as 90s, 10m or 2h");
  }
  return value * scale;
}

std::vector<tuner::TuneTask> read_tasks(const TuneCommandOptions &o) {
  std::vector<tuner::TuneTask> tasks;
  const int sources = (!o.template_name.empty()) + (!o.workloads_file.empty()) + (!o.preset.empty());
  if (sources != 1) {
    throw UserError("say what to tune with exactly one of --template T --args JSON, --workloads FILE or --preset NAME");
  }
  if (!o.template_name.empty()) {
    if (o.args.empty()) throw UserError("--template needs --args (the template's arguments as JSON)");
    tasks.push_back({o.template_name, contracts::Json::parse(o.args), o.weight, ""});
  } else if (!o.workloads_file.empty()) {
    std::ifstream in(o.workloads_file);
    if (!in) throw UserError("cannot read " + o.workloads_file);
    std::stringstream text;
    text << in.rdbuf();
    const contracts::Json list = contracts::Json::parse(text.str());
    if (!list.is_array()) throw UserError(o.workloads_file + ": expected a JSON list of workloads");
    for (size_t i = 0; i < list.size(); ++i) {
      const contracts::Json &w = list[i];
      if (!w.is_object() || !w.contains("template") || !w.contains("args")) {
        throw UserError(o.workloads_file + ": workload " + std::to_string(i) +
                        " needs \"template\" and \"args\" (and may have \"weight\" and \"name\")");
      }
      tasks.push_back({w.at("template").as_string(), w.at("args"), w.get_or("weight", 1.0).as_double(),
                       w.get_or("name", "").as_string()});
    }
  } else {
    tasks = tuner::preset_tasks(o.preset);
  }
  return tasks;
}

// The job `kiln tune` asks for, the same whether it runs embedded or in the tuning service.
tuner::JobSubmission make_submission(const TuneCommandOptions &o) {
  tuner::JobSubmission sub;
  sub.tasks = read_tasks(o);
  tuner::TuneOptions &options = sub.options;
  options.strategy = o.strategy == "ga" ? "genetic" : o.strategy;
  options.trials = o.trials >= 0 ? o.trials : 64 * static_cast<int64_t>(sub.tasks.size());
  options.time_budget_s = parse_duration(o.time_budget);
  options.batch_size = o.batch;
  options.early_stopping = o.early_stopping;
  options.trials_per_task = o.trials_per_task;
  options.transfer = !o.no_transfer;
  options.skip_logged = o.skip_measured;
  options.seed = o.seed;
  options.priority = o.priority;
  if (o.threads > 0) {
    kiln::v1::MeasureOptions measure;
    measure.set_threads(o.threads);
    options.measure = measure;
  }
  sub.name = !o.name.empty()            ? o.name
             : !o.preset.empty()        ? o.preset
             : !o.template_name.empty() ? o.template_name
                                        : o.workloads_file;
  sub.target = o.target;
  sub.device_key = o.device_key;
  return sub;
}

void tune_embedded(const TuneCommandOptions &o) {
  // Ctrl-C (or SIGTERM) pauses the job: blocked in every thread from here on and taken by the
  // watcher below, which cancels the batch in flight; what was measured stays.
  rpc::block_shutdown_signals();
  db::TuningDbOptions db_options;
  db_options.create = o.resume == 0;  // a new job may start a log; resuming needs one
  db::TuningDb log = db::TuningDb::open(o.db, db_options);
  if (log.created() && !o.json) std::cerr << "created new tuning log " << log.path() << "\n";
  std::string target = o.target, device_key = o.device_key;
  int64_t job = o.resume;
  tuner::LocalMeasurerOptions lo;
  if (job > 0) {
    const std::optional<db::Job> existing = log.job(job);
    if (!existing) throw UserError("there is no job " + std::to_string(job) + " in " + o.db);
    target = existing->spec.value("target", target);
    device_key = existing->spec.value("device_key", device_key);
    // Measured as the job asks (--threads given when it was created), unless told otherwise now.
    if (existing->spec.contains("options")) {
      const tuner::TuneOptions stored =
          tuner::TuneOptions::from_json(contracts::Json::parse(existing->spec.at("options").dump()));
      if (stored.measure) lo.measure.MergeFrom(*stored.measure);
    }
  }
  if (o.threads > 0) lo.measure.set_threads(o.threads);
  tuner::LocalMeasurer measurer(target, lo);
  tuner::Tuner tuner(log, measurer, target, device_key);

  if (job == 0) {
    const tuner::JobSubmission sub = make_submission(o);
    job = tuner.create_job(sub.name, sub.tasks, sub.options);
    if (!o.json) {
      std::cerr << fmt::format("job {} in {}: {} tasks, {} trials\n", job, o.db, sub.tasks.size(), sub.options.trials);
    }
  }

  std::atomic<bool> cancel{false}, finished{false};
  std::thread watcher([&] {
    rpc::wait_for_shutdown_signal();
    if (finished) return;
    cancel = true;
    measurer.cancel();
  });

  LiveView view(std::cout, o.json);
  tuner::JobStatus status;
  try {
    status = tuner.run(
        job, [&](const tuner::JobStatus &s) { view.update(s); }, &cancel);
  } catch (...) {
    finished = true;
    kill(getpid(), SIGTERM);
    watcher.join();
    throw;
  }
  finished = true;
  kill(getpid(), SIGTERM);
  watcher.join();

  view.update(status, true);
  if (o.json) return;
  std::cout << "\n";
  print_summary(std::cout, status);
  print_end(std::cout, status, fmt::format("kiln tune --resume {} --db {}", job, o.db));
}

// The same job submitted to the tuning service and followed with the same view; Ctrl-C stops
// following, and the job goes on in the service.
void tune_in_daemon(const TuneCommandOptions &o) {
  // Before any thread starts (gRPC's too), so that Ctrl-C reaches the waiter of follow_job.
  rpc::block_shutdown_signals();
  TunerClient client(o.daemon);
  tuner::JobReport report;
  if (o.resume > 0) {
    report = client.resume(o.resume);
  } else {
    tuner::JobSubmission sub = make_submission(o);
    if (!o.target_given) sub.target.clear();
    if (!o.device_key_given) sub.device_key.clear();
    report = client.submit(sub);
  }
  const int64_t job = report.status.job_id;
  if (!o.json) {
    std::cerr << fmt::format("job {} {} the tuning service at {}: {} tasks, {} trials, {} on {}\n", job,
                             o.resume > 0 ? "resumed in" : "submitted to", client.address(), report.status.tasks.size(),
                             report.status.trials_total, report.target, report.device_key);
  }
  LiveView view(std::cout, o.json);
  const std::optional<tuner::JobReport> end = follow_job(client, job, view);
  const std::string daemon = "kiln jobs --daemon " + client.address();
  if (!end) {
    if (!o.json) {
      std::cout << fmt::format(
          "\nstopped following job {}; it goes on in the tuning service at {}.\n"
          "  watch it:  {} watch {}\n  pause it:  {} pause {}\n",
          job, client.address(), daemon, job, daemon, job);
    }
    return;
  }
  if (o.json) return;
  std::cout << "\n";
  print_summary(std::cout, end->status);
  print_end(std::cout, end->status, fmt::format("{} resume {}", daemon, job));
  if (end->status.state == "failed") throw UserError(fmt::format("job {} failed: {}", job, end->status.message));
}

void tune_command(const TuneCommandOptions &o) {
  if (o.daemon.address.empty()) {
    tune_embedded(o);
  } else {
    tune_in_daemon(o);
  }
}

}  // namespace

void resume_embedded(const std::string &db, int64_t job, bool json) {
  TuneCommandOptions o;
  o.db = db;
  o.resume = job;
  o.json = json;
  tune_embedded(o);
}

void add_tune_command(CLI::App &app) {
  auto o = std::make_shared<TuneCommandOptions>();
  CLI::App *c = app.add_subcommand("tune",
                                   "Tune operators: a job in the tuning log, measured on this machine in a local "
                                   "sandbox, or submitted to the tuning service (--daemon).");
  c->add_option("--template", o->template_name, "an operator template, e.g. dense_pack.x86 (see `kiln templates`)");
  c->add_option("--args", o->args, "the template's arguments as JSON");
  c->add_option("--weight", o->weight, "how often the workload occurs (with --template)")->capture_default_str();
  c->add_option("--workloads", o->workloads_file,
                "a JSON list of workloads: [{\"template\":..., \"args\":..., \"weight\":..., \"name\":...}]");
  c->add_option("--preset", o->preset, "a built-in task list: resnet18, bert-base");
  c->add_option("--trials", o->trials, "measurements in all (default: 64 per task)");
  c->add_option("--time-budget", o->time_budget, "stop after this long, e.g. 90s, 10m, 2h");
  c->add_option("--strategy", o->strategy, "xgb, ga, random or grid")
      ->check(CLI::IsMember({"xgb", "ga", "genetic", "random", "grid"}))
      ->capture_default_str();
  c->add_option("--db", o->db, "the tuning log (created when missing)")->capture_default_str();
  c->add_option("--target", o->target, "what to compile for")->capture_default_str();
  c->add_option("--device-key", o->device_key, "the device class the results are recorded under")
      ->capture_default_str();
  c->add_option("--batch", o->batch, "configs measured per batch")->capture_default_str();
  c->add_option("--early-stopping", o->early_stopping, "a task stops after this many trials without improvement");
  c->add_option("--trials-per-task", o->trials_per_task, "at most this many trials for one task");
  c->add_option("--threads", o->threads, "threads a candidate runs on (default: one per physical core)");
  c->add_option("--seed", o->seed, "seed of the search")->capture_default_str();
  c->add_option("--name", o->name, "the job's name in `kiln jobs list`");
  c->add_flag("--no-transfer", o->no_transfer, "do not learn from the log's records of other workloads");
  c->add_flag("--skip-measured", o->skip_measured,
              "never measure a config the log already holds for the same workload and target (from any job)");
  c->add_option("--resume", o->resume, "go on with a paused or interrupted job");
  c->add_option("--priority", o->priority, "with --daemon: higher runs first (-1000 to 1000)")->capture_default_str();
  add_daemon_options(c, o->daemon);
  c->add_flag("--json", o->json, "one JSON event per batch, for scripts");
  c->footer(
      "Examples:\n"
      "  kiln tune --preset resnet18 --trials 600\n"
      "  kiln tune --template dense_pack.x86 --args "
      "'{\"data\":{\"shape\":[64,512]},\"weight\":{\"shape\":[1000,512]}}'\n"
      "  kiln tune --daemon 127.0.0.1:9290 --token-file kiln.token --preset bert-base\n"
      "Ctrl-C pauses the job; `kiln tune --resume JOB` goes on. With --daemon, Ctrl-C stops following the\n"
      "job, which goes on in the service.");
  c->callback([o, c] {
    o->target_given = c->count("--target") > 0;
    o->device_key_given = c->count("--device-key") > 0;
    tune_command(*o);
  });
}

}  // namespace kiln::cli
