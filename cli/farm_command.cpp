#include "cli/farm_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/table.h"
#include "contracts/error.h"
#include "contracts/json.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "db/error.h"
#include "db/tuning_db.h"
#include "kiln/v1/measure.pb.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/signals.h"
#include "rpc_server/tracker_summary.h"
#include "rpc_server/wire.h"
#include "tuner/measurer.h"

namespace kiln::cli {

namespace {

// How a command reaches the farm.
struct FarmOptions {
  std::string tracker = "127.0.0.1:9190";
  std::string token_file;
  rpc::TlsFiles tls;
  bool json = false;
};

void add_farm_options(CLI::App *command, FarmOptions &options) {
  command->add_option("--tracker", options.tracker, "the tracker's address, HOST:PORT")->capture_default_str();
  command->add_option(
      "--token-file", options.token_file,
      std::string("file holding the farm's shared token (default: $") + rpc::kTokenEnvironmentVariable + ")");
  command->add_option("--tls-ca", options.tls.ca_file, "PEM CA certificates that sign the farm's");
  command->add_option("--tls-cert", options.tls.cert_file, "PEM client certificate (mutual TLS)");
  command->add_option("--tls-key", options.tls.key_file, "PEM private key of --tls-cert");
  command->add_option("--tls-server-name", options.tls.server_name_override,
                      "the name to expect in the servers' certificates");
  command->add_flag("--json", options.json, "machine-readable JSON output");
}

rpc::Endpoint tracker_endpoint(const FarmOptions &options) {
  return {options.tracker, rpc::load_token(options.token_file), options.tls};
}

std::string quarantine_note(const kiln::v1::RunnerSummary &runner) {
  if (runner.state() != kiln::v1::RUNNER_STATE_QUARANTINED) return "";
  std::string note = runner.quarantine_reason();
  if (runner.quarantine_left_ms() > 0) {
    note += fmt::format("{}{:.0f} s left", note.empty() ? "" : "; ", std::ceil(runner.quarantine_left_ms() / 1e3));
  }
  return note;
}

void status_command(const FarmOptions &options) {
  rpc::TrackerClient tracker(tracker_endpoint(options));
  kiln::v1::SummaryReply summary = tracker.summary();
  if (options.json) {
    // One entry per device key, each with its runners (a tracker that predates per-runner
    // summaries gives none).
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto &device : summary.devices()) {
      nlohmann::ordered_json runners = nlohmann::ordered_json::array();
      for (const auto &r : summary.runners()) {
        if (r.device_key() != device.device_key()) continue;
        runners.push_back({{"runner", r.runner_id()},
                           {"address", r.address()},
                           {"target", r.target()},
                           {"state", rpc::runner_state_name(r.state())},
                           {"quarantine_reason", r.quarantine_reason()},
                           {"quarantine_left_s", r.quarantine_left_ms() / 1e3},
                           {"last_heartbeat_s_ago", r.since_heartbeat_ms() / 1e3},
                           {"registered_s_ago", r.since_registered_ms() / 1e3},
                           {"leases_served", r.leases_served()},
                           {"leases_failed", r.leases_failed()},
                           {"leases_expired", r.leases_expired()},
                           {"consecutive_failures", r.consecutive_failures()}});
      }
      out.push_back({{"device_key", device.device_key()},
                     {"free_runners", device.free_runners()},
                     {"busy_runners", device.busy_runners()},
                     {"quarantined_runners", device.quarantined_runners()},
                     {"queue_length", device.queue_length()},
                     {"targets", std::vector<std::string>(device.targets().begin(), device.targets().end())},
                     {"runners", runners}});
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  if (summary.devices_size() == 0) {
    std::cout << "no runners registered and no requests waiting at " << options.tracker << '\n';
    return;
  }
  Table table({"device key", "free", "busy", "quarantined", "waiting", "targets"});
  for (const auto &device : summary.devices()) {
    std::string targets;
    for (const std::string &t : device.targets()) targets += (targets.empty() ? "\"" : ", \"") + t + "\"";
    table.add_row({device.device_key(), std::to_string(device.free_runners()), std::to_string(device.busy_runners()),
                   std::to_string(device.quarantined_runners()), std::to_string(device.queue_length()),
                   targets.empty() ? "-" : targets});
  }
  table.print(std::cout);
  if (summary.runners_size() == 0) return;
  // Failed: leases released as failed; expired: revoked as unused (docs/farm.md).
  Table runners({"runner", "address", "device key", "state", "heartbeat", "leases", "failed", "expired", "why"});
  for (const auto &r : summary.runners()) {
    const std::string note = quarantine_note(r);
    runners.add_row({r.runner_id(), r.address(), r.device_key(), rpc::runner_state_name(r.state()),
                     fmt::format("{:.1f} s ago", r.since_heartbeat_ms() / 1e3), std::to_string(r.leases_served()),
                     std::to_string(r.leases_failed()), std::to_string(r.leases_expired()), note.empty() ? "-" : note});
  }
  std::cout << '\n';
  runners.print(std::cout);
}

struct MeasureCommandOptions {
  std::string template_name;
  std::string args = "{}";
  std::string config;  // ConfigSpace::parse_config_text's forms; empty: the template's default config
  std::string db;      // the tuning log to record the result in; empty: none
  std::string target;
  std::string device;
  int priority = 0;
  int64_t wait_ms = 60000;
  kiln::v1::MeasureOptions measure;
  bool no_check = false;
  bool flush = false;
};

std::string error_name(kiln::v1::ErrorClass error) { return kiln::v1::ErrorClass_Name(error); }

// Where `kiln measure --db` records its result: a job of its own holding the one record. An
// existing log is opened before measuring, so that one that cannot be written fails early; a new
// one is created only when there is something to record.
class MeasureLog {
 public:
  explicit MeasureLog(const std::string &path) : path_(path) {
    std::error_code ec;
    if (path_.empty() || !std::filesystem::exists(path_, ec) || std::filesystem::file_size(path_, ec) == 0) return;
    db::TuningDbOptions options;
    options.create = false;
    try {
      log_.emplace(db::TuningDb::open(path_, options));
    } catch (const db::TuningDbError &e) {
      if (e.kind() != db::TuningDbError::Kind::kNotFound) throw;
    }
  }

  struct Recorded {
    int64_t job_id = 0;
    int64_t record_id = 0;
  };

  // Records the outcome; nothing for an INFRA outcome (the measurement did not happen).
  std::optional<Recorded> record(const ops::Task &task, const std::string &device_key, const autotune::Config &config,
                                 const tuner::MeasureOutcome &outcome) {
    if (path_.empty() || outcome.error == db::ErrorClass::kInfra) return std::nullopt;
    if (!log_) {
      log_.emplace(db::TuningDb::open(path_));
      if (log_->created()) std::cerr << "created new tuning log " << log_->path() << '\n';
    }
    const nlohmann::json spec = {{"command", "measure"},
                                 {"template", task.workload().template_name},
                                 {"args", nlohmann::json::parse(task.workload().args_json)},
                                 {"target", task.target().str()},
                                 {"device_key", device_key},
                                 {"config", nlohmann::json::parse(config.to_json())}};
    Recorded r;
    r.job_id = log_->create_job("measure " + task.workload().template_name, spec, 1);
    r.record_id = log_->insert(tuner::make_record(task, device_key, config, outcome, r.job_id));
    log_->update_job(r.job_id, db::JobState::kDone, std::string(db::to_string(outcome.error)));
    return r;
  }

  const std::string &path() const { return path_; }

 private:
  std::string path_;
  std::optional<db::TuningDb> log_;
};

// While it lives, SIGINT or SIGTERM (Ctrl-C) releases the lease `client` holds, so that the runner
// is free at once instead of after the tracker's lease idle timeout, and ends the process with
// status 128 + the signal. The signals are blocked in every thread from construction on (before
// the farm client starts gRPC's threads) and taken by a watcher thread.
class ReleaseOnInterrupt {
 public:
  explicit ReleaseOnInterrupt(rpc::FarmClient &client) : client_(client) {
    watcher_ = std::thread([this] {
      const int signal = rpc::wait_for_shutdown_signal();
      if (finished_) return;
      std::string released;
      const std::string lease = client_.held_lease();
      if (!lease.empty()) {
        try {
          client_.tracker().release(lease, /*runner_failed=*/false);
          released = "; released lease " + lease;
        } catch (const std::exception &e) {
          released = "; could not release lease " + lease + ": " + e.what();
        }
      }
      std::cerr << "kiln measure: interrupted (" << strsignal(signal) << ")" << released << std::endl;
      std::_Exit(128 + signal);
    });
  }
  ~ReleaseOnInterrupt() {
    finished_ = true;
    ::kill(::getpid(), SIGTERM);  // wakes the watcher, which sees that the measurement is over
    watcher_.join();
  }
  ReleaseOnInterrupt(const ReleaseOnInterrupt &) = delete;
  ReleaseOnInterrupt &operator=(const ReleaseOnInterrupt &) = delete;

 private:
  rpc::FarmClient &client_;
  std::atomic<bool> finished_{false};
  std::thread watcher_;
};

// What `kiln measure` shows while it waits for a lease: on a terminal one line, refreshed in place
// every second and cleared when the wait ends; otherwise one plain line when the wait starts.
// Written to stderr, so that the result on stdout stays machine-readable.
class WaitLine {
 public:
  explicit WaitLine(rpc::TrackerClient &tracker) : tracker_(tracker), terminal_(::isatty(STDERR_FILENO) == 1) {}

  void operator()(const rpc::AcquireWait &wait) {
    if (wait.done) {
      if (terminal_ && shown_) std::cerr << "\r\033[K" << std::flush;
      shown_ = false;
      return;
    }
    if (shown_ && !terminal_) return;
    std::string line = "waiting for a runner of " + wait.device_key;
    try {
      const kiln::v1::SummaryReply summary = tracker_.summary();
      for (const auto &device : summary.devices()) {
        if (device.device_key() != wait.device_key) continue;
        line += fmt::format(": {} busy, {} in queue", device.busy_runners(), device.queue_length());
        if (device.quarantined_runners() > 0) line += fmt::format(", {} quarantined", device.quarantined_runners());
      }
    } catch (const rpc::FarmError &) {
      // The counts are a courtesy; the wait goes on without them.
    }
    if (terminal_) {
      std::cerr << "\r\033[K" << line << fmt::format(", {} s", wait.waited.count() / 1000) << std::flush;
    } else {
      std::cerr << "kiln measure: " << line << std::endl;
    }
    shown_ = true;
  }

 private:
  rpc::TrackerClient &tracker_;
  const bool terminal_;
  bool shown_ = false;
};

// Prints the result; false when the config did not measure OK.
bool measure_command(const FarmOptions &farm, MeasureCommandOptions options) {
  // Before any thread starts: Ctrl-C is taken by ReleaseOnInterrupt's watcher.
  rpc::block_shutdown_signals();
  // The workload and config are made here, with the same registry the runners use, so that a
  // mistake is reported before anything is sent.
  contracts::Json args;
  try {
    args = contracts::Json::parse(options.args);
  } catch (const std::exception &e) {
    throw UserError("--args is not JSON: " + std::string(e.what()));
  }
  ops::Task task(options.template_name, args, driver::resolve_target(options.target));
  const autotune::Config config = options.config.empty()
                                      ? task.default_config()
                                      : task.space().parse_config_text(options.config, task.default_config());
  MeasureLog log(options.db);
  kiln::v1::Workload workload = rpc::workload_to_proto(task.workload());
  kiln::v1::Target target = rpc::target_to_proto(task.target().target, options.device);
  kiln::v1::Config proto_config = rpc::config_to_proto(config);
  if (options.no_check) options.measure.set_check_correctness(false);
  options.measure.set_cpu_cache_flush(options.flush);

  rpc::FarmClientOptions client_options;
  client_options.tracker = tracker_endpoint(farm);
  client_options.runner_tls = farm.tls;
  client_options.priority = options.priority;
  client_options.acquire_wait = std::chrono::milliseconds(options.wait_ms);
  rpc::TrackerClient status_tracker(client_options.tracker);
  auto wait_line = std::make_shared<WaitLine>(status_tracker);
  client_options.on_wait = [wait_line](const rpc::AcquireWait &wait) { (*wait_line)(wait); };
  rpc::FarmClient client(client_options);
  kiln::v1::MeasureResult result;
  {
    ReleaseOnInterrupt release(client);
    result = client.measure(workload, target, {proto_config}, options.measure).at(0);
  }
  // The runner names the target it compiled for ("-mcpu=native" resolved to its CPU): the result
  // is shown and recorded under that.
  const std::string measured_target = result.target().empty() ? task.target().str() : result.target();
  std::optional<ops::Task> measured_task;
  if (measured_target != task.target().str()) {
    try {
      measured_task.emplace(options.template_name, args, driver::resolve_target(measured_target));
    } catch (const UserError &) {
      // A target this machine's compiler cannot describe: recorded under the one asked for.
    }
  }
  const std::optional<MeasureLog::Recorded> recorded =
      log.record(measured_task ? *measured_task : task, options.device, config, tuner::outcome_from_proto(result));

  const auto &seconds = result.seconds();
  double mean =
      seconds.empty() ? 0 : std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
  if (farm.json) {
    nlohmann::ordered_json out{{"workload", task.key()},
                               {"template", task.workload().template_name},
                               {"args", nlohmann::json::parse(task.workload().args_json)},
                               {"target", measured_target},
                               {"device_key", options.device},
                               {"config", nlohmann::json::parse(config.to_json())},
                               {"error", error_name(result.error())},
                               {"message", result.message()},
                               {"seconds", std::vector<double>(seconds.begin(), seconds.end())},
                               {"mean_seconds", mean},
                               {"gflops", mean > 0 ? task.flop() / mean * 1e-9 : 0.0},
                               {"compile_seconds", result.compile_seconds()},
                               {"runner", result.runner_id()},
                               {"kiln_version", result.kiln_version()}};
    if (!log.path().empty()) {
      out["db"] = log.path();
      out["job_id"] = recorded ? nlohmann::ordered_json(recorded->job_id) : nlohmann::ordered_json();
      out["record_id"] = recorded ? nlohmann::ordered_json(recorded->record_id) : nlohmann::ordered_json();
    }
    std::cout << out.dump(2) << '\n';
  } else {
    std::vector<std::pair<std::string, std::string>> fields{{"workload", task.key()},
                                                            {"template", task.workload().template_name},
                                                            {"target", measured_target},
                                                            {"config", abbreviate(config.to_string(), 100)},
                                                            {"result", error_name(result.error())}};
    if (!result.message().empty()) fields.emplace_back("message", result.message());
    if (!seconds.empty()) {
      std::string list;
      for (double s : seconds) list += (list.empty() ? "" : " ") + fmt::format("{:.3f}", s * 1e6);
      fields.emplace_back("mean", fmt::format("{:.3f} us", mean * 1e6));
      fields.emplace_back("repeats (us)", list);
      fields.emplace_back("gflops", fmt::format("{:.2f}", task.flop() / mean * 1e-9));
    }
    fields.emplace_back("compile", fmt::format("{:.1f} ms", result.compile_seconds() * 1e3));
    fields.emplace_back("runner", result.runner_id());
    if (!log.path().empty()) {
      fields.emplace_back("recorded", recorded ? fmt::format("record {} of job {} in {}", recorded->record_id,
                                                             recorded->job_id, log.path())
                                               : "not recorded: the measurement did not happen (INFRA)");
    }
    print_fields(std::cout, fields);
  }
  return result.error() == kiln::v1::OK;
}

}  // namespace

void add_farm_commands(CLI::App &kiln) {
  CLI::App *farm = kiln.add_subcommand("farm", "Look at the device farm.");
  farm->require_subcommand(1);
  {
    auto options = std::make_shared<FarmOptions>();
    auto *command = farm->add_subcommand("status", "Runners and waiting requests per device key.");
    add_farm_options(command, *options);
    command->callback([=] { status_command(*options); });
  }
  {
    auto farm_options = std::make_shared<FarmOptions>();
    auto options = std::make_shared<MeasureCommandOptions>();
    auto *command = kiln.add_subcommand("measure", "Measure one workload and config on a leased runner of the farm.");
    add_farm_options(command, *farm_options);
    command
        ->add_option("--template", options->template_name,
                     "operator template, e.g. dense_pack.x86 (see `kiln templates`)")
        ->required();
    command->add_option("--args", options->args, "the template's arguments as JSON")->required();
    command->add_option("--config", options->config,
                        "a config: knob=value pairs separated by ';' (tile_y=[4,2,8];tile_x=[16,8]), the knobs as "
                        "JSON, or the config JSON (its space fingerprint optional); knobs left out keep their value "
                        "in the default config (default: the template's default config; `kiln templates show "
                        "TEMPLATE` lists the knobs)");
    command->add_option("--db", options->db,
                        "record the result in this tuning log, as a job of its own (created when missing)");
    command->add_option("--target", options->target, "the target string, e.g. \"llvm -mcpu=znver4\"")->required();
    command->add_option("--device", options->device, "the device key of the runners to use")->required();
    command->add_option("--priority", options->priority, "lease priority, -1000 to 1000")
        ->check(CLI::Range(-1000, 1000));
    command->add_option("--wait-ms", options->wait_ms, "how long to wait for a runner")->capture_default_str();
    auto *measure = &options->measure;
    command->add_option_function<uint32_t>(
        "--number", [measure](uint32_t v) { measure->set_number(v); }, "calls per repeat");
    command->add_option_function<uint32_t>(
        "--repeat", [measure](uint32_t v) { measure->set_repeat(v); }, "repeats");
    command->add_option_function<uint32_t>(
        "--min-repeat-ms", [measure](uint32_t v) { measure->set_min_repeat_ms(v); },
        "grow the calls per repeat until a repeat lasts this long");
    command->add_option_function<uint32_t>(
        "--build-timeout-ms", [measure](uint32_t v) { measure->set_build_timeout_ms(v); }, "compile time allowed");
    command->add_option_function<uint32_t>(
        "--run-timeout-ms", [measure](uint32_t v) { measure->set_run_timeout_ms(v); }, "run time allowed");
    command->add_option_function<uint32_t>(
        "--threads", [measure](uint32_t v) { measure->set_threads(v); }, "threads the kernel may use");
    command->add_flag("--flush", options->flush, "flush the inputs from the CPU caches before each repeat");
    command->add_flag("--no-check", options->no_check, "skip the correctness check");
    command->callback([=] {
      // The result is printed either way; the exit status says whether it failed.
      if (!measure_command(*farm_options, *options)) throw CLI::RuntimeError(kExitFailed);
    });
  }
}

}  // namespace kiln::cli
