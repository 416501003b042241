#include "rpc_server/wire.h"

#include "contracts/json.h"

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

kiln::v1::Config config_to_proto(const autotune::Config &config) {
  kiln::v1::Config out;
  out.set_knobs_json(contracts::Json::parse(config.to_json()).at("knobs").dump());
  out.set_index(static_cast<uint64_t>(config.index()));
  out.set_space_fingerprint(config.fingerprint());
  return out;
}

}  // namespace kiln::rpc
