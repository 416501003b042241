#pragma once
// The VTA simulator as a measurement back end: a runner started with a `vta -model=NAME` target
// compiles candidates with the VTA code generator and runs them on the behavioural simulator of
// that configuration. Timings are the cycle model's: a kernel's time is its total cycles at the
// configured clock, reported through DeviceBackend::clock(), which is deterministic: one run is a
// measurement (the time evaluator runs a candidate once). Simulator failures are kernel errors
// naming their class (a deadlock, an illegal instruction, an address or buffer overflow); a
// schedule whose tiles do not fit the on-chip buffers fails to compile (DeviceCompileError).
#include <memory>
#include <string>

#include "rpc_server/device_backend.h"

namespace kiln::rpc {

std::unique_ptr<DeviceBackend> make_vta_backend(const std::string &target);

// Compiles and runs the reference design's 4x16x64 GEMM golden test through the VTA back end and
// compares it with an integer reference. Throws UserError saying what went wrong.
void check_vta_target(const std::string &target);

}  // namespace kiln::rpc
