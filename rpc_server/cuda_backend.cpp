#include "rpc_server/cuda_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "compiler/codegen/cuda/codegen_cuda.h"
#include "compiler/codegen/cuda/nvrtc_compiler.h"
#include "compiler/ir/error.h"
#include "deploy/module.h"

namespace kiln::rpc {

// The few driver API types and entry points the back end uses, declared here so that the runner
// needs neither the toolkit's headers nor its stub library (the ABI is the driver's, stable
// across releases for these _v2 symbols).
namespace cu {
using Result = int;
using Device = int;
using DevicePtr = unsigned long long;
struct ContextSt;
struct ModuleSt;
struct FunctionSt;
struct EventSt;
struct StreamSt;
using Context = ContextSt *;
using Module = ModuleSt *;
using Function = FunctionSt *;
using Event = EventSt *;
using Stream = StreamSt *;

constexpr Result kSuccess = 0;
constexpr Result kErrorNoDevice = 100;
constexpr Result kErrorIllegalAddress = 700;
constexpr Result kErrorLaunchOutOfResources = 701;
constexpr Result kErrorLaunchTimeout = 702;
constexpr Result kErrorHardwareStackError = 714;
constexpr Result kErrorIllegalInstruction = 715;
constexpr Result kErrorMisalignedAddress = 716;
constexpr Result kErrorInvalidAddressSpace = 717;
constexpr Result kErrorInvalidPc = 718;
constexpr Result kErrorLaunchFailed = 719;

constexpr int kAttrClockRate = 13;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrMemoryClockRate = 36;
constexpr int kAttrMemoryBusWidth = 37;
constexpr int kAttrL2CacheSize = 38;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr unsigned kEventDefault = 0;
}  // namespace cu

// The loaded driver library and its entry points.
class CudaDriver {
 public:
  explicit CudaDriver(const std::string &library) : library_(library) {
    handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw UserError("no CUDA driver on this host: " + library + " not found");
    load(cuInit, "cuInit");
    load(cuDriverGetVersion, "cuDriverGetVersion");
    load(cuDeviceGetCount, "cuDeviceGetCount");
    load(cuDeviceGet, "cuDeviceGet");
    load(cuDeviceGetName, "cuDeviceGetName");
    load(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    load(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
    load(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    load(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    load(cuCtxSetCurrent, "cuCtxSetCurrent");
    load(cuCtxSynchronize, "cuCtxSynchronize");
    load(cuModuleLoadData, "cuModuleLoadData");
    load(cuModuleUnload, "cuModuleUnload");
    load(cuModuleGetFunction, "cuModuleGetFunction");
    load(cuLaunchKernel, "cuLaunchKernel");
    load(cuMemAlloc, "cuMemAlloc_v2");
    load(cuMemFree, "cuMemFree_v2");
    load(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    load(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    load(cuMemsetD8, "cuMemsetD8_v2");
    load(cuEventCreate, "cuEventCreate");
    load(cuEventDestroy, "cuEventDestroy_v2");
    load(cuEventRecord, "cuEventRecord");
    load(cuEventSynchronize, "cuEventSynchronize");
    load(cuEventElapsedTime, "cuEventElapsedTime");
    load(cuGetErrorName, "cuGetErrorName");
    load(cuGetErrorString, "cuGetErrorString");
    check(cuInit(0), "cuInit");
  }
  ~CudaDriver() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  CudaDriver(const CudaDriver &) = delete;
  CudaDriver &operator=(const CudaDriver &) = delete;

  // "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
  std::string describe(cu::Result r) const {
    const char *name = nullptr;
    const char *text = nullptr;
    cuGetErrorName(r, &name);
    cuGetErrorString(r, &text);
    std::string out = name != nullptr ? name : "CUDA error " + std::to_string(r);
    if (text != nullptr) out += std::string(": ") + text;
    return out;
  }

  // Throws UserError saying what `call` failed with.
  void check(cu::Result r, const char *call) const {
    if (r != cu::kSuccess) throw UserError(std::string("CUDA driver: ") + call + " failed: " + describe(r));
  }

  cu::Result (*cuInit)(unsigned) = nullptr;
  cu::Result (*cuDriverGetVersion)(int *) = nullptr;
  cu::Result (*cuDeviceGetCount)(int *) = nullptr;
  cu::Result (*cuDeviceGet)(cu::Device *, int) = nullptr;
  cu::Result (*cuDeviceGetName)(char *, int, cu::Device) = nullptr;
  cu::Result (*cuDeviceGetAttribute)(int *, int, cu::Device) = nullptr;
  cu::Result (*cuDeviceTotalMem)(size_t *, cu::Device) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRetain)(cu::Context *, cu::Device) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRelease)(cu::Device) = nullptr;
  cu::Result (*cuCtxSetCurrent)(cu::Context) = nullptr;
  cu::Result (*cuCtxSynchronize)() = nullptr;
  cu::Result (*cuModuleLoadData)(cu::Module *, const void *) = nullptr;
  cu::Result (*cuModuleUnload)(cu::Module) = nullptr;
  cu::Result (*cuModuleGetFunction)(cu::Function *, cu::Module, const char *) = nullptr;
  cu::Result (*cuLaunchKernel)(cu::Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               cu::Stream, void **, void **) = nullptr;
  cu::Result (*cuMemAlloc)(cu::DevicePtr *, size_t) = nullptr;
  cu::Result (*cuMemFree)(cu::DevicePtr) = nullptr;
  cu::Result (*cuMemcpyHtoD)(cu::DevicePtr, const void *, size_t) = nullptr;
  cu::Result (*cuMemcpyDtoH)(void *, cu::DevicePtr, size_t) = nullptr;
  cu::Result (*cuMemsetD8)(cu::DevicePtr, unsigned char, size_t) = nullptr;
  cu::Result (*cuEventCreate)(cu::Event *, unsigned) = nullptr;
  cu::Result (*cuEventDestroy)(cu::Event) = nullptr;
  cu::Result (*cuEventRecord)(cu::Event, cu::Stream) = nullptr;
  cu::Result (*cuEventSynchronize)(cu::Event) = nullptr;
  cu::Result (*cuEventElapsedTime)(float *, cu::Event, cu::Event) = nullptr;
  cu::Result (*cuGetErrorName)(cu::Result, const char **) = nullptr;
  cu::Result (*cuGetErrorString)(cu::Result, const char **) = nullptr;

 private:
  template <class F>
  void load(F &fn, const char *symbol) {
    void *p = ::dlsym(handle_, symbol);
    if (p == nullptr) {
      throw UserError("the CUDA driver " + library_ + " lacks " + symbol + " (the driver is older than Kiln needs)");
    }
    fn = reinterpret_cast<F>(p);
  }

  std::string library_;
  void *handle_ = nullptr;
};

namespace {
std::atomic<bool> driver_initialized{false};
}  // namespace

std::shared_ptr<CudaDriver> load_cuda_driver(const std::string &library) {
  auto driver = std::make_shared<CudaDriver>(library);  // cuInit has succeeded
  driver_initialized = true;
  return driver;
}

bool cuda_driver_initialized() { return driver_initialized; }

CudaDeviceInfo cuda_device_info(CudaDriver &driver, int ordinal) {
  int count = 0;
  driver.check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count) {
    throw UserError("no CUDA device " + std::to_string(ordinal) + " on this host (the driver sees " +
                    std::to_string(count) + ")");
  }
  cu::Device dev = 0;
  driver.check(driver.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  CudaDeviceInfo info;
  char name[256] = {};
  driver.check(driver.cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
  info.name = name;
  auto attribute = [&](int attr) {
    int value = 0;
    driver.check(driver.cuDeviceGetAttribute(&value, attr, dev), "cuDeviceGetAttribute");
    return value;
  };
  info.compute_capability =
      attribute(cu::kAttrComputeCapabilityMajor) * 10 + attribute(cu::kAttrComputeCapabilityMinor);
  info.sm_count = attribute(cu::kAttrMultiprocessorCount);
  info.core_clock_khz = attribute(cu::kAttrClockRate);
  info.memory_clock_khz = attribute(cu::kAttrMemoryClockRate);
  info.memory_bus_bits = attribute(cu::kAttrMemoryBusWidth);
  info.l2_bytes = attribute(cu::kAttrL2CacheSize);
  size_t bytes = 0;
  driver.check(driver.cuDeviceTotalMem(&bytes, dev), "cuDeviceTotalMem");
  info.memory_bytes = static_cast<int64_t>(bytes);
  driver.check(driver.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion");
  return info;
}

std::string cuda_error_name(int code) {
  switch (code) {
    case cu::kSuccess:
      return "CUDA_SUCCESS";
    case cu::kErrorNoDevice:
      return "CUDA_ERROR_NO_DEVICE";
    case cu::kErrorIllegalAddress:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case cu::kErrorLaunchOutOfResources:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case cu::kErrorLaunchTimeout:
      return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case cu::kErrorHardwareStackError:
      return "CUDA_ERROR_HARDWARE_STACK_ERROR";
    case cu::kErrorIllegalInstruction:
      return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
    case cu::kErrorMisalignedAddress:
      return "CUDA_ERROR_MISALIGNED_ADDRESS";
    case cu::kErrorInvalidAddressSpace:
      return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
    case cu::kErrorInvalidPc:
      return "CUDA_ERROR_INVALID_PC";
    case cu::kErrorLaunchFailed:
      return "CUDA_ERROR_LAUNCH_FAILED";
    default:
      return "CUDA error " + std::to_string(code);
  }
}

bool cuda_error_is_sticky(int code) {
  return code == cu::kErrorIllegalAddress || code == cu::kErrorLaunchTimeout ||
         (code >= cu::kErrorHardwareStackError && code <= cu::kErrorLaunchFailed);
}

namespace {

// The device memory of one tensor.
struct DeviceBuffer {
  cu::DevicePtr ptr = 0;
  std::vector<int64_t> shape;
  deploy::DType dtype;
  size_t bytes = 0;
};

// The state the back end and its kernels share: the driver, the context, the allocations.
struct CudaState {
  std::shared_ptr<CudaDriver> driver;
  cu::Device device = 0;
  cu::Context context = nullptr;
  CudaDeviceInfo info;
  std::map<cu::DevicePtr, DeviceBuffer> buffers;
  bool lost = false;

  ~CudaState() {
    if (context == nullptr) return;
    driver->cuCtxSetCurrent(context);
    if (!lost) {
      for (auto &[ptr, buffer] : buffers) driver->cuMemFree(ptr);
    }
    driver->cuDevicePrimaryCtxRelease(device);
  }

  void make_current() const { driver->check(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent"); }

  // Throws deploy::KernelError for a failure of queued or launched work; a sticky one marks the
  // context lost.
  void check_kernel(cu::Result r, const std::string &what) {
    if (r == cu::kSuccess) return;
    if (cuda_error_is_sticky(r)) lost = true;
    std::string message = what + ": " + driver->describe(r);
    if (lost) message += " (the GPU context is lost; a fresh worker takes over)";
    throw deploy::KernelError(r, message);
  }

  // The device address a tensor made by to_device() stands for.
  const DeviceBuffer &buffer_of(const deploy::Tensor &handle) const {
    if (!handle.defined() || handle.dtype() != deploy::DType::of<uint64_t>() || handle.numel() != 1) {
      throw UserError("not a CUDA device tensor (a tensor made by the CUDA back end's to_device)");
    }
    const auto it = buffers.find(handle.data_as<uint64_t>()[0]);
    if (it == buffers.end()) throw UserError("not a CUDA device tensor of this back end");
    return it->second;
  }
};

// The kernel's module; a launch beyond the target's limits (threads or shared memory per block)
// is the device compiler's refusal, as NVRTC's errors are: DeviceCompileError.
codegen::CudaModule device_module(const ir::LoweredFunc &f, const codegen::CudaTarget &target) {
  try {
    return codegen::CudaModule(f, target);
  } catch (const codegen::NvrtcError &) {
    throw;
  } catch (const UserError &e) {
    throw DeviceCompileError(e.what());
  }
}

class CudaKernel final : public DeviceKernel {
 public:
  CudaKernel(std::shared_ptr<CudaState> state, const ir::LoweredFunc &f, const codegen::CudaTarget &target)
      : state_(std::move(state)), name_(f.name), params_(f.params.size()) {
    if (!f.size_vars.empty()) {
      throw UserError("function " + f.name + " has symbolic sizes; the CUDA runner measures constant shapes");
    }
    const codegen::CudaModule module = device_module(f, target);
    launch_ = module.launch();
    state_->make_current();
    state_->driver->check(state_->driver->cuModuleLoadData(&module_, module.ptx().c_str()), "cuModuleLoadData");
    state_->driver->check(state_->driver->cuModuleGetFunction(&function_, module_, module.entry_name().c_str()),
                          "cuModuleGetFunction");
  }
  ~CudaKernel() override {
    if (module_ != nullptr && !state_->lost) {
      state_->driver->cuCtxSetCurrent(state_->context);
      state_->driver->cuModuleUnload(module_);
    }
  }

  std::function<void()> bind(const std::vector<deploy::Tensor> &args) override {
    if (args.size() != params_) {
      throw UserError(name_ + ": " + std::to_string(args.size()) + " arguments for " + std::to_string(params_) +
                      " parameters");
    }
    auto pointers = std::make_shared<std::vector<cu::DevicePtr>>();
    for (const deploy::Tensor &t : args) pointers->push_back(state_->buffer_of(t).ptr);
    auto slots = std::make_shared<std::vector<void *>>();
    for (auto &p : *pointers) slots->push_back(&p);
    return [this, pointers, slots] {
      if (state_->lost) throw deploy::KernelError(cu::kErrorLaunchFailed, name_ + ": the GPU context is lost");
      const cu::Result r = state_->driver->cuLaunchKernel(
          function_, static_cast<unsigned>(launch_.grid[0]), static_cast<unsigned>(launch_.grid[1]),
          static_cast<unsigned>(launch_.grid[2]), static_cast<unsigned>(launch_.block[0]),
          static_cast<unsigned>(launch_.block[1]), static_cast<unsigned>(launch_.block[2]), 0, nullptr, slots->data(),
          nullptr);
      state_->check_kernel(r, name_ + ": the launch failed");
    };
  }

 private:
  std::shared_ptr<CudaState> state_;
  std::string name_;
  size_t params_;
  codegen::LaunchDims launch_;
  cu::Module module_ = nullptr;
  cu::Function function_ = nullptr;
};

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(const std::string &target, const std::string &library)
      : target_(codegen::parse_cuda_target(target)), state_(std::make_shared<CudaState>()) {
    state_->driver = load_cuda_driver(library);
    state_->info = cuda_device_info(*state_->driver, 0);
    if (state_->info.compute_capability != target_.compute_capability) {
      throw UserError("target \"" + target + "\" is for " + target_.arch() + ", but the GPU (" + state_->info.name +
                      ") is sm_" + std::to_string(state_->info.compute_capability));
    }
    CudaDriver &d = *state_->driver;
    d.check(d.cuDeviceGet(&state_->device, 0), "cuDeviceGet");
    d.check(d.cuDevicePrimaryCtxRetain(&state_->context, state_->device), "cuDevicePrimaryCtxRetain");
    state_->make_current();
    for (cu::Event &e : events_) d.check(d.cuEventCreate(&e, cu::kEventDefault), "cuEventCreate");
  }
  ~CudaBackend() override {
    if (state_->context == nullptr || state_->lost) return;
    state_->driver->cuCtxSetCurrent(state_->context);
    for (cu::Event e : events_) {
      if (e != nullptr) state_->driver->cuEventDestroy(e);
    }
    if (flush_ != 0) state_->driver->cuMemFree(flush_);
  }

  std::string name() const override { return "cuda"; }

  std::unique_ptr<DeviceKernel> compile(const ir::LoweredFunc &f, const std::string &target) override {
    return std::make_unique<CudaKernel>(state_, f, codegen::parse_cuda_target(target));
  }

  deploy::Tensor to_device(const deploy::Tensor &host) override {
    if (!host.is_contiguous()) throw UserError("the CUDA back end copies contiguous tensors only");
    state_->make_current();
    CudaDriver &d = *state_->driver;
    DeviceBuffer buffer;
    buffer.shape = host.shape();
    buffer.dtype = host.dtype();
    buffer.bytes = host.nbytes();
    d.check(d.cuMemAlloc(&buffer.ptr, std::max<size_t>(buffer.bytes, 1)), "cuMemAlloc");
    if (buffer.bytes > 0) {
      const cu::Result r = d.cuMemcpyHtoD(buffer.ptr, host.data(), buffer.bytes);
      if (r != cu::kSuccess) {
        d.cuMemFree(buffer.ptr);
        state_->check_kernel(r, "copying to the GPU");
      }
    }
    deploy::Tensor handle = deploy::Tensor::empty({1}, deploy::DType::of<uint64_t>());
    handle.data_as<uint64_t>()[0] = buffer.ptr;
    state_->buffers[buffer.ptr] = std::move(buffer);
    return handle;
  }

  deploy::Tensor to_host(const deploy::Tensor &device) override {
    const DeviceBuffer &buffer = state_->buffer_of(device);
    state_->make_current();
    deploy::Tensor host = deploy::Tensor::empty(buffer.shape, buffer.dtype);
    if (buffer.bytes > 0) {
      state_->check_kernel(state_->driver->cuMemcpyDtoH(host.data(), buffer.ptr, buffer.bytes), "copying from the GPU");
    }
    return host;
  }

  void fill_bytes(deploy::Tensor &device, uint8_t byte) override {
    const DeviceBuffer &buffer = state_->buffer_of(device);
    state_->make_current();
    state_->check_kernel(state_->driver->cuMemsetD8(buffer.ptr, byte, buffer.bytes), "filling GPU memory");
  }

  void set_threads(int /*threads*/) override {}

  // Evicts the L2 cache by writing a buffer twice its size, as TVM's GPU cache flush does.
  void flush_caches(const std::vector<deploy::Tensor> & /*tensors*/) override {
    state_->make_current();
    CudaDriver &d = *state_->driver;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(state_->info.l2_bytes, 1 << 20)) * 2;
    if (flush_ == 0) d.check(d.cuMemAlloc(&flush_, bytes), "cuMemAlloc");
    state_->check_kernel(d.cuMemsetD8(flush_, static_cast<unsigned char>(++flush_round_), bytes), "flushing the L2");
  }

  // CUDA events on the default stream: a reading records an event after the queued work and waits
  // for it; the clock advances by the time between consecutive events (summed in double, so that
  // long evaluations keep the events' resolution).
  std::function<double()> clock() override {
    return [this] {
      state_->make_current();
      CudaDriver &d = *state_->driver;
      cu::Event now = events_[next_];
      state_->check_kernel(d.cuEventRecord(now, nullptr), "cuEventRecord");
      state_->check_kernel(d.cuEventSynchronize(now), "waiting for the GPU");
      if (recorded_) {
        float ms = 0;
        state_->check_kernel(d.cuEventElapsedTime(&ms, events_[1 - next_], now), "cuEventElapsedTime");
        seconds_ += static_cast<double>(ms) / 1000.0;
      }
      recorded_ = true;
      next_ = 1 - next_;
      return seconds_;
    };
  }

  bool lost() const override { return state_->lost; }

 private:
  codegen::CudaTarget target_;
  std::shared_ptr<CudaState> state_;
  cu::Event events_[2] = {nullptr, nullptr};
  int next_ = 0;
  bool recorded_ = false;
  double seconds_ = 0;
  cu::DevicePtr flush_ = 0;
  unsigned flush_round_ = 0;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(const std::string &target, const std::string &library) {
  return std::make_unique<CudaBackend>(target, library);
}

}  // namespace kiln::rpc
