#pragma once
// The one conversion between Kiln's vocabulary (contracts::Workload, contracts::Target,
// autotune::Config) and its wire form (kiln.v1.Workload, kiln.v1.Target, kiln.v1.Config), as
// tuners send it to runners and runners to their workers.
#include "compiler/autotune/config_space.h"
#include "contracts/target.h"
#include "contracts/workload.h"
#include "kiln/v1/workload.pb.h"

namespace kiln::rpc {

// Template name, canonical arguments and key.
kiln::v1::Workload workload_to_proto(const contracts::Workload &workload);
// The canonical target string and the device key.
kiln::v1::Target target_to_proto(const contracts::Target &target, const std::string &device_key);

// Knobs as the list [["knob", value], ...] in the space's order, with the index and the space
// fingerprint.
kiln::v1::Config config_to_proto(const autotune::Config &config);

}  // namespace kiln::rpc
