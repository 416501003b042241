#include "rpc_server/vta_backend.h"

#include <algorithm>
#include <memory>

#include "compiler/codegen/vta/vta_codegen.h"
#include "compiler/ops/registry.h"
#include "deploy/module.h"
#include "deploy/vta/runtime.h"
#include "deploy/vta/simulator.h"

namespace kiln::rpc {

namespace {

// Kernel error codes of the simulator's error classes.
enum VtaStatus : int32_t {
  kVtaDeadlock = 1,
  kVtaIllegalInstruction = 2,
  kVtaAddress = 3,
  kVtaProtocol = 4,
  kVtaStepLimit = 5,
  kVtaRuntime = 6,
  kVtaOther = 7,
};

[[noreturn]] void rethrow_as_kernel_error(const kiln::vta::VtaError &e) {
  auto is = [&](auto *type) { return dynamic_cast<decltype(type)>(&e) != nullptr; };
  const char *what = "VtaError";
  int32_t code = kVtaOther;
  if (is(static_cast<const kiln::vta::VtaDeadlockError *>(nullptr))) {
    what = "VtaDeadlockError", code = kVtaDeadlock;
  } else if (is(static_cast<const kiln::vta::VtaDecodeError *>(nullptr))) {
    what = "VtaDecodeError (illegal instruction)", code = kVtaIllegalInstruction;
  } else if (is(static_cast<const kiln::vta::VtaAddressError *>(nullptr))) {
    what = "VtaAddressError", code = kVtaAddress;
  } else if (is(static_cast<const kiln::vta::VtaProtocolError *>(nullptr))) {
    what = "VtaProtocolError", code = kVtaProtocol;
  } else if (is(static_cast<const kiln::vta::VtaStepLimitError *>(nullptr))) {
    what = "VtaStepLimitError", code = kVtaStepLimit;
  } else if (is(static_cast<const kiln::vta::VtaRuntimeError *>(nullptr))) {
    what = "VtaRuntimeError", code = kVtaRuntime;
  }
  throw deploy::KernelError(code, std::string(what) + ": " + e.what());
}

// Modelled seconds of every run on one back end, the clock its timings are read from.
struct ModelClock {
  double seconds = 0;
};

class VtaKernel final : public DeviceKernel {
 public:
  VtaKernel(const ir::LoweredFunc &f, const kiln::vta::VtaConfig &cfg, std::shared_ptr<ModelClock> clock)
      : program_(f, cfg), runtime_(cfg), clock_(std::move(clock)) {}

  std::function<void()> bind(const std::vector<deploy::Tensor> &args) override {
    std::vector<codegen::vta::HostArg> host;
    for (const deploy::Tensor &t : args) host.push_back({const_cast<void *>(t.data()), t.nbytes()});
    return [this, host] {
      try {
        const kiln::vta::SimCounters c = program_.run_host(runtime_, host);
        clock_->seconds += static_cast<double>(c.total_cycles) / (program_.config().clock_mhz * 1e6);
      } catch (const kiln::vta::VtaError &e) {
        rethrow_as_kernel_error(e);
      }
    };
  }

 private:
  codegen::vta::VtaProgram program_;
  kiln::vta::Runtime runtime_;
  std::shared_ptr<ModelClock> clock_;
};

class VtaBackend final : public DeviceBackend {
 public:
  explicit VtaBackend(const std::string &target) : cfg_(codegen::vta::vta_target_config(target)) {}

  std::string name() const override { return "vta-sim"; }
  std::unique_ptr<DeviceKernel> compile(const ir::LoweredFunc &f, const std::string &target) override {
    kiln::vta::VtaConfig cfg;
    try {
      cfg = codegen::vta::vta_target_config(target);
      return std::make_unique<VtaKernel>(f, cfg, clock_);
    } catch (const codegen::vta::VtaBufferOverflowError &e) {
      throw DeviceCompileError(std::string("VtaBufferOverflowError: ") + e.what());
    } catch (const kiln::vta::VtaError &e) {
      throw DeviceCompileError(e.what());
    }
  }
  deploy::Tensor to_device(const deploy::Tensor &host) override { return host; }
  deploy::Tensor to_host(const deploy::Tensor &device) override { return device; }
  void set_threads(int) override {}
  void flush_caches(const std::vector<deploy::Tensor> &) override {}
  std::function<double()> clock() override {
    return [c = clock_] { return c->seconds; };
  }
  // The cycle model: one run is the measurement.
  bool deterministic_clock() const override { return true; }

 private:
  kiln::vta::VtaConfig cfg_;
  std::shared_ptr<ModelClock> clock_ = std::make_shared<ModelClock>();
};

}  // namespace

std::unique_ptr<DeviceBackend> make_vta_backend(const std::string &target) {
  try {
    return std::make_unique<VtaBackend>(target);
  } catch (const kiln::vta::VtaError &e) {
    throw UserError("target \"" + target + "\": " + e.what());
  }
}

void check_vta_target(const std::string &target) {
  using contracts::Json;
  auto tensor = [](std::vector<int64_t> shape) {
    return Json::object({{"shape", Json::array_of(shape)}, {"dtype", Json("int8")}});
  };
  const ops::Task task("dense_int8.vta",
                       Json::object({{"data", tensor({4, 1, 1, 16})}, {"weight", tensor({4, 1, 16, 16})}}),
                       ops::Target(contracts::Target::parse(target), 128));
  const ir::LoweredFunc f = task.lower(task.default_config(), "kiln_target_check");
  std::unique_ptr<DeviceBackend> backend = make_vta_backend(target);
  std::unique_ptr<DeviceKernel> kernel = backend->compile(f, target);
  std::vector<deploy::Tensor> t = {deploy::Tensor::empty({4, 1, 1, 16}, deploy::DType::of<int8_t>()),
                                   deploy::Tensor::empty({4, 1, 16, 16}, deploy::DType::of<int8_t>()),
                                   deploy::Tensor::empty({4, 4, 1, 16}, deploy::DType::of<int8_t>())};
  int8_t *x = t[0].data_as<int8_t>(), *w = t[1].data_as<int8_t>(), *y = t[2].data_as<int8_t>();
  for (int i = 0; i < 64; ++i) x[i] = static_cast<int8_t>(i * 7 % 256 - 128);
  for (int i = 0; i < 1024; ++i) w[i] = static_cast<int8_t>(i * 13 % 256 - 128);
  kernel->bind(t)();
  for (int n = 0; n < 4; ++n)
    for (int m = 0; m < 64; ++m) {
      int32_t s = 0;
      for (int k = 0; k < 16; ++k) s += int32_t{x[n * 16 + k]} * int32_t{w[m * 16 + k]};
      const int8_t want = static_cast<int8_t>(std::min(127, std::max(0, s >> 8)));
      if (y[n * 64 + m] != want) {
        throw UserError("the VTA GEMM test computed " + std::to_string(y[n * 64 + m]) + " instead of " +
                        std::to_string(want) + " at row " + std::to_string(n) + ", column " + std::to_string(m));
      }
    }
}

}  // namespace kiln::rpc
