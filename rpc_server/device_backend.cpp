#include "rpc_server/device_backend.h"

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/error.h"
#include "deploy/c_abi.h"
#include "deploy/module.h"
#include "deploy/thread_pool.h"
#include "rpc_server/time_evaluator.h"

namespace kiln::rpc {

namespace {

std::string target_kind(const std::string &target) {
  size_t end = target.find_first_of(" \t");
  return target.substr(0, end);
}

// A kernel JIT-compiled by LLVM into this process.
class CpuKernel final : public DeviceKernel {
 public:
  CpuKernel(const ir::LoweredFunc &f, const std::string &target) {
    codegen::LLVMBuildOptions options;
    options.target = target;
    module_ = std::make_unique<codegen::LLVMModule>(f, options);
    name_ = f.name;
    fn_ = module_->function(name_);
  }

  std::function<void()> bind(const std::vector<deploy::Tensor> &args) override {
    auto packed = std::make_shared<std::vector<KilnArg>>(deploy::to_kiln_args(args));
    return [this, packed] {
      const int32_t status = fn_(packed->data(), static_cast<int32_t>(packed->size()));
      if (status != 0) throw module_->module().kernel_error(name_, status);
    };
  }

 private:
  std::unique_ptr<codegen::LLVMModule> module_;
  std::string name_;
  KilnPackedFunc fn_ = nullptr;
};

class CpuBackend final : public DeviceBackend {
 public:
  std::string name() const override { return "cpu"; }
  std::unique_ptr<DeviceKernel> compile(const ir::LoweredFunc &f, const std::string &target) override {
    return std::make_unique<CpuKernel>(f, target);
  }
  deploy::Tensor to_device(const deploy::Tensor &host) override { return host; }
  deploy::Tensor to_host(const deploy::Tensor &device) override { return device; }
  void set_threads(int threads) override {
    if (threads > 0 && threads != threads_) {
      deploy::set_num_threads(threads);
      threads_ = threads;
    }
  }
  void flush_caches(const std::vector<deploy::Tensor> &tensors) override {
    for (const deploy::Tensor &t : tensors) flush_cpu_cache(t.data(), t.nbytes());
  }

 private:
  int threads_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_device_backend(const std::string &target) {
  const std::string kind = target_kind(target);
  if (kind == "llvm") return std::make_unique<CpuBackend>();
  throw UserError("no measurement back end for target kind \"" + kind +
                  "\" (this runner measures \"llvm\" CPU targets)");
}

std::string reference_target(const std::string &target) {
  return target_kind(target) == "llvm" ? target : "llvm -mcpu=native";
}

}  // namespace kiln::rpc
