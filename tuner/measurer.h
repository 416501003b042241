#pragma once
// Measurers: how the tuner gets a batch of configs of one task measured. One interface, three
// implementations:
//   LocalMeasurer   the runner's sandboxed measurement pool (rpc_server/measure_pool.h: worker
//                   processes, timeouts, the correctness check, error classes), driven in this
//                   process with no tracker or network: the embedded default for one machine.
//   FarmMeasurer    the device farm through rpc::FarmClient (leases, INFRA retried on another
//                   runner).
//   ReplayMeasurer  answers from a recorded table (the tuning log or records added by hand): fast,
//                   noise-free comparisons of search strategies, and tests.
// An INFRA outcome means the measurement did not happen (the farm failed, it was cancelled); the
// tuner retries it and never records it as a property of the config. Every other outcome is
// recorded with its error class.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/autotune/config_space.h"
#include "compiler/ops/registry.h"
#include "contracts/error.h"
#include "db/record.h"
#include "db/tuning_db.h"
#include "kiln/v1/measure.pb.h"
#include "kiln/v1/workload.pb.h"

namespace kiln::rpc {
struct FarmClientOptions;
class FarmClient;
class MeasurePool;
}  // namespace kiln::rpc

namespace kiln::tuner {

// A request a measurer refuses as a whole, before measuring any of it: a target it does not
// serve, a workload it cannot build, options beyond its limits, a farm that rejects the request
// (bad token, no runner of the device class). The message says which.
class MeasureError : public UserError {
 public:
  using UserError::UserError;
};

// What measuring one config gave.
struct MeasureOutcome {
  db::ErrorClass error = db::ErrorClass::kOk;
  std::string message;        // empty when OK
  std::vector<double> costs;  // seconds per call, one per repeat; empty on error
  double compile_s = 0;
  double wall_s = 0;  // compile and run, as the measurer saw it
  std::string runner;
  std::string kiln_version;

  bool valid() const { return error == db::ErrorClass::kOk; }
  // Mean of the costs (seconds); NaN when there are none.
  double mean() const;
};

// The one conversion of a wire result. An error code no Kiln uses is UNKNOWN naming the code; an OK
// result without timings (or with a negative or non-finite one) is UNKNOWN too, since the log keeps
// no valid record without costs.
MeasureOutcome outcome_from_proto(const kiln::v1::MeasureResult &result);

// The record the tuning log keeps for one measured config of `task` on the device class
// `device_key` (the target is the task's). The one place a measurement becomes a record. Like
// outcome_from_proto, it turns an OK outcome without usable costs into UNKNOWN, and drops the costs
// of a failure.
db::Record make_record(const ops::Task &task, const std::string &device_key, const autotune::Config &config,
                       const MeasureOutcome &outcome, std::optional<int64_t> job_id = std::nullopt);

// The wire form of one config of `task`, or nullopt with `*failure` set to an INSTANTIATION
// outcome saying why (an undefined or partial config: nothing a runner or worker could build).
// What every measurer does with a config before sending it.
std::optional<kiln::v1::Config> wire_config(const ops::Task &task, const autotune::Config &config,
                                            MeasureOutcome *failure);

class Measurer {
 public:
  virtual ~Measurer() = default;
  // "local", "farm" or "replay".
  virtual std::string name() const = 0;
  // Measures `configs` of `task` (on the task's target) on a device of class `device_key`. One
  // outcome per config, in order. Throws MeasureError for a request refused as a whole. A config
  // of another space (or an undefined one) is an INSTANTIATION outcome, not an error.
  virtual std::vector<MeasureOutcome> measure(const ops::Task &task, const std::string &device_key,
                                              const std::vector<autotune::Config> &configs) = 0;
  // Throws MeasureError when this measurer cannot measure tasks for `target` on devices of class
  // `device_key` at all (another target than a local measurer's; a device class the farm has no
  // runner for), so that a job fails before anything runs. The default accepts everything.
  virtual void check(const std::string &target, const std::string &device_key) {
    (void)target;
    (void)device_key;
  }
  // Asks a measure() running on another thread to stop soon: what it has not measured comes back
  // INFRA "cancelled". Safe to call from a signal-handling thread; a no-op when idle.
  virtual void cancel() {}
};

// The measure options the tuner uses unless told otherwise: number 1, repeat 3, min_repeat_ms 10
// (the runner's growth of `number` for short kernels), build timeout 10 s, run timeout 10 s,
// correctness checked.
kiln::v1::MeasureOptions default_measure_options();

struct LocalMeasurerOptions {
  // The options of every batch.
  kiln::v1::MeasureOptions measure = default_measure_options();
  // Parallel builds; 0: one per core.
  int build_workers = 0;
  // The argv of a worker process: an executable whose main() calls rpc::measure_worker_main()
  // when given "--measure-worker" (every Kiln executable that embeds a LocalMeasurer does).
  std::vector<std::string> worker_command = {"/proc/self/exe", "--measure-worker"};
  uint64_t memory_limit_bytes = 8ull << 30;
  std::string runner_id = "local";
  // Called with the seconds each batch waited for the machine (another job's batch in flight);
  // none when empty.
  std::function<void(double seconds)> waited;
};

class LocalMeasurer : public Measurer {
 public:
  // `target`: the canonical target this machine compiles for ("llvm -mcpu=native" is the host);
  // a task for another target is refused with MeasureError.
  LocalMeasurer(const std::string &target, LocalMeasurerOptions options = {});
  ~LocalMeasurer() override;
  std::string name() const override { return "local"; }
  void check(const std::string &target, const std::string &device_key) override;
  std::vector<MeasureOutcome> measure(const ops::Task &task, const std::string &device_key,
                                      const std::vector<autotune::Config> &configs) override;
  void cancel() override;

  // A measurer for one of several jobs that share `local`: their batches take turns on its one
  // pool (so that timings do not disturb each other), each measured with `options` instead of the
  // pool's own. Its cancel() stops only its own batch in flight.
  static std::unique_ptr<Measurer> share(std::shared_ptr<LocalMeasurer> local, kiln::v1::MeasureOptions options);

 private:
  class Share;
  struct Impl;
  std::vector<MeasureOutcome> measure_with(const ops::Task &task, const std::string &device_key,
                                           const std::vector<autotune::Config> &configs,
                                           const kiln::v1::MeasureOptions &options, const void *owner);
  std::unique_ptr<Impl> impl_;
};

class FarmMeasurer : public Measurer {
 public:
  FarmMeasurer(const rpc::FarmClientOptions &farm, kiln::v1::MeasureOptions options = default_measure_options());
  ~FarmMeasurer() override;
  std::string name() const override { return "farm"; }
  void check(const std::string &target, const std::string &device_key) override;
  std::vector<MeasureOutcome> measure(const ops::Task &task, const std::string &device_key,
                                      const std::vector<autotune::Config> &configs) override;
  // Cancels the farm call in flight (the wait for a runner, or the runner's measurement stream,
  // whose runner then stops the candidate it is on) and releases the lease without blaming the
  // runner; the configs not measured come back INFRA "cancelled", none is retried.
  void cancel() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ReplayMeasurer : public Measurer {
 public:
  ReplayMeasurer() = default;
  // Every record of the log (of one template when `template_name` is not empty): for a config
  // measured several times, the fastest valid record answers (or the latest failure). INFRA
  // records are skipped.
  static ReplayMeasurer from_log(db::TuningDb &log, const std::string &template_name = "");

  std::string name() const override { return "replay"; }
  // A config the table does not hold comes back UNKNOWN "not in the replay table" (and counts in
  // misses()); a config of another space than the task's is INSTANTIATION.
  std::vector<MeasureOutcome> measure(const ops::Task &task, const std::string &device_key,
                                      const std::vector<autotune::Config> &configs) override;

  // By the rules of from_log: a valid outcome answers over a failure, a faster valid one over a
  // slower one, a later failure over an earlier one; INFRA (and OK without costs) is ignored.
  void add(const std::string &workload_key, int64_t config_index, MeasureOutcome outcome);
  size_t size() const { return table_.size(); }
  // The configs of a workload the table holds (index order), for strategies' tests and benchmarks.
  std::vector<int64_t> indexes(const std::string &workload_key) const;
  int64_t misses() const { return misses_; }
  int64_t answered() const { return answered_; }

 private:
  std::map<std::pair<std::string, int64_t>, MeasureOutcome> table_;
  int64_t misses_ = 0, answered_ = 0;
};

}  // namespace kiln::tuner
