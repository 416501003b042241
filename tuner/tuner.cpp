#include "tuner/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <google/protobuf/util/json_util.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "compiler/driver/target.h"
#include "contracts/target.h"
#include "cost_model/history.h"

namespace kiln::tuner {

using autotune::Config;
using contracts::Json;

namespace {

constexpr int kSpecVersion = 1;
constexpr int64_t kMaxTrials = 10000000;
constexpr int kMaxPriority = 1000;
constexpr const char *kTimeBudgetSpent = "time budget spent";

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void check_options(const TuneOptions &o) {
  auto names = strategy_names();
  if (std::find(names.begin(), names.end(), o.strategy) == names.end()) {
    throw TuneError("unknown search strategy '" + o.strategy + "'; the strategies are random, grid, genetic and xgb");
  }
  if (o.trials < 1 || o.trials > kMaxTrials) {
    throw TuneError("the trial budget must be between 1 and " + std::to_string(kMaxTrials) + ", not " +
                    std::to_string(o.trials));
  }
  if (o.trials_per_task < 0 || o.early_stopping < 0) {
    throw TuneError("trials per task and early stopping must not be negative");
  }
  // A time budget of at most a year: anything longer is a mistake (or a unit mix-up).
  constexpr double kMaxTimeBudget = 366.0 * 24 * 3600;
  if (!(o.time_budget_s >= 0) || !(o.time_budget_s <= kMaxTimeBudget)) {
    throw TuneError("the time budget must be between 0 and " + std::to_string(static_cast<int64_t>(kMaxTimeBudget)) +
                    " seconds (a year), not " + std::to_string(o.time_budget_s));
  }
  if (o.batch_size < 1 || o.batch_size > 4096) {
    throw TuneError("the batch size must be between 1 and 4096, not " + std::to_string(o.batch_size));
  }
  if (o.max_infra_retries < 0 || o.max_infra_retries > 100) throw TuneError("max_infra_retries must be 0..100");
  if (o.confirm_top < 0 || o.confirm_top > 64 || o.confirm_repeats < 0 || o.confirm_repeats > 16) {
    throw TuneError("confirmation times 0..64 leaders of each task 0..16 times again, not " +
                    std::to_string(o.confirm_top) + " leaders " + std::to_string(o.confirm_repeats) + " times");
  }
  if (o.transfer_max_records_per_workload < 0) {
    throw TuneError("transfer_max_records_per_workload must not be negative (0: every record)");
  }
  if (o.search.plan_size < 1 || o.search.plan_size > 4096 || o.search.min_plan_size > 4096) {
    throw TuneError("the plan sizes must be between 1 and 4096, not " + std::to_string(o.search.min_plan_size) +
                    " and " + std::to_string(o.search.plan_size));
  }
  if (o.search.feature_threads < 0 || o.search.feature_threads > 1024) {
    throw TuneError("feature threads must be between 0 (one per core) and 1024, not " +
                    std::to_string(o.search.feature_threads));
  }
  if (o.priority < -kMaxPriority || o.priority > kMaxPriority) {
    throw TuneError("the priority must be between -" + std::to_string(kMaxPriority) + " and " +
                    std::to_string(kMaxPriority) + ", not " + std::to_string(o.priority));
  }
}

// A job's spec in the log: what run() needs to restart it in any process.
Json spec_json(const std::string &target, const std::string &device_key, const std::vector<TuneTask> &tasks,
               const TuneOptions &options) {
  Json list = Json::array();
  for (const TuneTask &t : tasks) {
    list.push_back(
        Json::object({{"template", t.template_name}, {"args", t.args}, {"weight", t.weight}, {"name", t.name}}));
  }
  return Json::object({{"version", kSpecVersion},
                       {"target", target},
                       {"device_key", device_key},
                       {"tasks", list},
                       {"options", options.to_json()}});
}

struct TaskState {
  TuneTask spec;
  std::unique_ptr<ops::Task> task;
  std::unique_ptr<SearchStrategy> strategy;
  TaskStatus status;
  std::vector<double> best_history;  // best seconds after each trial (inf before the first valid)
  bool default_measured = false;
};

void account(TaskState &t, const Config &config, const MeasureOutcome &o) {
  TaskStatus &s = t.status;
  ++s.trials;
  if (o.valid()) {
    ++s.valid;
    const double mean = o.mean();
    if (!s.best_s || mean < *s.best_s) {
      s.best_s = mean;
      s.last_improvement = s.trials;
    }
    if (config == t.task->default_config()) s.default_s = mean;
  } else {
    ++s.errors[std::string(db::to_string(o.error))];
  }
  t.best_history.push_back(s.best_s ? *s.best_s : std::numeric_limits<double>::infinity());
}

Trial trial_of(const ops::Task &task, const Config &config, const MeasureOutcome &o) {
  Trial t;
  t.config = config;
  t.valid = o.valid() && o.mean() > 0;
  t.gflops = t.valid ? task.flop() / o.mean() / 1e9 : 0;
  return t;
}

// The tasks of a job's spec, built for `target`, without their strategies.
std::vector<TaskState> spec_tasks(const Json &spec, const ops::Target &target) {
  std::vector<TaskState> tasks;
  for (const Json &tj : spec.at("tasks").as_array()) {
    TaskState t;
    t.spec.template_name = tj.at("template").as_string();
    t.spec.args = tj.at("args");
    t.spec.weight = tj.at("weight").as_double();
    t.spec.name = tj.get_or("name", "").as_string();
    t.task = std::make_unique<ops::Task>(t.spec.template_name, t.spec.args, target);
    t.status.name = t.spec.name.empty() ? t.spec.template_name : t.spec.name;
    t.status.workload_key = t.task->key();
    t.status.weight = t.spec.weight;
    t.status.flop = t.task->flop();
    tasks.push_back(std::move(t));
  }
  return tasks;
}

// The config of a record of `task`, or nullopt for a config of another version of the space.
std::optional<Config> record_config(const ops::Task &task, const db::Record &r) {
  try {
    return task.space().from_record(r.config);
  } catch (const UserError &) {
    return std::nullopt;
  }
}

// The expected gain of giving task t another batch (see tuner.h).
double expected_gain(const TaskState &t) {
  const TaskStatus &s = t.status;
  if (!s.best_s) return t.spec.weight * 1e9;  // nothing valid yet: worth a look
  const double best = *s.best_s;
  const size_t n = t.best_history.size();
  const size_t window = std::min<size_t>(n, 64);
  double backward = 0;
  if (window > 0 && std::isfinite(t.best_history[n - window])) backward = (t.best_history[n - window] - best) / window;
  const double forward = best / static_cast<double>(std::max<int64_t>(1, s.trials));
  return t.spec.weight * std::max(backward, forward);
}

}  // namespace

Json TuneOptions::to_json() const {
  Json j = Json::object({{"strategy", strategy},
                         {"trials", trials},
                         {"trials_per_task", trials_per_task},
                         {"early_stopping", early_stopping},
                         {"time_budget_s", time_budget_s},
                         {"batch_size", batch_size},
                         {"transfer", transfer},
                         {"transfer_min_records", transfer_min_records},
                         {"transfer_max_records_per_workload", transfer_max_records_per_workload},
                         {"skip_logged", skip_logged},
                         {"max_infra_retries", max_infra_retries},
                         {"confirm_top", confirm_top},
                         {"confirm_repeats", confirm_repeats},
                         {"seed", std::to_string(seed)},
                         {"priority", priority},
                         {"plan_size", static_cast<int64_t>(search.plan_size)},
                         {"min_plan_size", static_cast<int64_t>(search.min_plan_size)},
                         {"feature_threads", search.feature_threads}});
  if (measure) {
    std::string text;
    KILN_CHECK(google::protobuf::util::MessageToJsonString(*measure, &text).ok(), "measure options as JSON");
    j.set("measure", Json::parse(text));
  }
  return j;
}

TuneOptions TuneOptions::from_json(const Json &j) {
  TuneOptions o;
  o.strategy = j.get_or("strategy", o.strategy).as_string();
  o.trials = j.get_or("trials", o.trials).as_int();
  o.trials_per_task = j.get_or("trials_per_task", o.trials_per_task).as_int();
  o.early_stopping = j.get_or("early_stopping", o.early_stopping).as_int();
  o.time_budget_s = j.get_or("time_budget_s", o.time_budget_s).as_double();
  o.batch_size = j.get_or("batch_size", o.batch_size).as_int();
  o.transfer = j.get_or("transfer", o.transfer).as_bool();
  o.transfer_min_records = j.get_or("transfer_min_records", o.transfer_min_records).as_int();
  o.transfer_max_records_per_workload =
      j.get_or("transfer_max_records_per_workload", o.transfer_max_records_per_workload).as_int();
  o.skip_logged = j.get_or("skip_logged", o.skip_logged).as_bool();
  o.max_infra_retries = static_cast<int>(j.get_or("max_infra_retries", o.max_infra_retries).as_int());
  o.confirm_top = j.get_or("confirm_top", o.confirm_top).as_int();
  o.confirm_repeats = j.get_or("confirm_repeats", o.confirm_repeats).as_int();
  o.seed = std::stoull(j.get_or("seed", "0").as_string());
  o.priority = static_cast<int>(j.get_or("priority", 0).as_int());
  if (const Json *measure = j.find("measure")) {
    kiln::v1::MeasureOptions m;
    if (!google::protobuf::util::JsonStringToMessage(measure->dump(), &m).ok()) {
      throw TuneError("the job's measure options are not readable: " + measure->dump());
    }
    o.measure = m;
  }
  o.search.plan_size = static_cast<size_t>(j.get_or("plan_size", static_cast<int64_t>(o.search.plan_size)).as_int());
  o.search.min_plan_size =
      static_cast<size_t>(j.get_or("min_plan_size", static_cast<int64_t>(o.search.min_plan_size)).as_int());
  o.search.feature_threads = static_cast<int>(j.get_or("feature_threads", o.search.feature_threads).as_int());
  return o;
}

double JobStatus::objective_s() const {
  double sum = 0;
  for (const TaskStatus &t : tasks) {
    if (t.best_s) sum += t.weight * *t.best_s;
  }
  return sum;
}

Tuner::Tuner(db::TuningDb &log, Measurer &measurer, const std::string &target, const std::string &device_key)
    : log_(log), measurer_(measurer), target_(contracts::canonical_target(target)), device_key_(device_key) {
  contracts::check_device_key(device_key_);
}

int64_t Tuner::create_job(const std::string &name, const std::vector<TuneTask> &tasks, const TuneOptions &options) {
  check_options(options);
  if (tasks.empty()) throw TuneError("a tuning job needs at least one task");
  try {
    measurer_.check(target_, device_key_);
  } catch (const MeasureError &e) {
    throw TuneError(e.what());
  }
  const ops::Target target = driver::resolve_target(target_);
  std::set<std::string> keys;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TuneTask &t = tasks[i];
    const std::string label = "task " + std::to_string(i) + " (" + t.template_name + ")";
    if (!(t.weight > 0) || !std::isfinite(t.weight)) throw TuneError(label + ": the weight must be positive");
    try {
      const ops::Task task(t.template_name, t.args, target);
      if (task.space().count_valid() == 0) throw TuneError(label + ": its config space has no valid config");
      if (!keys.insert(task.key()).second) throw TuneError(label + ": the same workload as an earlier task");
    } catch (const TuneError &) {
      throw;
    } catch (const UserError &e) {
      throw TuneError(label + ": " + e.what());
    }
  }
  const std::string spec = spec_json(target_, device_key_, tasks, options).dump();
  return log_.create_job(name, nlohmann::json::parse(spec), options.trials);
}

JobStatus Tuner::run(int64_t job_id, const std::function<void(const JobStatus &)> &progress,
                     const std::atomic<bool> *cancel) {
  const std::optional<db::Job> job = log_.job(job_id);
  if (!job) throw TuneError("there is no tuning job " + std::to_string(job_id) + " in " + log_.path());
  const Json spec = Json::parse(job->spec.dump());
  if (spec.get_or("version", 0).as_int() != kSpecVersion) {
    throw TuneError("job " + std::to_string(job_id) + " was written by another version of the tuner");
  }
  if (!contracts::same_target(spec.at("target").as_string(), target_) ||
      spec.at("device_key").as_string() != device_key_) {
    throw TuneError("job " + std::to_string(job_id) + " tunes for '" + spec.at("target").as_string() + "' on " +
                    spec.at("device_key").as_string() + ", not for '" + target_ + "' on " + device_key_);
  }
  if (job->state == db::JobState::kDone || job->state == db::JobState::kCancelled) {
    throw TuneError("job " + std::to_string(job_id) + " is " + std::string(db::to_string(job->state)) +
                    "; only a pending, running, paused or failed job can be run");
  }
  const TuneOptions options = TuneOptions::from_json(spec.at("options"));
  const ops::Target target = driver::resolve_target(target_);
  const db::Target stored_target = db::Target::make(target_, device_key_);

  JobStatus status;
  status.job_id = job_id;
  status.trials_total = options.trials;
  status.state = "running";
  const double t0 = now_s();

  // Tasks, their strategies, and what the job (or the log) already measured.
  std::vector<TaskState> tasks = spec_tasks(spec, target);

  int64_t done_before = 0;
  // The history of each template on this device class with its features, extracted once per run
  // and shared by the job's tasks of that template (a model's convolutions): each task's prior is
  // fit on the rows of every other workload.
  std::map<std::string, cost_model::HistorySamples> history;
  for (TaskState &t : tasks) {
    SearchOptions so = options.search;
    so.seed = options.seed ^ std::hash<std::string>()(t.task->key());
    if (options.strategy == "xgb" && options.transfer) {
      const double prior_t0 = now_s();
      const std::string &tmpl = t.task->templ().name;
      auto h = history.find(tmpl);
      if (h == history.end()) {
        db::HistoryQuery q;
        q.template_name = tmpl;
        q.device_key = device_key_;
        std::vector<cost_model::HistoryRow> rows;
        for (const db::Record &r : log_.history(q)) {
          if (r.error == db::ErrorClass::kInfra) continue;
          rows.push_back({r.workload.template_name, r.workload.args, r.config,
                          r.valid() && r.mean() > 0 ? r.workload.flop / r.mean() : 0.0});
        }
        h = history
                .emplace(tmpl, cost_model::samples_from_history(
                                   cost_model::thin_history(
                                       rows, static_cast<size_t>(options.transfer_max_records_per_workload)),
                                   cost_model::IrFeatureExtractor(), target, so.feature_threads))
                .first;
      }
      const cost_model::Samples others = h->second.samples.without(t.task->key());
      if (static_cast<int64_t>(others.rows()) >= options.transfer_min_records) {
        auto prior = std::make_shared<cost_model::XgbCostModel>(so.xgb);
        prior->fit(others);
        so.prior = prior;
        t.status.prior_rows = static_cast<int64_t>(others.rows());
      }
      t.status.prior_s = now_s() - prior_t0;
    }
    t.strategy = make_strategy(options.strategy, *t.task, so);

    // Resume: the job's own records (and with skip_logged, every record of the workload on this
    // target) are told to the strategy.
    db::ExportFilter filter;
    filter.workload_key = t.task->key();
    std::vector<Trial> known;
    log_.for_each_record(filter, [&](const db::Record &r) {
      if (r.error == db::ErrorClass::kInfra) return;
      const bool own = r.job_id && *r.job_id == job_id;
      if (!own && !(options.skip_logged && contracts::same_target(r.target.target, target_))) return;
      const std::optional<Config> parsed = record_config(*t.task, r);
      if (!parsed) return;
      const Config &c = *parsed;
      MeasureOutcome o;
      o.error = r.error;
      o.costs = r.costs;
      known.push_back(trial_of(*t.task, c, o));
      if (own) {
        account(t, c, o);
        ++done_before;
        if (c == t.task->default_config()) t.default_measured = true;
      } else if (c == t.task->default_config()) {
        t.default_measured = true;
      }
    });
    t.strategy->update(known);
  }
  status.trials_done = done_before;

  auto snapshot = [&]() {
    status.tasks.clear();
    for (const TaskState &t : tasks) {
      status.tasks.push_back(t.status);
      status.tasks.back().search = t.strategy->stats();
    }
    status.elapsed_s = now_s() - t0;
    const int64_t new_trials = status.trials_done - done_before;
    const int64_t left = status.trials_total - status.trials_done;
    status.eta_s = new_trials > 0 ? status.elapsed_s / static_cast<double>(new_trials) * left : 0;
  };

  auto finish_task = [&](TaskState &t, const std::string &why) {
    if (t.status.done.empty()) t.status.done = why;
  };

  // Measures a batch of one task (INFRA results again, up to the retry limit), records every
  // other result in one transaction with the job's id, and accounts for them. Returns the trials
  // recorded (none: the measurer answered INFRA for the whole batch, kept in last_infra).
  std::string last_infra;
  auto measure_and_record = [&](TaskState &t, const std::vector<Config> &batch) {
    std::vector<MeasureOutcome> outcomes = measurer_.measure(*t.task, device_key_, batch);
    KILN_CHECK(outcomes.size() == batch.size(), "measurer returned ", outcomes.size(), " results for ", batch.size(),
               " configs");
    for (int retry = 0; retry < options.max_infra_retries; ++retry) {
      std::vector<size_t> again;
      for (size_t i = 0; i < outcomes.size(); ++i) {
        if (outcomes[i].error == db::ErrorClass::kInfra) again.push_back(i);
      }
      if (again.empty() || (cancel && cancel->load())) break;
      std::vector<Config> configs;
      for (size_t i : again) configs.push_back(batch[i]);
      std::vector<MeasureOutcome> second = measurer_.measure(*t.task, device_key_, configs);
      for (size_t k = 0; k < again.size() && k < second.size(); ++k) outcomes[again[k]] = std::move(second[k]);
    }

    std::vector<db::Record> records;
    std::vector<Trial> trials;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (outcomes[i].error == db::ErrorClass::kInfra) {
        last_infra = outcomes[i].message;
        continue;
      }
      records.push_back(make_record(*t.task, device_key_, batch[i], outcomes[i], job_id));
      trials.push_back(trial_of(*t.task, batch[i], outcomes[i]));
    }
    if (observer_) {
      std::map<db::ErrorClass, int> by_class;
      for (const MeasureOutcome &o : outcomes) ++by_class[o.error];
      for (const auto &[error, count] : by_class) observer_->trials_measured(error, count);
    }
    if (!records.empty()) {
      const double write_t0 = now_s();
      log_.insert(records);
      if (observer_) observer_->log_written(now_s() - write_t0);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (outcomes[i].error != db::ErrorClass::kInfra) account(t, batch[i], outcomes[i]);
    }
    status.trials_done += static_cast<int64_t>(records.size());
    return trials;
  };

  log_.update_job(job_id, db::JobState::kRunning, std::string("running"));
  size_t warmup_next = 0;
  try {
    while (status.trials_done < options.trials) {
      if (cancel && cancel->load()) {
        status.state = "paused";
        break;
      }
      if (options.time_budget_s > 0 && now_s() - t0 >= options.time_budget_s) {
        status.message = kTimeBudgetSpent;
        break;
      }
      // Which task: warm-up round robin, then the largest expected gain.
      TaskState *pick = nullptr;
      for (size_t k = 0; k < tasks.size() && !pick; ++k) {
        TaskState &t = tasks[(warmup_next + k) % tasks.size()];
        if (t.status.done.empty() && t.status.trials == 0) {
          pick = &t;
          warmup_next = (warmup_next + k + 1) % tasks.size();
        }
      }
      if (!pick) {
        double best = -1;
        for (TaskState &t : tasks) {
          if (!t.status.done.empty()) continue;
          const double g = expected_gain(t);
          if (g > best) {
            best = g;
            pick = &t;
          }
        }
      }
      if (!pick) {
        status.message = "every task is done";
        break;
      }
      TaskState &t = *pick;

      int64_t n = std::min(options.batch_size, options.trials - status.trials_done);
      if (options.trials_per_task > 0) n = std::min(n, options.trials_per_task - t.status.trials);
      std::vector<Config> batch;
      if (!t.default_measured) {
        batch.push_back(t.task->default_config());
        t.default_measured = true;
      }
      const SearchStats before = t.strategy->stats();
      for (Config &c : t.strategy->next_batch(static_cast<size_t>(n) - batch.size())) {
        if (!batch.empty() && c == batch.front()) continue;
        batch.push_back(std::move(c));
      }
      if (observer_) {
        const SearchStats after = t.strategy->stats();
        if (after.fits > before.fits) observer_->cost_model_refitted(after.refit_s - before.refit_s);
      }
      if (batch.empty()) {
        finish_task(t, "space exhausted");
        continue;
      }

      const std::vector<Trial> trials = measure_and_record(t, batch);
      t.strategy->update(trials);
      if (trials.empty()) {
        // The farm could not measure anything of the batch: do not spin on it.
        status.message = "the measurer answered INFRA for a whole batch: " + last_infra;
        status.state = "paused";
        break;
      }

      // Does the task leave the rotation?
      if (t.strategy->exhausted()) finish_task(t, "space exhausted");
      if (options.trials_per_task > 0 && t.status.trials >= options.trials_per_task)
        finish_task(t, "task budget spent");
      if (options.early_stopping > 0 && t.status.best_s &&
          t.status.trials - t.status.last_improvement >= options.early_stopping) {
        finish_task(t, "no improvement in " + std::to_string(options.early_stopping) + " trials");
      }
      const int64_t warmup = std::max<int64_t>(2 * options.batch_size, 32);
      if (t.status.valid == 0 && (t.status.trials >= warmup || t.strategy->exhausted())) {
        std::string summary;
        for (const auto &[cls, count] : t.status.errors) {
          summary += (summary.empty() ? "" : ", ") + std::to_string(count) + " " + cls;
        }
        finish_task(t, "no valid config in " + std::to_string(t.status.trials) + " trials (" + summary + ")");
      }

      snapshot();
      if (progress) progress(status);

      // Another process (`kiln jobs pause|cancel`) may have stopped the job through the log.
      const std::optional<db::Job> now = log_.job(job_id);
      if (now && (now->state == db::JobState::kPaused || now->state == db::JobState::kCancelled)) {
        status.state = now->state == db::JobState::kPaused ? "paused" : "cancelled";
        status.message = now->message.empty() ? "stopped through the tuning log" : now->message;
        break;
      }
    }
    // Confirmation (TuneOptions::confirm_top): each task's leaders timed again, in rounds, until
    // each has 1 + confirm_repeats valid records; the ranking may change between rounds, so a
    // config that rises into the leaders is timed too. Idempotent: a resumed job counts the
    // records it has.
    const bool confirm = status.state == "running" && status.message != kTimeBudgetSpent && options.confirm_top > 0 &&
                         options.confirm_repeats > 0;
    const int64_t with_valid =
        std::count_if(tasks.begin(), tasks.end(), [](const TaskState &t) { return t.status.valid > 0; });
    // The default config is timed again with the leaders: measured once in the first batch, one
    // unlucky timing would otherwise leave it out of the ranking and the task could report (and
    // a build replay) a config slower than the default.
    const int64_t planned = confirm ? with_valid * (options.confirm_top + 1) * options.confirm_repeats : 0;
    if (planned > 0) {
      status.trials_total = std::max(status.trials_total, status.trials_done + planned);
      log_.set_job_total(job_id, status.trials_total);
      const int64_t wanted = 1 + options.confirm_repeats;
      for (TaskState &t : tasks) {
        if (t.status.valid == 0) continue;
        std::set<int64_t> dropped;  // leaders that failed when timed again: not timed a third time
        const int64_t cap = 4 * (options.confirm_top + 1) * options.confirm_repeats;
        const Config default_config = t.task->default_config();
        int64_t spent = 0;
        while (spent < cap && !(cancel && cancel->load())) {
          std::vector<Config> batch;
          for (const db::RankedConfig &leader :
               log_.ranked_configs(t.task->key(), stored_target, options.confirm_top, db::Scope::kExact)) {
            if (leader.records >= wanted || dropped.count(leader.median.config.index)) continue;
            const std::optional<Config> c = record_config(*t.task, leader.median);
            if (c) batch.push_back(*c);  // none: a config of another version of the space
          }
          if (!dropped.count(default_config.index()) &&
              std::find(batch.begin(), batch.end(), default_config) == batch.end()) {
            const size_t records = log_.config_records(t.task->key(), stored_target, default_config.record()).size();
            // A default with no valid record failed, or was never measured: not timed here.
            if (records > 0 && static_cast<int64_t>(records) < wanted) batch.push_back(default_config);
          }
          if (batch.empty()) break;
          if (spent + static_cast<int64_t>(batch.size()) > cap) batch.resize(static_cast<size_t>(cap - spent));
          const std::vector<Trial> trials = measure_and_record(t, batch);
          if (trials.empty()) break;  // INFRA for the whole batch: the log's best stands as it is
          for (const Trial &trial : trials) {
            if (!trial.valid) dropped.insert(trial.config.index());
          }
          t.status.confirmed += static_cast<int64_t>(trials.size());
          spent += static_cast<int64_t>(batch.size());
          snapshot();
          if (progress) progress(status);
        }
        if (const std::optional<db::Record> best = log_.best(t.task->key(), stored_target, db::Scope::kExact)) {
          t.status.best_s = best->mean();
        }
        // The default as the log ranks it, by the upper median of its records.
        const std::vector<db::Record> defaults =
            log_.config_records(t.task->key(), stored_target, default_config.record());
        if (!defaults.empty()) t.status.default_s = defaults[defaults.size() / 2].mean();
      }
      status.trials_total = std::max(options.trials, status.trials_done);
      log_.set_job_total(job_id, status.trials_total);
    }
  } catch (const std::exception &e) {
    snapshot();
    status.state = "failed";
    status.message = e.what();
    log_.update_job(job_id, db::JobState::kFailed, status.message);
    throw;
  }

  snapshot();
  if (status.state == "running") {
    status.state = "done";
    if (status.message.empty()) status.message = "trial budget spent";
  }
  const db::JobState state = status.state == "paused"      ? db::JobState::kPaused
                             : status.state == "cancelled" ? db::JobState::kCancelled
                                                           : db::JobState::kDone;
  log_.update_job(job_id, state, status.message);
  return status;
}

JobStatus logged_status(db::TuningDb &log, int64_t job_id) {
  const std::optional<db::Job> job = log.job(job_id);
  if (!job) throw TuneError("there is no tuning job " + std::to_string(job_id) + " in " + log.path());
  JobStatus status;
  status.job_id = job_id;
  status.state = std::string(db::to_string(job->state));
  status.trials_done = job->trials_done;
  status.trials_total = job->trials_total;
  status.message = job->message;
  std::vector<TaskState> tasks;
  try {
    const Json spec = Json::parse(job->spec.dump());
    if (spec.get_or("version", 0).as_int() != kSpecVersion) return status;
    tasks = spec_tasks(spec, driver::resolve_target(spec.at("target").as_string()));
  } catch (const UserError &) {
    return status;  // a spec of another tuner, or a template this build does not have
  }
  for (TaskState &t : tasks) {
    db::ExportFilter filter;
    filter.workload_key = t.task->key();
    log.for_each_record(filter, [&](const db::Record &r) {
      if (!r.job_id || *r.job_id != job_id || r.error == db::ErrorClass::kInfra) return;
      const std::optional<Config> c = record_config(*t.task, r);
      if (!c) return;
      MeasureOutcome o;
      o.error = r.error;
      o.costs = r.costs;
      account(t, *c, o);
    });
    status.tasks.push_back(t.status);
  }
  return status;
}

std::string format_status(const JobStatus &status) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "job %lld %s: %lld/%lld trials, %.0f s elapsed, eta %.0f s\n",
                static_cast<long long>(status.job_id), status.state.c_str(), static_cast<long long>(status.trials_done),
                static_cast<long long>(status.trials_total), status.elapsed_s, status.eta_s);
  out << line;
  for (const TaskStatus &t : status.tasks) {
    std::snprintf(line, sizeof line, "  %-28s trials %5lld valid %5lld best %9.3f ms %8.1f GFLOPS speedup %5.2fx%s%s\n",
                  t.name.c_str(), static_cast<long long>(t.trials), static_cast<long long>(t.valid),
                  t.best_s ? *t.best_s * 1e3 : 0.0, t.best_gflops(), t.speedup(),
                  t.done.empty() ? "" : "  done: ", t.done.c_str());
    out << line;
  }
  return out.str();
}

}  // namespace kiln::tuner
