#include "tuner/job_wire.h"

#include <algorithm>
#include <array>
#include <utility>

#include "contracts/json.h"
#include "tuner/presets.h"

namespace kiln::tuner {

namespace {

constexpr int64_t kTrialsPerTask = 64;

void check_length(const char *field, const std::string &value, size_t limit) {
  if (value.size() > limit) {
    throw TuneError(std::string(field) + " is longer than " + std::to_string(limit) + " bytes");
  }
}

const std::array<std::pair<const char *, kiln::v1::JobState>, 7> kStates = {{
    {"pending", kiln::v1::JOB_STATE_PENDING},
    {"running", kiln::v1::JOB_STATE_RUNNING},
    {"waiting", kiln::v1::JOB_STATE_WAITING},
    {"paused", kiln::v1::JOB_STATE_PAUSED},
    {"done", kiln::v1::JOB_STATE_DONE},
    {"failed", kiln::v1::JOB_STATE_FAILED},
    {"cancelled", kiln::v1::JOB_STATE_CANCELLED},
}};

}  // namespace

JobSubmission submission_from_proto(const kiln::v1::JobSpec &spec, const SubmissionLimits &limits) {
  check_length("name", spec.name(), limits.max_name_bytes);
  check_length("preset", spec.preset(), limits.max_name_bytes);
  check_length("target", spec.target(), limits.max_name_bytes);
  check_length("device_key", spec.device_key(), limits.max_name_bytes);
  check_length("strategy", spec.strategy(), limits.max_name_bytes);
  if (static_cast<size_t>(spec.tasks_size()) > limits.max_tasks) {
    throw TuneError("a job has at most " + std::to_string(limits.max_tasks) + " tasks, not " +
                    std::to_string(spec.tasks_size()));
  }
  if (spec.tasks_size() > 0 && !spec.preset().empty()) throw TuneError("give tasks or a preset, not both");
  if (spec.tasks_size() == 0 && spec.preset().empty()) throw TuneError("a job needs tasks or a preset");

  JobSubmission out;
  if (!spec.preset().empty()) {
    out.tasks = preset_tasks(spec.preset());
  } else {
    for (int i = 0; i < spec.tasks_size(); ++i) {
      const kiln::v1::TuneTask &t = spec.tasks(i);
      const std::string label = "task " + std::to_string(i);
      check_length((label + " template_name").c_str(), t.template_name(), limits.max_name_bytes);
      check_length((label + " name").c_str(), t.name(), limits.max_name_bytes);
      check_length((label + " args_json").c_str(), t.args_json(), limits.max_args_json_bytes);
      TuneTask task;
      task.template_name = t.template_name();
      try {
        task.args = contracts::Json::parse(t.args_json());
      } catch (const contracts::JsonError &e) {
        throw TuneError(label + " (" + t.template_name() + "): args_json is not JSON: " + e.what());
      }
      if (!task.args.is_object()) {
        throw TuneError(label + " (" + t.template_name() + "): args_json must be a JSON object");
      }
      task.weight = t.weight() == 0 ? 1 : t.weight();
      task.name = t.name();
      out.tasks.push_back(std::move(task));
    }
  }
  out.name = !spec.name().empty()              ? spec.name()
             : !spec.preset().empty()          ? spec.preset()
             : !out.tasks.front().name.empty() ? out.tasks.front().name
                                               : out.tasks.front().template_name;
  out.target = spec.target();
  out.device_key = spec.device_key();
  TuneOptions &o = out.options;
  if (!spec.strategy().empty()) o.strategy = spec.strategy() == "ga" ? "genetic" : spec.strategy();
  o.trials = spec.has_trials() ? spec.trials() : kTrialsPerTask * static_cast<int64_t>(out.tasks.size());
  o.time_budget_s = spec.time_budget_s();
  o.early_stopping = spec.early_stopping();
  o.trials_per_task = spec.trials_per_task();
  if (spec.has_batch_size()) o.batch_size = spec.batch_size();
  o.transfer = !spec.no_transfer();
  o.skip_logged = spec.skip_logged();
  o.priority = spec.priority();
  o.seed = spec.seed();
  if (spec.has_measure()) o.measure = spec.measure();
  if (spec.has_feature_threads()) o.search.feature_threads = spec.feature_threads();
  if (spec.has_plan_size()) o.search.plan_size = static_cast<size_t>(std::max<int64_t>(0, spec.plan_size()));
  o.confirm_top = spec.confirm_top();
  o.confirm_repeats = spec.confirm_top() > 0 ? spec.confirm_repeats() : o.confirm_repeats;
  return out;
}

kiln::v1::JobSpec submission_to_proto(const JobSubmission &submission) {
  kiln::v1::JobSpec spec;
  spec.set_name(submission.name);
  for (const TuneTask &t : submission.tasks) {
    kiln::v1::TuneTask *task = spec.add_tasks();
    task->set_template_name(t.template_name);
    task->set_args_json(t.args.dump());
    task->set_weight(t.weight);
    task->set_name(t.name);
  }
  spec.set_target(submission.target);
  spec.set_device_key(submission.device_key);
  const TuneOptions &o = submission.options;
  spec.set_trials(o.trials);
  spec.set_time_budget_s(o.time_budget_s);
  spec.set_strategy(o.strategy);
  spec.set_early_stopping(o.early_stopping);
  spec.set_trials_per_task(o.trials_per_task);
  spec.set_batch_size(o.batch_size);
  spec.set_no_transfer(!o.transfer);
  spec.set_skip_logged(o.skip_logged);
  spec.set_priority(o.priority);
  spec.set_seed(o.seed);
  if (o.measure) *spec.mutable_measure() = *o.measure;
  spec.set_feature_threads(o.search.feature_threads);
  spec.set_plan_size(static_cast<int64_t>(o.search.plan_size));
  spec.set_confirm_top(o.confirm_top);
  spec.set_confirm_repeats(o.confirm_repeats);
  return spec;
}

kiln::v1::JobState state_to_proto(const std::string &state) {
  for (const auto &[name, value] : kStates) {
    if (state == name) return value;
  }
  return kiln::v1::JOB_STATE_UNSPECIFIED;
}

std::string state_from_proto(kiln::v1::JobState state) {
  for (const auto &[name, value] : kStates) {
    if (state == value) return name;
  }
  return "";
}

void report_to_proto(const JobReport &report, kiln::v1::JobInfo *info) {
  const JobStatus &s = report.status;
  info->set_id(s.job_id);
  info->set_name(report.name);
  info->set_state(state_to_proto(s.state));
  info->set_priority(report.priority);
  info->set_target(report.target);
  info->set_device_key(report.device_key);
  info->set_trials_done(s.trials_done);
  info->set_trials_total(s.trials_total);
  info->set_message(s.message);
  info->set_elapsed_s(s.elapsed_s);
  info->set_eta_s(s.eta_s);
  for (const TaskStatus &t : s.tasks) {
    kiln::v1::TaskProgress *p = info->add_tasks();
    p->set_name(t.name);
    p->set_workload_key(t.workload_key);
    p->set_weight(t.weight);
    p->set_trials(t.trials);
    p->set_valid(t.valid);
    p->set_best_s(t.best_s.value_or(0));
    p->set_default_s(t.default_s.value_or(0));
    p->set_best_gflops(t.best_gflops());
    p->set_speedup(t.speedup());
    p->set_done(t.done);
    for (const auto &[cls, count] : t.errors) (*p->mutable_errors())[cls] = count;
  }
}

JobReport report_from_proto(const kiln::v1::JobInfo &info) {
  JobReport report;
  report.name = info.name();
  report.priority = info.priority();
  report.target = info.target();
  report.device_key = info.device_key();
  JobStatus &s = report.status;
  s.job_id = info.id();
  s.state = state_from_proto(info.state());
  s.trials_done = info.trials_done();
  s.trials_total = info.trials_total();
  s.message = info.message();
  s.elapsed_s = info.elapsed_s();
  s.eta_s = info.eta_s();
  for (const kiln::v1::TaskProgress &p : info.tasks()) {
    TaskStatus t;
    t.name = p.name();
    t.workload_key = p.workload_key();
    t.weight = p.weight();
    t.trials = p.trials();
    t.valid = p.valid();
    if (p.best_s() > 0) t.best_s = p.best_s();
    if (p.default_s() > 0) t.default_s = p.default_s();
    // The wire carries GFLOPS, the status the work per call: flop from best seconds and GFLOPS.
    if (t.best_s) t.flop = p.best_gflops() * 1e9 * *t.best_s;
    t.done = p.done();
    for (const auto &[cls, count] : p.errors()) t.errors[cls] = count;
    s.tasks.push_back(std::move(t));
  }
  return report;
}

}  // namespace kiln::tuner
