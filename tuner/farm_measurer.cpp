// FarmMeasurer: the device farm through rpc::FarmClient. cancel() cancels the farm call in flight
// (the Acquire or the runner's stream) and releases the lease, so that a paused job stops at once
// instead of after its batch; what was not measured comes back INFRA "cancelled", which the tuner
// does not record.
#include "contracts/target.h"
#include "rpc_server/farm_client.h"
#include "rpc_server/wire.h"
#include "tuner/measurer.h"

namespace kiln::tuner {

struct FarmMeasurer::Impl {
  Impl(const rpc::FarmClientOptions &farm, kiln::v1::MeasureOptions measure)
      : farm(farm), client(farm), options(std::move(measure)) {}
  rpc::FarmClientOptions farm;
  rpc::FarmClient client;
  kiln::v1::MeasureOptions options;
};

FarmMeasurer::FarmMeasurer(const rpc::FarmClientOptions &farm, kiln::v1::MeasureOptions options)
    : impl_(std::make_unique<Impl>(farm, std::move(options))) {}

FarmMeasurer::~FarmMeasurer() = default;

std::vector<MeasureOutcome> FarmMeasurer::measure(const ops::Task &task, const std::string &device_key,
                                                  const std::vector<autotune::Config> &configs) {
  try {
    contracts::check_device_key(device_key);
  } catch (const contracts::TargetError &e) {
    throw MeasureError(std::string("farm measurer: ") + e.what());
  }

  std::vector<MeasureOutcome> outcomes(configs.size());
  std::vector<kiln::v1::Config> wire;
  std::vector<size_t> position;  // of each wire config among `configs`
  for (size_t i = 0; i < configs.size(); ++i) {
    std::optional<kiln::v1::Config> config = wire_config(task, configs[i], &outcomes[i]);
    if (!config) continue;
    wire.push_back(std::move(*config));
    position.push_back(i);
  }
  if (wire.empty()) return outcomes;

  std::vector<kiln::v1::MeasureResult> results;
  try {
    results = impl_->client.measure(rpc::workload_to_proto(task.workload()),
                                    rpc::target_to_proto(task.target().target, device_key), wire, impl_->options);
  } catch (const rpc::FarmError &e) {
    const std::string tracker = impl_->farm.tracker.address;
    switch (e.code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        throw MeasureError("no runner for device key '" + device_key + "' became free within " +
                           std::to_string(impl_->farm.acquire_wait.count()) +
                           " ms (is one registered with the tracker at " + tracker + "?): " + e.what());
      case grpc::StatusCode::FAILED_PRECONDITION:
        throw MeasureError("the farm at " + tracker + " has no runner for device key '" + device_key +
                           "': " + e.what());
      case grpc::StatusCode::UNAVAILABLE:
        throw MeasureError("the farm at " + tracker + " cannot be reached: " + e.what());
      default:
        throw MeasureError("the farm refused to measure " + task.workload().template_name + " on device key '" +
                           device_key + "': " + e.what());
    }
  }
  KILN_CHECK(results.size() == wire.size(), "the farm returned ", results.size(), " results for ", wire.size(),
             " configs");
  for (size_t k = 0; k < results.size(); ++k) outcomes[position[k]] = outcome_from_proto(results[k]);
  return outcomes;
}

void FarmMeasurer::cancel() { impl_->client.cancel(); }

void FarmMeasurer::check(const std::string &, const std::string &device_key) {
  kiln::v1::SummaryReply summary;
  try {
    summary = impl_->client.tracker().summary();
  } catch (const UserError &e) {
    throw MeasureError(std::string("the farm's tracker cannot be asked for runners: ") + e.what());
  }
  std::string keys;
  for (const auto &device : summary.devices()) {
    if (device.device_key() == device_key) return;
    keys += (keys.empty() ? "" : ", ") + device.device_key();
  }
  throw MeasureError("the farm has no runner for device key '" + device_key + "'" +
                     (keys.empty() ? std::string(" (no runner is registered)") : " (it has: " + keys + ")"));
}

}  // namespace kiln::tuner
