#pragma once
// build(): a schedule lowered and compiled for a CPU in one call, and run on tensors in one more;
// build_and_run() does both. What kiln.build returns from Python is this object.
//
//   auto f = driver::build(*s, {A, B, C}, "llvm", "vadd");
//   f({a, b, c});                                  // deploy::Tensors: inputs, then outputs
//
// The checks of the arguments are those of the compiled entry point (lower/make_packed_api.h:
// count, rank, dtype, every extent, strides, alignment), the one description of the calling
// contract that every back end and the interpreter share. A call they reject throws
// deploy::KernelError (a UserError) whose message names the function and the argument, followed by
// the function's signature and what was given:
//   "vadd: argument 3 (C): dimension 0 must be n (dimension 0 of argument 1 (A)); signature
//    vadd(A: float32[n], B: float32[n], C: float32[n]); given (float32[8], float32[8], float32[4])"
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/ir/function.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "deploy/c_abi.h"
#include "deploy/tensor.h"

namespace kiln::driver {

// Lowered functions compiled into this process, callable on tensors. Copies share the code.
class BuiltFunction {
 public:
  // Compiles `funcs` (distinct names; the first is the entry) for options.target.
  BuiltFunction(std::vector<ir::LoweredFunc> funcs, codegen::LLVMBuildOptions options);

  // Runs the entry function on `args`, inputs then outputs in the order of its parameters.
  void operator()(const std::vector<deploy::Tensor> &args) const { call(entry_name(), args); }
  void call(const std::string &name, const std::vector<deploy::Tensor> &args) const;
  // The same on C descriptors (deploy/c_abi.h), for callers whose memory is not a deploy::Tensor.
  void call(const std::string &name, const std::vector<KilnArg> &args) const;

  const std::string &entry_name() const { return funcs_->front().name; }
  const std::vector<ir::LoweredFunc> &funcs() const { return *funcs_; }
  const codegen::LLVMBuildOptions &options() const { return *options_; }
  const codegen::LLVMModule &module() const { return *module_; }

 private:
  std::shared_ptr<const std::vector<ir::LoweredFunc>> funcs_;
  std::shared_ptr<const codegen::LLVMBuildOptions> options_;
  std::shared_ptr<const codegen::LLVMModule> module_;
};

// Lowers `sch` with its argument tensors into a function called `name` and compiles it for
// `target` (an "llvm ..." target that runs on this host). Throws ScheduleError for an illegal
// schedule, UserError for a bad target.
BuiltFunction build(const te::Schedule &sch, const std::vector<te::Tensor> &args, const std::string &target = "llvm",
                    const std::string &name = "default_function");

// build(sch, args, target) run once on `tensors`.
void build_and_run(const te::Schedule &sch, const std::vector<te::Tensor> &args,
                   const std::vector<deploy::Tensor> &tensors, const std::string &target = "llvm");

}  // namespace kiln::driver
