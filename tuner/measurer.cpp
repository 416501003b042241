// What every measurer shares: the one conversion of a wire result, the one conversion of an outcome
// into a tuning-log record, and the tuner's default measure options.
#include "tuner/measurer.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "db/target.h"
#include "db/workload.h"
#include "rpc_server/wire.h"

namespace kiln::tuner {

namespace {

// An OK outcome must carry timings the tuning log accepts (at least one, each finite and >= 0);
// one that does not is no measurement, and becomes UNKNOWN saying why.
void check_timings(db::ErrorClass &error, std::string &message, std::vector<double> &costs) {
  if (error != db::ErrorClass::kOk) {
    costs.clear();
    return;
  }
  std::string problem;
  if (costs.empty()) {
    problem = "the measurement reported OK without any timing";
  } else {
    for (double c : costs) {
      if (!db::cost_in_range(c)) {
        problem = "the measurement reported OK with an invalid timing (" + std::to_string(c) + " s)";
        break;
      }
    }
  }
  if (problem.empty()) return;
  error = db::ErrorClass::kUnknown;
  message = problem;
  costs.clear();
}

}  // namespace

double MeasureOutcome::mean() const {
  if (costs.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

MeasureOutcome outcome_from_proto(const kiln::v1::MeasureResult &result) {
  MeasureOutcome out;
  const int code = static_cast<int>(result.error());
  out.message = result.message();
  if (std::optional<db::ErrorClass> error = db::error_class_from_code(code)) {
    out.error = *error;
  } else {
    out.error = db::ErrorClass::kUnknown;
    out.message = "unknown error code " + std::to_string(code) + (out.message.empty() ? "" : ": " + out.message);
  }
  out.costs.assign(result.seconds().begin(), result.seconds().end());
  check_timings(out.error, out.message, out.costs);
  out.compile_s =
      std::isfinite(result.compile_seconds()) && result.compile_seconds() > 0 ? result.compile_seconds() : 0;
  // The wire result has no wall time of its own: the compile time and every timed repeat.
  out.wall_s = out.compile_s + std::accumulate(out.costs.begin(), out.costs.end(), 0.0);
  out.runner = result.runner_id();
  out.kiln_version = result.kiln_version();
  return out;
}

db::Record make_record(const ops::Task &task, const std::string &device_key, const autotune::Config &config,
                       const MeasureOutcome &outcome, std::optional<int64_t> job_id) {
  db::Record record;
  const contracts::Workload &workload = task.workload();
  record.workload = db::Workload::parse(workload.template_name, workload.args_json, task.flop());
  record.target = db::Target::make(task.target().str(), device_key);
  record.job_id = job_id;
  record.config = config.record();
  record.error = outcome.error;
  record.error_message = outcome.message;
  record.costs = outcome.costs;
  check_timings(record.error, record.error_message, record.costs);
  record.wall_s = std::isfinite(outcome.wall_s) && outcome.wall_s > 0 ? outcome.wall_s : 0;
  record.runner = outcome.runner;
  record.kiln_version = outcome.kiln_version;
  return record;
}

kiln::v1::MeasureOptions default_measure_options() {
  kiln::v1::MeasureOptions options;
  options.set_number(1);
  options.set_repeat(3);
  options.set_min_repeat_ms(10);
  options.set_build_timeout_ms(10000);
  options.set_run_timeout_ms(10000);
  options.set_check_correctness(true);
  return options;
}

std::optional<kiln::v1::Config> wire_config(const ops::Task &task, const autotune::Config &config,
                                            MeasureOutcome *failure) {
  try {
    return rpc::config_to_proto(config);
  } catch (const UserError &e) {
    failure->error = db::ErrorClass::kInstantiation;
    failure->message =
        config.defined() ? e.what() : "an undefined config: no config of " + task.workload().template_name + "'s space";
    return std::nullopt;
  }
}

}  // namespace kiln::tuner
