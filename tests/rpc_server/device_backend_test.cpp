// The measurement workers' device back ends.
#include "rpc_server/device_backend.h"

#include <gtest/gtest.h>

#include "compiler/ir/error.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "deploy/module.h"

namespace kiln::rpc {
namespace {

TEST(DeviceBackendTest, CpuBackendCompilesAndRunsAKernelOnDeviceTensors) {
  auto backend = make_device_backend("llvm -mcpu=native");
  EXPECT_EQ(backend->name(), "cpu");
  te::Tensor a = te::placeholder({8}, ir::Float(32), "a");
  te::Tensor b = te::compute(
      {8}, [&](ir::Var i) { return a(i) * ir::Expr(2.0f) + ir::Expr(1.0f); }, "b");
  auto schedule = te::create_schedule({b});
  ir::LoweredFunc f = lower::lower(*schedule, {a, b}, "twice_plus_one");
  std::unique_ptr<DeviceKernel> kernel = backend->compile(f, "llvm -mcpu=native");

  deploy::Tensor host_in = deploy::Tensor::empty({8}, deploy::DType::of<float>());
  for (int i = 0; i < 8; ++i) host_in.data_as<float>()[i] = static_cast<float>(i);
  std::vector<deploy::Tensor> args = {backend->to_device(host_in),
                                      backend->to_device(deploy::Tensor::empty({8}, deploy::DType::of<float>()))};
  std::function<void()> call = kernel->bind(args);
  call();
  backend->flush_caches(args);
  deploy::Tensor out = backend->to_host(args[1]);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out.data_as<float>()[i], 2.0f * i + 1.0f);
  EXPECT_EQ(reference_target("llvm -mcpu=native"), "llvm -mcpu=native");
}

TEST(DeviceBackendTest, CpuKernelReportsABadArgumentWithTheSignature) {
  auto backend = make_device_backend("llvm -mcpu=native");
  te::Tensor a = te::placeholder({8}, ir::Float(32), "a");
  te::Tensor b = te::compute(
      {8}, [&](ir::Var i) { return a(i) + ir::Expr(1.0f); }, "b");
  auto schedule = te::create_schedule({b});
  ir::LoweredFunc f = lower::lower(*schedule, {a, b}, "plus_one");
  std::unique_ptr<DeviceKernel> kernel = backend->compile(f, "llvm -mcpu=native");
  std::vector<deploy::Tensor> args = {deploy::Tensor::empty({8}, deploy::DType::of<float>()),
                                      deploy::Tensor::empty({8}, deploy::DType::of<int32_t>())};
  std::function<void()> call = kernel->bind(args);
  try {
    call();
    ADD_FAILURE() << "the kernel ran with an int32 output";
  } catch (const deploy::KernelError &e) {
    EXPECT_EQ(e.code(), kKilnErrorArgument);
    EXPECT_EQ(std::string(e.what()),
              "plus_one: argument 2 (b): expected dtype float32; signature plus_one(a: float32[8], b: float32[8])");
  }
}

TEST(DeviceBackendTest, ATargetWithoutABackEndIsAClearError) {
  try {
    make_device_backend("opencl -device=mali");
    ADD_FAILURE() << "an OpenCL back end was made";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()),
              "no measurement back end for target kind \"opencl\" (this runner measures \"llvm\" CPU targets, "
              "\"cuda\" GPU targets and \"vta\" simulators)");
  }
  EXPECT_EQ(reference_target("cuda -arch=sm_90"), "llvm -mcpu=native");
}

// The runner's start-up check: the host's own target runs; another architecture's, a target no
// back end serves, are errors saying so.
TEST(DeviceBackendTest, TheTargetCheckRunsAKernelAndRefusesWhatTheHostCannotRun) {
  EXPECT_NO_THROW(check_target_runs("llvm -mcpu=native"));
  EXPECT_NO_THROW(check_target_runs("llvm"));
#if defined(__aarch64__)
  const std::string cross = "llvm -mtriple=x86_64-linux-gnu";
#else
  const std::string cross = "llvm -mtriple=aarch64-linux-gnu";
#endif
  for (const std::string &target : {cross, std::string("opencl -device=mali")}) {
    try {
      check_target_runs(target);
      ADD_FAILURE() << target << " passed the check";
    } catch (const UserError &e) {
      EXPECT_NE(std::string(e.what()).find("target \"" + target + "\" cannot run on this host: "), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln::rpc
