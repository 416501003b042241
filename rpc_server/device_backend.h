#pragma once
// DeviceBackend: what a measurement worker needs from the device a runner serves. The worker
// does everything device-independent (parsing the workload and config, lowering, random inputs,
// the reference, the time evaluator, error classes); a back end compiles a lowered function for
// its target, moves tensors between the host and the device, runs a compiled kernel to
// completion, and flushes caches before a timing. The CPU back end (LLVM, in the worker's own
// process) and the CUDA one (cuda_backend.h) are implemented; another device adds a back end and a
// case in make_device_backend(), and the rest of the farm stays as it is.
#include <cstdint>
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
  // function's signature) that returns once the device has finished, or, on a back end with a
  // clock(), once the call is queued (the clock and to_host() then wait for it). The callable, or
  // the wait, throws deploy::KernelError when the kernel reports a failure. `args` must outlive
  // the callable.
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
  // Sets every byte of the device tensor `device` to `byte`.
  virtual void fill_bytes(deploy::Tensor &device, uint8_t byte);
  // The device's clock for the time evaluator (seconds; each reading waits for the work queued
  // before it), or empty to time on the host's steady clock.
  virtual std::function<double()> clock() { return {}; }
  // Whether clock() is a model that reads the same time for every call of a kernel on the same
  // inputs (a simulator's cycle count): the time evaluator then times one call instead of repeats.
  virtual bool deterministic_clock() const { return false; }
  // Whether a failure has left the device unusable by this process (a GPU context after an
  // illegal address): the worker then ends once it has replied, and a fresh one takes over.
  virtual bool lost() const { return false; }
};

// The back end for a target string: "llvm ..." -> the CPU back end, "cuda ..." -> the GPU back
// end (cuda_backend.h), "vta ..." -> the VTA simulator (vta_backend.h). Throws kiln::UserError naming the target kind
// when no back end serves it, and the CUDA back end's error when the host has no CUDA driver or device.
std::unique_ptr<DeviceBackend> make_device_backend(const std::string &target);

// Checks that this host can run code for `target`: compiles a small vectorized kernel with the
// target's back end and runs it on the device, comparing its output. The kernel runs in a child
// process, so that code the host cannot execute (an illegal instruction) ends the child, not the
// caller; call it before starting threads. A CUDA target in a process that has already initialised
// the CUDA driver is checked in the process itself: a forked child cannot use the parent's driver
// (its cuInit fails). Throws kiln::UserError saying why the target cannot run here.
void check_target_runs(const std::string &target);

// Whether a measurement worker for `target` runs under the pool's address-space limit (RLIMIT_AS):
// not one for a CUDA target, whose driver reserves virtual address space for the GPU's memory and
// cannot initialise under a limit of a few GB (cuInit fails with CUDA_ERROR_OUT_OF_MEMORY).
bool worker_address_space_limited(const std::string &target);

// The target the reference outputs are computed with: the host CPU (the reference is an
// unscheduled lowering, run wherever the worker runs), `target` itself when it is a CPU target.
std::string reference_target(const std::string &target);

}  // namespace kiln::rpc
