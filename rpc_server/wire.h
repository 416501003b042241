#pragma once
// The operator library's workloads and configs in their wire form (kiln.v1.Workload and
// kiln.v1.Config), as tuners send them to runners.
#include "compiler/autotune/config_space.h"
#include "compiler/ops/registry.h"
#include "kiln/v1/workload.pb.h"

namespace kiln::rpc {

// Template name, canonical arguments and key.
kiln::v1::Workload workload_to_proto(const ops::Workload &workload);
// Knobs as the list [["knob", value], ...] in the space's order, with the index and the space
// fingerprint.
kiln::v1::Config config_to_proto(const autotune::Config &config);

}  // namespace kiln::rpc
