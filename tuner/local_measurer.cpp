// LocalMeasurer: the runner's measurement pool driven in this process.
#include <chrono>
#include <mutex>

#include "contracts/target.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/wire.h"
#include "tuner/measurer.h"

namespace kiln::tuner {

struct LocalMeasurer::Impl {
  std::string target;  // canonical
  LocalMeasurerOptions options;
  std::atomic<bool> cancel{false};
  std::once_flag device_checked;
  std::string device_error;  // why this host cannot run the target's device ("" where it can)
  std::mutex mutex;  // one measure() at a time
  // Who the batch in flight is measured for (a Share, or the measurer itself), so that a shared
  // measurer's cancel() stops only its own batch.
  std::mutex owner_mutex;
  const void *owner = nullptr;
  // Seconds of every build and run of each position of the batch in progress, from the pool's
  // trace (written on the thread that runs measure()).
  std::vector<double> busy_s;
  // Last, so that it is gone (its workers killed) before what its trace writes to.
  std::unique_ptr<rpc::MeasurePool> pool;
};

LocalMeasurer::LocalMeasurer(const std::string &target, LocalMeasurerOptions options)
    : impl_(std::make_unique<Impl>()) {
  try {
    impl_->target = contracts::canonical_target(target);
  } catch (const contracts::TargetError &e) {
    throw MeasureError(std::string("local measurer: ") + e.what());
  }
  impl_->options = std::move(options);
  rpc::MeasurePoolOptions pool;
  pool.worker_command = impl_->options.worker_command;
  pool.build_workers = impl_->options.build_workers;
  pool.memory_limit_bytes = impl_->options.memory_limit_bytes;
  pool.target = impl_->target;
  pool.runner_id = impl_->options.runner_id;
  Impl *impl = impl_.get();
  pool.trace = [impl](const rpc::MeasureTraceEvent &event) {
    if (event.position < impl->busy_s.size()) impl->busy_s[event.position] += event.end - event.start;
  };
  try {
    impl_->pool = std::make_unique<rpc::MeasurePool>(std::move(pool));
  } catch (const UserError &e) {
    throw MeasureError("local measurer for '" + impl_->target + "': " + e.what());
  }
}

LocalMeasurer::~LocalMeasurer() = default;

void LocalMeasurer::check(const std::string &target, const std::string &) {
  if (!contracts::same_target(target, impl_->target)) {
    throw MeasureError("the local measurer compiles for '" + impl_->target + "', not for '" + target + "'");
  }
  // A device target (a GPU, the VTA simulator) is checked once on this host: a CUDA target without
  // a driver or a GPU, or for another architecture than the GPU's, is refused before the job
  // measures anything, rather than answering every candidate COMPILE_DEVICE.
  std::call_once(impl_->device_checked, [impl = impl_.get()] {
    if (contracts::Target::parse(impl->target).kind() == "llvm") return;
    try {
      rpc::make_device_backend(impl->target);
    } catch (const std::exception &e) {
      impl->device_error = e.what();
    }
  });
  if (!impl_->device_error.empty()) {
    throw MeasureError("the local measurer cannot run '" + impl_->target + "' on this host: " + impl_->device_error);
  }
}

std::vector<MeasureOutcome> LocalMeasurer::measure(const ops::Task &task, const std::string &device_key,
                                                   const std::vector<autotune::Config> &configs) {
  return measure_with(task, device_key, configs, impl_->options.measure, this);
}

std::vector<MeasureOutcome> LocalMeasurer::measure_with(const ops::Task &task, const std::string &device_key,
                                                        const std::vector<autotune::Config> &configs,
                                                        const kiln::v1::MeasureOptions &options, const void *owner) {
  const auto asked = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->options.waited) {
    impl_->options.waited(std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count());
  }
  {
    std::lock_guard<std::mutex> owner_lock(impl_->owner_mutex);
    impl_->owner = owner;
    impl_->cancel.store(false);
  }
  struct Release {
    Impl &impl;
    ~Release() {
      std::lock_guard<std::mutex> owner_lock(impl.owner_mutex);
      impl.owner = nullptr;
    }
  } release{*impl_};
  if (!contracts::same_target(task.target().str(), impl_->target)) {
    throw MeasureError("the local measurer compiles for '" + impl_->target + "', but the task " +
                       task.workload().template_name + " is for '" + task.target().str() + "'");
  }

  std::vector<MeasureOutcome> outcomes(configs.size());
  std::vector<rpc::Candidate> batch;
  std::vector<size_t> position;  // of each candidate among `configs`
  const kiln::v1::Workload workload = rpc::workload_to_proto(task.workload());
  const kiln::v1::Target target = rpc::target_to_proto(task.target().target, device_key);
  for (size_t i = 0; i < configs.size(); ++i) {
    std::optional<kiln::v1::Config> config = wire_config(task, configs[i], &outcomes[i]);
    if (!config) continue;
    rpc::Candidate candidate;
    candidate.config = std::move(*config);
    candidate.workload = workload;
    candidate.target = target;
    batch.push_back(std::move(candidate));
    position.push_back(i);
  }
  if (batch.empty()) return outcomes;

  impl_->busy_s.assign(batch.size(), 0.0);
  std::optional<rpc::MeasureRejection> rejection = impl_->pool->measure(
      batch, options,
      [&](size_t k, const kiln::v1::MeasureResult &result) { outcomes[position[k]] = outcome_from_proto(result); },
      &impl_->cancel);
  if (rejection) throw MeasureError(rejection->message);
  // The pool saw each build and run from start to end: a better wall time than the result's.
  for (size_t k = 0; k < batch.size(); ++k) {
    if (impl_->busy_s[k] > 0) outcomes[position[k]].wall_s = impl_->busy_s[k];
  }
  return outcomes;
}

void LocalMeasurer::cancel() { impl_->cancel.store(true); }

class LocalMeasurer::Share : public Measurer {
 public:
  Share(std::shared_ptr<LocalMeasurer> local, kiln::v1::MeasureOptions options)
      : local_(std::move(local)), options_(std::move(options)) {}
  std::string name() const override { return "local"; }
  void check(const std::string &target, const std::string &device_key) override { local_->check(target, device_key); }
  std::vector<MeasureOutcome> measure(const ops::Task &task, const std::string &device_key,
                                      const std::vector<autotune::Config> &configs) override {
    return local_->measure_with(task, device_key, configs, options_, this);
  }
  void cancel() override {
    Impl &impl = *local_->impl_;
    std::lock_guard<std::mutex> lock(impl.owner_mutex);
    if (impl.owner == this) impl.cancel.store(true);
  }

 private:
  std::shared_ptr<LocalMeasurer> local_;
  kiln::v1::MeasureOptions options_;
};

std::unique_ptr<Measurer> LocalMeasurer::share(std::shared_ptr<LocalMeasurer> local, kiln::v1::MeasureOptions options) {
  KILN_CHECK(local != nullptr, "LocalMeasurer::share needs a measurer");
  return std::make_unique<Share>(std::move(local), std::move(options));
}

}  // namespace kiln::tuner
