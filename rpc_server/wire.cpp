#include "rpc_server/wire.h"

#include <cstdint>
#include <limits>
#include <string>

namespace kiln::rpc {

kiln::v1::Workload workload_to_proto(const contracts::Workload &workload) {
  kiln::v1::Workload out;
  out.set_template_name(workload.template_name);
  out.set_args_json(workload.args_json);
  out.set_key(workload.key);
  return out;
}

kiln::v1::Target target_to_proto(const contracts::Target &target, const std::string &device_key) {
  kiln::v1::Target out;
  out.set_target(target.str());
  out.set_device_key(device_key);
  return out;
}

kiln::v1::Config config_to_proto(const contracts::ConfigRecord &config) {
  kiln::v1::Config out;
  out.set_knobs_json(config.knobs_json());
  out.set_index(static_cast<uint64_t>(config.index));
  out.set_space_fingerprint(config.space);
  return out;
}

contracts::ConfigRecord config_from_proto(const kiln::v1::Config &config) {
  if (config.index() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw contracts::ConfigRecordError("config index " + std::to_string(config.index()) + " is above 2^63 - 1");
  }
  return contracts::ConfigRecord::parse(static_cast<int64_t>(config.index()), config.space_fingerprint(),
                                        config.knobs_json());
}

kiln::v1::Config config_to_proto(const autotune::Config &config) { return config_to_proto(config.record()); }

}  // namespace kiln::rpc
