#include "rpc_server/wire.h"

#include "contracts/json.h"

namespace kiln::rpc {

kiln::v1::Workload workload_to_proto(const ops::Workload &workload) {
  kiln::v1::Workload out;
  out.set_template_name(workload.name);
  out.set_args_json(workload.canonical_args());
  out.set_key(workload.key());
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
