#pragma once
// The CUDA measurement back end: a DeviceBackend (device_backend.h) that runs candidates on an
// NVIDIA GPU through the CUDA driver API. The driver library is loaded at run time
// (dlopen("libcuda.so.1")), so a runner binary built with it starts on a host with no driver and
// refuses a CUDA target there with a clear error.
//
// A candidate is compiled to PTX by the CUDA code generator (compiler/codegen/cuda), loaded with
// cuModuleLoadData and launched on the default stream with the launch dimensions of its bound
// loops. Device tensors are allocations of the back end; the deploy::Tensor that stands for one
// holds its address and is only meaningful to the back end that made it. Launches are queued:
// the back end's clock() (CUDA events) and to_host() wait for the queued work, and report a
// kernel's failure there as deploy::KernelError with the driver's error code.
//
// A fault that leaves the context unusable (an illegal address, a misaligned access, an illegal
// instruction, a launch failure) marks the back end lost(): the worker then ends after replying,
// and the runner's pool starts a fresh worker with a fresh context.
#include <cstdint>
#include <memory>
#include <string>

#include "rpc_server/device_backend.h"

namespace kiln::rpc {

// What the runner reports about its GPU.
struct CudaDeviceInfo {
  std::string name;            // "NVIDIA H100 80GB HBM3"
  int compute_capability = 0;  // 90 for sm_90
  int sm_count = 0;            // streaming multiprocessors
  int64_t memory_bytes = 0;    // global memory
  int core_clock_khz = 0;      // the SM clock
  int memory_clock_khz = 0;    // the peak memory clock
  int memory_bus_bits = 0;     // the global memory bus width
  int64_t l2_bytes = 0;        // the L2 cache
  int driver_version = 0;      // 13000 for CUDA 13.0
};

// The CUDA driver as loaded from `library` (the system's "libcuda.so.1" by default). Throws
// kiln::UserError "no CUDA driver on this host: <library> not found" when it cannot be loaded,
// and a UserError naming the driver's error when it has no device or cannot initialise.
class CudaDriver;
std::shared_ptr<CudaDriver> load_cuda_driver(const std::string &library = "libcuda.so.1");

// Whether this process has initialised the CUDA driver (a load_cuda_driver call succeeded): a
// child forked from it from then on cannot use the driver.
bool cuda_driver_initialized();

// Device `ordinal` of the driver: name, compute capability, SMs, memory, clocks.
CudaDeviceInfo cuda_device_info(CudaDriver &driver, int ordinal = 0);

// The back end for `target` ("cuda -arch=sm_XX") on device 0 of the system's driver. Throws
// kiln::UserError without a driver or device, and when the device's compute capability is not
// the target's.
std::unique_ptr<DeviceBackend> make_cuda_backend(const std::string &target,
                                                 const std::string &library = "libcuda.so.1");

// The driver's name for a CUresult ("CUDA_ERROR_ILLEGAL_ADDRESS"), or the number when unknown.
std::string cuda_error_name(int code);

// Whether a CUresult leaves the context unusable for every later call (a sticky error).
bool cuda_error_is_sticky(int code);

}  // namespace kiln::rpc
