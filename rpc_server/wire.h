#pragma once
// The one conversion between Kiln's vocabulary (contracts::Workload, contracts::Target,
// contracts::ConfigRecord, and autotune::Config through it) and its wire form (kiln.v1.Workload,
// kiln.v1.Target, kiln.v1.Config), as tuners send it to runners and runners to their workers.
#include "compiler/autotune/config_space.h"
#include "contracts/config.h"
#include "contracts/target.h"
#include "contracts/workload.h"
#include "kiln/v1/workload.pb.h"

namespace kiln::rpc {

// Template name, canonical arguments and key.
kiln::v1::Workload workload_to_proto(const contracts::Workload &workload);
// The canonical target string and the device key.
kiln::v1::Target target_to_proto(const contracts::Target &target, const std::string &device_key);

// The canonical knobs text [["knob", value], ...], the index and the space fingerprint.
kiln::v1::Config config_to_proto(const contracts::ConfigRecord &config);
// The record of a wire config; its knobs may be the list or the object {"knob": value, ...}.
// Throws contracts::ConfigRecordError (knobs that are not JSON or not knobs, an index above
// 2^63 - 1).
contracts::ConfigRecord config_from_proto(const kiln::v1::Config &config);
// config_to_proto(config.record()).
kiln::v1::Config config_to_proto(const autotune::Config &config);

}  // namespace kiln::rpc
