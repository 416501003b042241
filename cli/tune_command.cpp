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
#include "cli/table.h"
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

std::string duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "-";
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
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

// What the user sees while a job runs: lines redrawn in place on a terminal, a plain line per
// batch otherwise, JSON events with --json.
class LiveView {
 public:
  LiveView(std::ostream &out, bool json) : out_(out), json_(json), tty_(!json && isatty(STDOUT_FILENO)) {}

  void update(const tuner::JobStatus &s, bool final = false) {
    if (json_) {
      nlohmann::ordered_json e = {{"event", final ? "end" : "progress"},
                                  {"job", s.job_id},
                                  {"state", s.state},
                                  {"trials_done", s.trials_done},
                                  {"trials_total", s.trials_total},
                                  {"elapsed_s", s.elapsed_s},
                                  {"eta_s", s.eta_s}};
      nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
      for (const tuner::TaskStatus &t : s.tasks) {
        tasks.push_back({{"name", t.name},
                         {"workload", t.workload_key},
                         {"trials", t.trials},
                         {"valid", t.valid},
                         {"best_s", t.best_s ? nlohmann::json(*t.best_s) : nlohmann::json()},
                         {"default_s", t.default_s ? nlohmann::json(*t.default_s) : nlohmann::json()},
                         {"best_gflops", t.best_gflops()},
                         {"speedup", t.speedup()},
                         {"done", t.done},
                         {"errors", t.errors}});
      }
      e["tasks"] = tasks;
      out_ << e.dump() << "\n" << std::flush;
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!tty_) {
      // One line per batch: the job and the task that moved.
      const tuner::TaskStatus *moved = nullptr;
      for (size_t i = 0; i < s.tasks.size(); ++i) {
        if (s.tasks[i].trials != (i < last_trials_.size() ? last_trials_[i] : 0)) moved = &s.tasks[i];
      }
      last_trials_.clear();
      for (const tuner::TaskStatus &t : s.tasks) last_trials_.push_back(t.trials);
      if (moved && !final) {
        out_ << fmt::format("trial {}/{}  {}: {} trials, best {:.1f} GFLOPS ({:.2f}x the default)  eta {}\n",
                            s.trials_done, s.trials_total, moved->name, moved->trials, moved->best_gflops(),
                            moved->speedup(), duration(s.eta_s))
             << std::flush;
      }
      return;
    }
    if (!final && now - last_draw_ < std::chrono::milliseconds(250)) return;
    last_draw_ = now;
    std::string text;
    text += fmt::format("job {}  {}/{} trials  {} elapsed  eta {}\n", s.job_id, s.trials_done, s.trials_total,
                        duration(s.elapsed_s), duration(s.eta_s));
    size_t width = 8;
    for (const tuner::TaskStatus &t : s.tasks) width = std::max(width, t.name.size());
    const int64_t per_task = std::max<int64_t>(1, s.trials_total / std::max<int64_t>(1, s.tasks.size()));
    for (const tuner::TaskStatus &t : s.tasks) {
      const int filled = static_cast<int>(std::min<int64_t>(20, t.trials * 20 / per_task));
      text +=
          fmt::format("  {:<{}} [{}{}] {:5} trials {:8.1f} GFLOPS {:6.2f}x  {}\n", t.name, width,
                      std::string(static_cast<size_t>(filled), '#'), std::string(static_cast<size_t>(20 - filled), '.'),
                      t.trials, t.best_gflops(), t.speedup(), t.done);
    }
    // Back over the previous drawing, then draw again.
    if (lines_ > 0) out_ << "\x1b[" << lines_ << "A";
    std::istringstream in(text);
    std::string line;
    lines_ = 0;
    while (std::getline(in, line)) {
      out_ << "\x1b[2K" << line << "\n";
      ++lines_;
    }
    out_ << std::flush;
  }

 private:
  std::ostream &out_;
  bool json_, tty_;
  int lines_ = 0;
  std::vector<int64_t> last_trials_;
  std::chrono::steady_clock::time_point last_draw_{};
};

void print_summary(std::ostream &out, const tuner::JobStatus &s) {
  Table table({"task", "weight", "trials", "default ms", "best ms", "speedup", "GFLOPS", "done"});
  double total_default = 0, total_best = 0;
  bool complete = true;
  for (const tuner::TaskStatus &t : s.tasks) {
    auto ms = [](const std::optional<double> &v) { return v ? fmt::format("{:.3f}", *v * 1e3) : std::string("-"); };
    table.add_row({t.name, fmt::format("{:g}", t.weight), std::to_string(t.trials), ms(t.default_s), ms(t.best_s),
                   t.speedup() > 0 ? fmt::format("{:.2f}x", t.speedup()) : "-",
                   t.best_s ? fmt::format("{:.1f}", t.best_gflops()) : "-", t.done.empty() ? "-" : t.done});
    if (t.default_s && t.best_s) {
      total_default += t.weight * *t.default_s;
      total_best += t.weight * *t.best_s;
    } else {
      complete = false;
    }
  }
  table.print(out);
  if (total_best > 0) {
    out << fmt::format("weighted total: default {:.3f} ms, tuned {:.3f} ms, speedup {:.2f}x{}\n", total_default * 1e3,
                       total_best * 1e3, total_default / total_best,
                       complete ? "" : " (tasks without a valid default or best left out)");
  }
}

void tune_command(const TuneCommandOptions &o) {
  // Ctrl-C (or SIGTERM) pauses the job: blocked in every thread from here on and taken by the
  // watcher below, which cancels the batch in flight; what was measured stays.
  rpc::block_shutdown_signals();
  db::TuningDbOptions db_options;
  db_options.create = o.resume == 0;  // a new job may start a log; resuming needs one
  db::TuningDb log = db::TuningDb::open(o.db, db_options);
  if (log.created() && !o.json) std::cerr << "created new tuning log " << log.path() << "\n";
  std::string target = o.target, device_key = o.device_key;
  int64_t job = o.resume;
  if (job > 0) {
    const std::optional<db::Job> existing = log.job(job);
    if (!existing) throw UserError("there is no job " + std::to_string(job) + " in " + o.db);
    target = existing->spec.value("target", target);
    device_key = existing->spec.value("device_key", device_key);
  }

  tuner::LocalMeasurerOptions lo;
  if (o.threads > 0) lo.measure.set_threads(o.threads);
  tuner::LocalMeasurer measurer(target, lo);
  tuner::Tuner tuner(log, measurer, target, device_key);

  if (job == 0) {
    const std::vector<tuner::TuneTask> tasks = read_tasks(o);
    tuner::TuneOptions options;
    options.strategy = o.strategy == "ga" ? "genetic" : o.strategy;
    options.trials = o.trials >= 0 ? o.trials : 64 * static_cast<int64_t>(tasks.size());
    options.time_budget_s = parse_duration(o.time_budget);
    options.batch_size = o.batch;
    options.early_stopping = o.early_stopping;
    options.trials_per_task = o.trials_per_task;
    options.transfer = !o.no_transfer;
    options.skip_logged = o.skip_measured;
    options.seed = o.seed;
    const std::string name = !o.name.empty()            ? o.name
                             : !o.preset.empty()        ? o.preset
                             : !o.template_name.empty() ? o.template_name
                                                        : o.workloads_file;
    job = tuner.create_job(name, tasks, options);
    if (!o.json)
      std::cerr << fmt::format("job {} in {}: {} tasks, {} trials\n", job, o.db, tasks.size(), options.trials);
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
  if (status.state == "paused") {
    std::cout << fmt::format("job {} paused after {} of {} trials; resume with: kiln tune --resume {} --db {}\n", job,
                             status.trials_done, status.trials_total, job, o.db);
  } else {
    std::cout << fmt::format("job {} {}: {} ({} trials in {})\n", job, status.state, status.message, status.trials_done,
                             duration(status.elapsed_s));
  }
}

}  // namespace

void add_tune_command(CLI::App &app) {
  auto o = std::make_shared<TuneCommandOptions>();
  CLI::App *c = app.add_subcommand(
      "tune", "Tune operators on this machine: a job in the tuning log, measured in a local sandbox.");
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
  c->add_flag("--json", o->json, "one JSON event per batch, for scripts");
  c->footer(
      "Examples:\n"
      "  kiln tune --preset resnet18 --trials 600\n"
      "  kiln tune --template dense_pack.x86 --args "
      "'{\"data\":{\"shape\":[64,512]},\"weight\":{\"shape\":[1000,512]}}'\n"
      "Ctrl-C pauses the job; `kiln tune --resume JOB` goes on.");
  c->callback([o] { tune_command(*o); });
}

}  // namespace kiln::cli
