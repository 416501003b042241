#pragma once
// DeviceBackend: what a measurement worker needs from the device a runner serves. The worker
// does everything device-independent (parsing the workload and config, lowering, random inputs,
// the reference, the time evaluator, error classes); a back end compiles a lowered function for
// its target, moves tensors between the host and the device, runs a compiled kernel to
// completion, and flushes caches before a timing. The CPU back end (LLVM, in the worker's own
// process) is the one implemented; a GPU or accelerator runner adds a back end and a case in
// make_device_backend(), and the rest of the farm stays as it is.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "deploy/tensor.h"

namespace kiln::rpc {

// The device's compiler rejected a candidate (device code, not host code, failed to compile); a
// measurement records it as COMPILE_DEVICE.
class DeviceCompileError : public UserError {
 public:
  using UserError::UserError;
};

// A candidate compiled for a device.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  // A call of the kernel on `args` (device tensors: inputs then outputs, as in the lowered
  // function's signature) that returns once the device has finished. The callable throws
  // deploy::KernelError when the kernel reports a failure. `args` must outlive the callable.
  virtual std::function<void()> bind(const std::vector<deploy::Tensor> &args) = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // "cpu", "cuda", ...
  virtual std::string name() const = 0;
  // Compiles `f` for `target`. Throws kiln::UserError (or another std::exception) with the
  // compiler's message when it cannot.
  virtual std::unique_ptr<DeviceKernel> compile(const ir::LoweredFunc &f, const std::string &target) = 0;
  // A device tensor holding a copy of `host` (the same tensor on a CPU).
  virtual deploy::Tensor to_device(const deploy::Tensor &host) = 0;
  // A host tensor holding a copy of `device` (the same tensor on a CPU).
  virtual deploy::Tensor to_host(const deploy::Tensor &device) = 0;
  // Threads a kernel may use (CPU); ignored by devices without the notion.
  virtual void set_threads(int threads) = 0;
  // Evicts `tensors` from the device's caches before a timed repeat.
  virtual void flush_caches(const std::vector<deploy::Tensor> &tensors) = 0;
  // The clock timings are read from, in seconds: empty for the host's steady clock; a simulated
  // device returns its modelled time.
  virtual std::function<double()> clock() { return {}; }
};

// The back end for a target string: "llvm ..." -> the CPU back end, "vta ..." -> the VTA
// simulator (vta_backend.h). Throws kiln::UserError naming
// the target kind when no back end serves it.
std::unique_ptr<DeviceBackend> make_device_backend(const std::string &target);

// Checks that this host can run code for `target`: compiles a small vectorized kernel with the
// target's back end and runs it on the device, comparing its output. The kernel runs in a child
// process, so that code the host cannot execute (an illegal instruction) ends the child, not the
// caller; call it before starting threads. Throws kiln::UserError saying why the target cannot run
// here.
void check_target_runs(const std::string &target);

// The target the reference outputs are computed with: the host CPU (the reference is an
// unscheduled lowering, run wherever the worker runs), `target` itself when it is a CPU target.
std::string reference_target(const std::string &target);

}  // namespace kiln::rpc
