#pragma once
// Module: compiled Kiln functions, loaded from a shared library (or handed over by the compiler's
// JIT), listed with their signatures and called with tensors. See deploy/c_abi.h for the ABI.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "contracts/error.h"
#include "deploy/c_abi.h"
#include "deploy/tensor.h"

namespace kiln::deploy {

// A library could not be loaded, is not a Kiln module, or has no function of a given name: the
// caller named the wrong file or function.
class ModuleError : public UserError {
 public:
  using UserError::UserError;
};

// A compiled function rejected its arguments or failed while running. code() is its KilnStatus.
class KernelError : public UserError {
 public:
  KernelError(int32_t code, const std::string &message) : UserError(message), code_(code) {}
  int32_t code() const { return code_; }

 private:
  int32_t code_;
};

struct ParamInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // -1 where the extent is symbolic
};

struct FunctionInfo {
  std::string name;
  std::string signature;  // "gemm(A: float32[n, k], B: float32[k, m], C: float32[n, m])"
  std::vector<ParamInfo> params;
};

// The C descriptors of `tensors`, pointing into them (they must outlive the result).
std::vector<KilnArg> to_kiln_args(const std::vector<Tensor> &tensors);

class Module {
 public:
  // An empty module with no functions.
  Module() = default;

  // dlopen()s a shared library made by the compiler (export_library), checks its ABI version and
  // installs the runtime (the process-wide thread pool) into it. Throws ModuleError. `keep` (if
  // any) lives until the library is closed: the file behind `path` when its name must not be
  // reused while the library is loaded (dlopen() hands back an open library of the same name).
  static Module load(const std::string &path, std::shared_ptr<void> keep = nullptr);

  // A module whose code already lives in this process (the compiler's JIT). `owner` keeps the
  // code alive for as long as the module or a copy of it exists. Installs the runtime.
  static Module from_info(const KilnModuleInfo *info, std::shared_ptr<void> owner);

  bool defined() const { return state_ != nullptr; }
  const std::vector<FunctionInfo> &functions() const;
  // The function called `name`, or nullptr.
  const FunctionInfo *find(const std::string &name) const;
  // The packed entry point of `name`; throws ModuleError if there is none.
  KilnPackedFunc get_function(const std::string &name) const;
  // The target the module was compiled for.
  std::string target() const;

  // Calls `name` with `args` (inputs and outputs in the order of its parameters). The compiled
  // entry point checks the arguments (count, null data, alignment, rank, dtype, extents,
  // strides). Throws kernel_error() when it returns a nonzero status, ModuleError for an unknown
  // name.
  void call(const std::string &name, const std::vector<Tensor> &args) const;
  // The same without the exceptions: the status (0 on success); see last_error().
  int32_t call_status(const std::string &name, const std::vector<Tensor> &args) const;

  // The message of the latest failure of a call into this module.
  std::string last_error() const;
  // The error for `status`, a nonzero status that `name` just returned: last_error(), followed by
  // "; signature " and the function's signature when the arguments were rejected.
  KernelError kernel_error(const std::string &name, int32_t status) const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

}  // namespace kiln::deploy
