#include "compiler/driver/build.h"

#include <sstream>
#include <utility>

#include "compiler/lower/lower.h"
#include "deploy/module.h"

namespace kiln::driver {
namespace {

// "(float32[8], float32[8], float32[4])": the dtypes and shapes of a call's arguments.
std::string describe(const std::vector<KilnArg> &args) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < args.size(); ++i) {
    const KilnArg &a = args[i];
    os << (i ? ", " : "")
       << deploy::DType{static_cast<deploy::DType::Code>(a.dtype_code), a.dtype_bits, a.dtype_lanes}.to_string() << "[";
    for (int32_t d = 0; d < a.ndim && a.shape; ++d) os << (d ? ", " : "") << a.shape[d];
    os << "]";
  }
  os << ")";
  return os.str();
}

}  // namespace

BuiltFunction::BuiltFunction(std::vector<ir::LoweredFunc> funcs, codegen::LLVMBuildOptions options) {
  if (funcs.empty()) throw UserError("build: no function to compile");
  funcs_ = std::make_shared<const std::vector<ir::LoweredFunc>>(std::move(funcs));
  options_ = std::make_shared<const codegen::LLVMBuildOptions>(std::move(options));
  module_ = std::make_shared<const codegen::LLVMModule>(*funcs_, *options_);
}

void BuiltFunction::call(const std::string &name, const std::vector<deploy::Tensor> &args) const {
  call(name, deploy::to_kiln_args(args));
}

void BuiltFunction::call(const std::string &name, const std::vector<KilnArg> &args) const {
  const deploy::Module &m = module_->module();
  KilnPackedFunc fn = m.get_function(name);
  const int32_t status = fn(args.data(), static_cast<int32_t>(args.size()));
  if (status == 0) return;
  deploy::KernelError e = m.kernel_error(name, status);
  if (status != kKilnErrorArgument) throw e;
  throw deploy::KernelError(status, std::string(e.what()) + "; given " + describe(args));
}

BuiltFunction build(const te::Schedule &sch, const std::vector<te::Tensor> &args, const std::string &target,
                    const std::string &name) {
  codegen::LLVMBuildOptions options;
  options.target = target;
  return BuiltFunction({lower::lower(sch, args, name)}, std::move(options));
}

void build_and_run(const te::Schedule &sch, const std::vector<te::Tensor> &args,
                   const std::vector<deploy::Tensor> &tensors, const std::string &target) {
  build(sch, args, target)(tensors);
}

}  // namespace kiln::driver
