#include "rpc_server/device_backend.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/lower/lower.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "compiler/ir/error.h"
#include "deploy/c_abi.h"
#include "deploy/module.h"
#include "deploy/thread_pool.h"
#include "rpc_server/cuda_backend.h"
#include "rpc_server/time_evaluator.h"
#include "rpc_server/vta_backend.h"

namespace kiln::rpc {

namespace {

// out = a * 2 + b over 1024 floats, split by 16 with the inner loop vectorized. Throws with what
// went wrong.
void run_test_kernel(const std::string &target) {
  constexpr int kLength = 1024;
  te::Tensor a = te::placeholder({ir::Expr(kLength)}, ir::Float(32), "a");
  te::Tensor b = te::placeholder({ir::Expr(kLength)}, ir::Float(32), "b");
  te::Tensor out = te::compute(
      {ir::Expr(kLength)}, [a, b](ir::Var i) { return a(i) * 2.0f + b(i); }, "out");
  auto schedule = te::create_schedule({out});
  te::IterVar outer, inner;
  (*schedule)[out].split((*schedule)[out].axis(0), ir::Expr(16), &outer, &inner);
  (*schedule)[out].vectorize(inner);
  const ir::LoweredFunc f = lower::lower(*schedule, {a, b, out}, "kiln_target_check");

  std::unique_ptr<DeviceBackend> backend = make_device_backend(target);
  std::unique_ptr<DeviceKernel> kernel = backend->compile(f, target);
  std::vector<deploy::Tensor> host;
  for (int t = 0; t < 3; ++t) host.push_back(deploy::Tensor::empty({kLength}, deploy::DType::of<float>()));
  for (int i = 0; i < kLength; ++i) {
    host[0].data_as<float>()[i] = static_cast<float>(i);
    host[1].data_as<float>()[i] = static_cast<float>(kLength - i);
    host[2].data_as<float>()[i] = -1.0f;
  }
  std::vector<deploy::Tensor> device;
  for (const auto &t : host) device.push_back(backend->to_device(t));
  kernel->bind(device)();
  const deploy::Tensor result = backend->to_host(device[2]);
  for (int i = 0; i < kLength; ++i) {
    const float want = static_cast<float>(i) * 2.0f + static_cast<float>(kLength - i);
    if (result.data_as<float>()[i] != want) {
      throw UserError("a test kernel computed " + std::to_string(result.data_as<float>()[i]) + " instead of " +
                      std::to_string(want) + " at index " + std::to_string(i));
    }
  }
}

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

void DeviceBackend::fill_bytes(deploy::Tensor &device, uint8_t byte) {
  deploy::Tensor host = to_host(device);
  std::memset(host.data(), byte, host.nbytes());
  device = to_device(host);
}

std::unique_ptr<DeviceBackend> make_device_backend(const std::string &target) {
  const std::string kind = target_kind(target);
  if (kind == "llvm") return std::make_unique<CpuBackend>();
  if (kind == "vta") return make_vta_backend(target);
  if (kind == "cuda") return make_cuda_backend(target);
  throw UserError("no measurement back end for target kind \"" + kind +
                  "\" (this runner measures \"llvm\" CPU targets, \"cuda\" GPU targets and \"vta\" simulators)");
}

bool worker_address_space_limited(const std::string &target) { return target_kind(target) != "cuda"; }

void check_target_runs(const std::string &target) {
  const std::string what = "target \"" + target + "\" cannot run on this host: ";
  if (target_kind(target) == "cuda" && cuda_driver_initialized()) {
    try {
      run_test_kernel(target);
    } catch (const std::exception &e) {
      throw UserError(what + e.what());
    }
    return;
  }
  int channel[2];
  if (::pipe(channel) != 0) throw UserError(std::string("cannot check the target: pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(channel[0]);
    ::close(channel[1]);
    throw UserError(std::string("cannot check the target: fork: ") + std::strerror(errno));
  }
  if (child == 0) {
    ::close(channel[0]);
    int status = 0;
    std::string message;
    try {
      if (target_kind(target) == "vta") {
        check_vta_target(target);
      } else {
        run_test_kernel(target);
      }
    } catch (const std::exception &e) {
      message = e.what();
      status = 1;
    }
    for (size_t done = 0; done < message.size();) {
      const ssize_t n = ::write(channel[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(status);
  }
  ::close(channel[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(channel[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    message.append(buffer, static_cast<size_t>(n));
  }
  ::close(channel[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    throw UserError(what + "a test kernel compiled for it died with " + strsignal(WTERMSIG(status)) +
                    (WTERMSIG(status) == SIGILL ? " (the host lacks an instruction set the target enables)" : ""));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw UserError(what + (message.empty() ? "a test kernel compiled for it failed" : message));
  }
}

std::string reference_target(const std::string &target) {
  return target_kind(target) == "llvm" ? target : "llvm -mcpu=native";
}

}  // namespace kiln::rpc
