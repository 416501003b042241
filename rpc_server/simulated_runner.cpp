#include "rpc_server/simulated_runner.h"

#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "contracts/target.h"
#include "deploy/version.h"
#include "rpc_server/measure_pool.h"
#include "rpc_server/runner_agent.h"
#include "rpc_server/runner_service.h"
#include "rpc_server/service_host.h"

namespace kiln::rpc {

struct SimulatedRunner::Impl {
  SimulatedRunnerOptions options;
  std::atomic<int64_t> measured{0};
  std::unique_ptr<RunnerAgent> agent;
  std::unique_ptr<RunnerService> service;
  std::unique_ptr<ServiceHost> host;

  std::optional<MeasureRejection> measure(const std::vector<Candidate> &batch, const kiln::v1::MeasureOptions &options,
                                          const std::function<void(size_t, const kiln::v1::MeasureResult &)> &on_result,
                                          const std::atomic<bool> *cancel) {
    if (auto rejection = check_options(options, MeasureLimits{})) return rejection;
    const int repeat = options.repeat() > 0 ? static_cast<int>(options.repeat()) : 3;
    using Clock = std::chrono::steady_clock;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Clock::time_point done = Clock::now() + this->options.measure_time;
      bool cancelled = cancel && cancel->load();
      while (!cancelled && Clock::now() < done) {
        std::this_thread::sleep_for(std::min<Clock::duration>(done - Clock::now(), std::chrono::milliseconds(5)));
        cancelled = cancel && cancel->load();
      }
      kiln::v1::MeasureResult result;
      if (cancelled) {
        result.set_error(kiln::v1::INFRA);
        result.set_message("cancelled");
      } else {
        const double cost = simulated_cost(batch[i].config.knobs_json());
        for (int r = 0; r < repeat; ++r) result.add_seconds(cost);
        result.set_kiln_version(deploy::version());
        measured.fetch_add(1);
      }
      on_result(i, result);
    }
    return std::nullopt;
  }
};

SimulatedRunner::SimulatedRunner(SimulatedRunnerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->options.target = contracts::canonical_target(impl_->options.target);
  Impl *impl = impl_.get();
  RunnerServiceOptions service_options;
  service_options.token = impl_->options.tracker.token;
  service_options.accept_lease = [impl](const std::string &lease) {
    return impl->agent && impl->agent->holds_lease(lease);
  };
  service_options.runner_id = [impl] { return impl->agent ? impl->agent->runner_id() : std::string(); };
  service_options.measure_batch = [impl](const std::vector<Candidate> &batch, const kiln::v1::MeasureOptions &o,
                                         const std::function<void(size_t, const kiln::v1::MeasureResult &)> &on_result,
                                         const std::atomic<bool> *cancel) {
    return impl->measure(batch, o, on_result, cancel);
  };
  impl_->service = std::make_unique<RunnerService>(
      RunnerIdentity(impl_->options.device_key, impl_->options.target, {"simulated"}), nullptr, service_options);
  ServiceHostOptions host_options;
  host_options.tls = impl_->options.tracker.tls;
  host_options.tls.server_name_override.clear();
  impl_->host = ServiceHost::start(impl_->options.listen, {impl_->service.get()}, host_options);

  RunnerAgentOptions agent_options;
  agent_options.tracker = impl_->options.tracker;
  agent_options.advertise_address = impl_->host->address();
  agent_options.target.set_target(impl_->options.target);
  agent_options.target.set_device_key(impl_->options.device_key);
  RunnerService *service = impl_->service.get();
  agent_options.active_lease = [service] { return service->active_lease(); };
  impl_->agent = std::make_unique<RunnerAgent>(agent_options);
}

SimulatedRunner::~SimulatedRunner() {
  impl_->agent->stop();
  impl_->host->shutdown(std::chrono::seconds(1));
  impl_->host->wait();
  impl_->agent.reset();
}

const std::string &SimulatedRunner::address() const { return impl_->host->address(); }

bool SimulatedRunner::wait_registered(std::chrono::milliseconds timeout) {
  return impl_->agent->wait_registered(timeout);
}

int64_t SimulatedRunner::measured() const { return impl_->measured.load(); }

double SimulatedRunner::simulated_cost(const std::string &knobs_json) {
  const size_t h = std::hash<std::string>()(knobs_json);
  return 1e-3 * (1.0 + static_cast<double>(h % 1000) / 1000.0);
}

}  // namespace kiln::rpc
