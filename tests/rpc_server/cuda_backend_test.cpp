// The CUDA measurement back end. Without a driver (CI): the runner refuses a CUDA target with a
// clear error. With a driver and a GPU: kernels run on the device and match the host, the device
// is described, the event clock and the L2 flush work, and a planted illegal address is a kernel
// error that marks the context lost. The device tests skip, saying why, on a host without a GPU.
#include "rpc_server/cuda_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "compiler/ir/error.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "contracts/target.h"
#include "deploy/module.h"
#include "rpc_server/device_backend.h"
#include "rpc_server/time_evaluator.h"

namespace kiln::rpc {
namespace {

const char *const kTarget90 = "cuda -arch=sm_90";

bool driver_present() {
  void *handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

TEST(CudaBackendTest, AMissingDriverLibraryIsNamed) {
  try {
    load_cuda_driver("libkiln-no-such-driver.so.1");
    ADD_FAILURE() << "a driver was loaded from a library that does not exist";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), "no CUDA driver on this host: libkiln-no-such-driver.so.1 not found");
  }
}

// The runner's start-up on a host without a driver: make_device_backend and the target check
// refuse the CUDA target with the driver's absence, not a crash.
TEST(CudaBackendTest, TheRunnerRefusesACudaTargetWithoutADriver) {
  if (driver_present()) GTEST_SKIP() << "this host has a CUDA driver (libcuda.so.1); the refusal is not exercised";
  try {
    make_device_backend(kTarget90);
    ADD_FAILURE() << "a CUDA back end was made without a driver";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), "no CUDA driver on this host: libcuda.so.1 not found");
  }
  try {
    check_target_runs(kTarget90);
    ADD_FAILURE() << "the CUDA target passed the check without a driver";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()),
              "target \"cuda -arch=sm_90\" cannot run on this host: no CUDA driver on this host: libcuda.so.1 not "
              "found");
  }
  EXPECT_EQ(reference_target(kTarget90), "llvm -mcpu=native");
}

// The CUDA driver reserves address space for the GPU's memory and cannot initialise under the
// pool's RLIMIT_AS of a few GB (on an H200, every worker's cuInit failed with
// CUDA_ERROR_OUT_OF_MEMORY): a CUDA target's workers run without it, a CPU target's keep it.
TEST(CudaBackendTest, ACudaTargetsWorkersRunWithoutTheAddressSpaceLimit) {
  EXPECT_FALSE(worker_address_space_limited("cuda -arch=sm_90"));
  EXPECT_FALSE(worker_address_space_limited("cuda -arch=sm_80 -max_threads_per_block=1024"));
  EXPECT_TRUE(worker_address_space_limited("llvm -mcpu=znver4"));
  EXPECT_TRUE(worker_address_space_limited("vta"));
}

TEST(CudaBackendTest, AMalformedCudaTargetIsATargetErrorBeforeTheDriverIsLoaded) {
  EXPECT_THROW(make_cuda_backend("cuda", "libkiln-no-such-driver.so.1"), contracts::TargetError);
  EXPECT_THROW(make_cuda_backend("cuda -arch=gfx90a", "libkiln-no-such-driver.so.1"), contracts::TargetError);
}

TEST(CudaBackendTest, DriverErrorsAreNamedAndTheContextKillingOnesAreSticky) {
  EXPECT_EQ(cuda_error_name(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(cuda_error_name(719), "CUDA_ERROR_LAUNCH_FAILED");
  EXPECT_EQ(cuda_error_name(12345), "CUDA error 12345");
  for (int sticky : {700, 702, 714, 715, 716, 718, 719}) EXPECT_TRUE(cuda_error_is_sticky(sticky)) << sticky;
  for (int recoverable : {0, 1, 2, 100, 701, 999}) EXPECT_FALSE(cuda_error_is_sticky(recoverable)) << recoverable;
}

// --- on a GPU ---

// The back end for the GPU of this host, or null with the reason in *why.
std::unique_ptr<DeviceBackend> gpu_backend(std::string *target, std::string *why) {
  if (!driver_present()) {
    *why = "no CUDA driver on this host (libcuda.so.1)";
    return nullptr;
  }
  if (!codegen::nvrtc_available()) {
    *why = "Kiln was built without NVRTC";
    return nullptr;
  }
  try {
    const CudaDeviceInfo info = cuda_device_info(*load_cuda_driver());
    *target = "cuda -arch=sm_" + std::to_string(info.compute_capability);
    return make_device_backend(*target);
  } catch (const UserError &e) {
    *why = std::string("no usable CUDA device: ") + e.what();
    return nullptr;
  }
}

#define KILN_REQUIRE_GPU(backend, target)           \
  std::string target, why_no_gpu;                   \
  auto backend = gpu_backend(&target, &why_no_gpu); \
  if (!backend) GTEST_SKIP() << why_no_gpu

// out[i] = a[i] * 2 + b[i] over blocks of 128 threads, n not a multiple of the block.
ir::LoweredFunc axpy(int n, int index_scale = 1) {
  te::Tensor a = te::placeholder({ir::Expr(n)}, ir::Float(32), "a");
  te::Tensor b = te::placeholder({ir::Expr(n)}, ir::Float(32), "b");
  te::Tensor out = te::compute(
      {ir::Expr(n)}, [&](ir::Var i) { return a(i * index_scale) * 2.0f + b(i); }, "out");
  auto s = te::create_schedule({out});
  te::IterVar bx, tx;
  (*s)[out].split((*s)[out].axis(0), ir::Expr(128), &bx, &tx);
  (*s)[out].bind(bx, "blockIdx.x");
  (*s)[out].bind(tx, "threadIdx.x");
  return lower::lower(*s, {a, b, out}, "axpy");
}

std::vector<deploy::Tensor> axpy_inputs(int n) {
  std::vector<deploy::Tensor> host;
  for (int t = 0; t < 3; ++t) host.push_back(deploy::Tensor::empty({n}, deploy::DType::of<float>()));
  for (int i = 0; i < n; ++i) {
    host[0].data_as<float>()[i] = static_cast<float>(i) * 0.5f;
    host[1].data_as<float>()[i] = static_cast<float>(n - i);
  }
  return host;
}

TEST(CudaBackendDeviceTest, TheDeviceIsDescribed) {
  KILN_REQUIRE_GPU(backend, target);
  const CudaDeviceInfo info = cuda_device_info(*load_cuda_driver());
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.compute_capability, 70);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.memory_bytes, int64_t{1} << 30);
  EXPECT_GT(info.core_clock_khz, 0);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_EQ(backend->name(), "cuda");
}

TEST(CudaBackendDeviceTest, AKernelRunsOnTheDeviceAndMatchesTheHost) {
  KILN_REQUIRE_GPU(backend, target);
  const int n = 1000;
  std::unique_ptr<DeviceKernel> kernel = backend->compile(axpy(n), target);
  std::vector<deploy::Tensor> host = axpy_inputs(n), device;
  for (const auto &t : host) device.push_back(backend->to_device(t));
  backend->fill_bytes(device[2], 0xff);
  kernel->bind(device)();
  const deploy::Tensor got = backend->to_host(device[2]);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(got.data_as<float>()[i], host[0].data_as<float>()[i] * 2.0f + host[1].data_as<float>()[i]) << i;
  }
  EXPECT_FALSE(backend->lost());
  EXPECT_NO_THROW(check_target_runs(target));
}

// The time evaluator on the event clock, with the L2 flush before every repeat.
TEST(CudaBackendDeviceTest, TheEventClockTimesQueuedLaunches) {
  KILN_REQUIRE_GPU(backend, target);
  const int n = 1 << 20;
  std::unique_ptr<DeviceKernel> kernel = backend->compile(axpy(n), target);
  std::vector<deploy::Tensor> device;
  for (const auto &t : axpy_inputs(n)) device.push_back(backend->to_device(t));
  TimeEvaluatorOptions options;
  options.number = 2;
  options.repeat = 3;
  options.min_repeat_ms = 5;
  options.clock = backend->clock();
  int flushes = 0;
  options.before_repeat = [&] {
    backend->flush_caches(device);
    ++flushes;
  };
  const Timing t = time_evaluate(kernel->bind(device), options);
  ASSERT_EQ(t.seconds.size(), 3u);
  for (double s : t.seconds) EXPECT_GT(s, 0.0);
  EXPECT_GT(t.number, 2u);  // a launch of 4 MB takes far less than 5 ms
  EXPECT_GE(flushes, 3);
}

// A planted fault: reads far past the input are an illegal address, reported as a kernel error
// with the driver's code, and the back end is lost (its worker is replaced).
TEST(CudaBackendDeviceTest, AnIllegalAddressIsAKernelErrorAndLosesTheContext) {
  KILN_REQUIRE_GPU(backend, target);
  const int n = 256;
  std::unique_ptr<DeviceKernel> kernel = backend->compile(axpy(n, 1 << 22), target);
  std::vector<deploy::Tensor> device;
  for (const auto &t : axpy_inputs(n)) device.push_back(backend->to_device(t));
  try {
    kernel->bind(device)();
    backend->to_host(device[2]);
    ADD_FAILURE() << "reads 16 GB past the input ran";
  } catch (const deploy::KernelError &e) {
    // Which of the two the driver reports depends on where the address falls: on an H200 (141 GB)
    // 16 GB past the input lies outside the global address space.
    if (e.code() == 700) {
      EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << e.what();
    } else {
      EXPECT_EQ(e.code(), 717) << e.what();
      EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_INVALID_ADDRESS_SPACE"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(backend->lost());
}

}  // namespace
}  // namespace kiln::rpc
