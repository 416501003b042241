#include "deploy/module.h"

#include <dlfcn.h>

#include "deploy/thread_pool.h"

namespace kiln::deploy {

namespace {

// Closes a dlopen()ed library when the last module that uses it goes away, then releases what
// keeps its file's name taken.
struct Library {
  void *handle = nullptr;
  std::shared_ptr<void> keep;
  ~Library() {
    if (handle) dlclose(handle);
    keep.reset();
  }
};

}  // namespace

std::vector<KilnArg> to_kiln_args(const std::vector<Tensor> &tensors) {
  std::vector<KilnArg> args(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor &t = tensors[i];
    KilnArg &a = args[i];
    a.data = t.defined() ? const_cast<void *>(t.data()) : nullptr;
    a.ndim = t.ndim();
    a.shape = t.shape().data();
    a.strides = t.strides().data();
    a.dtype_code = static_cast<uint8_t>(t.dtype().code);
    a.dtype_bits = t.dtype().bits;
    a.dtype_lanes = t.dtype().lanes;
  }
  return args;
}

struct Module::State {
  std::shared_ptr<void> owner;
  const KilnModuleInfo *info = nullptr;
  std::vector<FunctionInfo> functions;
  std::vector<KilnPackedFunc> entries;
};

Module Module::from_info(const KilnModuleInfo *info, std::shared_ptr<void> owner) {
  if (info == nullptr) throw ModuleError("kiln module: no module info");
  if (info->abi_version != KILN_ABI_VERSION) {
    throw ModuleError("kiln module: ABI version " + std::to_string(info->abi_version) +
                      ", this runtime reads version " + std::to_string(KILN_ABI_VERSION));
  }
  auto state = std::make_shared<State>();
  state->owner = std::move(owner);
  state->info = info;
  for (int32_t i = 0; i < info->num_functions; ++i) {
    const KilnFunctionInfo *fi = info->functions[i];
    FunctionInfo f;
    f.name = fi->name;
    f.signature = fi->signature;
    for (int32_t p = 0; p < fi->num_params; ++p) {
      const KilnParamInfo &pi = fi->params[p];
      ParamInfo param;
      param.name = pi.name;
      param.dtype.code = static_cast<DType::Code>(pi.dtype_code);
      param.dtype.bits = pi.dtype_bits;
      param.dtype.lanes = pi.dtype_lanes;
      param.shape.assign(pi.shape, pi.shape + pi.ndim);
      f.params.push_back(std::move(param));
    }
    state->functions.push_back(std::move(f));
    state->entries.push_back(fi->func);
  }
  if (info->runtime_api) *info->runtime_api = KilnGetRuntimeApi();
  Module m;
  m.state_ = std::move(state);
  return m;
}

Module Module::load(const std::string &path, std::shared_ptr<void> keep) {
  auto library = std::make_shared<Library>();
  library->keep = std::move(keep);
  library->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library->handle) {
    const char *why = dlerror();
    throw ModuleError("kiln module: cannot load " + path + ": " + (why ? why : "unknown error"));
  }
  const auto *info = static_cast<const KilnModuleInfo *>(dlsym(library->handle, KILN_MODULE_INFO_SYMBOL));
  if (!info) throw ModuleError("kiln module: " + path + " is not a Kiln module (no " KILN_MODULE_INFO_SYMBOL ")");
  try {
    return from_info(info, library);
  } catch (const ModuleError &e) {
    throw ModuleError(std::string(e.what()) + " (in " + path + ")");
  }
}

const std::vector<FunctionInfo> &Module::functions() const {
  static const std::vector<FunctionInfo> none;
  return state_ ? state_->functions : none;
}

const FunctionInfo *Module::find(const std::string &name) const {
  for (const auto &f : functions()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

KilnPackedFunc Module::get_function(const std::string &name) const {
  if (state_) {
    for (size_t i = 0; i < state_->functions.size(); ++i) {
      if (state_->functions[i].name == name) return state_->entries[i];
    }
  }
  std::string names;
  for (const auto &f : functions()) names += (names.empty() ? "" : ", ") + f.name;
  throw ModuleError("kiln module: no function " + name + " (functions: " + (names.empty() ? "none" : names) + ")");
}

std::string Module::target() const { return state_ && state_->info->target ? state_->info->target : ""; }

int32_t Module::call_status(const std::string &name, const std::vector<Tensor> &args) const {
  KilnPackedFunc fn = get_function(name);
  std::vector<KilnArg> c_args = to_kiln_args(args);
  return fn(c_args.data(), static_cast<int32_t>(c_args.size()));
}

void Module::call(const std::string &name, const std::vector<Tensor> &args) const {
  const int32_t rc = call_status(name, args);
  if (rc != 0) throw kernel_error(name, rc);
}

KernelError Module::kernel_error(const std::string &name, int32_t status) const {
  std::string message = last_error();
  if (status == kKilnErrorArgument) {
    if (const FunctionInfo *f = find(name)) message += "; signature " + f->signature;
  }
  return KernelError(status, message);
}

std::string Module::last_error() const {
  if (!state_ || !state_->info->last_error) return "";
  const char *m = state_->info->last_error();
  return m ? m : "";
}

}  // namespace kiln::deploy
