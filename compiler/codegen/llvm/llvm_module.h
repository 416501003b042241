#pragma once
// Compiling lowered functions with LLVM for a CPU: in process (ORC JIT) to measure and run them,
// or to an object file and a shared library to deploy them. Both go through the same steps:
// codegen_llvm, LLVM's O3 pipeline tuned for the target (new pass manager), and the target's code
// generator; the JIT links the very object file a library would contain.
//
// Compilations are independent (each has its own LLVMContext and TargetMachine), so several may
// run at once on different threads.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/codegen_llvm.h"
#include "compiler/codegen/llvm/llvm_target.h"
#include "compiler/ir/function.h"
#include "deploy/c_abi.h"
#include "deploy/module.h"
#include "deploy/tensor.h"

namespace kiln::codegen {

struct LLVMBuildOptions {
  std::string target = "llvm -mcpu=native";  // see LLVMTarget
  int opt_level = 3;                         // 0 to 3, for LLVM's pipeline and code generator
  bool fp_contract = true;                   // see LLVMCodegenOptions
  bool approx_math = true;                   // see LLVMCodegenOptions; false for libm's results
  // Let LLVM unroll loops on its own as well. Off by default: the schedule decides unrolling,
  // and LLVM's full unrolling of small nests turns them into blocks so large that its SLP
  // vectorizer and load elimination take seconds.
  bool llvm_unroll = false;
  bool keep_llvm_ir = false;   // keep the optimised LLVM IR as text
  bool keep_assembly = false;  // keep the assembly (a second run of the code generator)
};

// Wall-clock milliseconds of each step of one compilation.
struct LLVMCompileTimes {
  double codegen_ms = 0;   // Kiln IR to LLVM IR
  double optimize_ms = 0;  // LLVM's optimisation pipeline
  double emit_ms = 0;      // machine code (the object file)
  double link_ms = 0;      // JIT linking and symbol lookup, or the system linker for a library
  double total_ms() const { return codegen_ms + optimize_ms + emit_ms + link_ms; }
};

// Functions compiled into this process.
class LLVMModule {
 public:
  // Compiles `funcs` (distinct names). Throws UserError for a target that does not run on this
  // host or a function the back end cannot run, InternalError if LLVM rejects what was built.
  explicit LLVMModule(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options = {});
  explicit LLVMModule(const ir::LoweredFunc &f, const LLVMBuildOptions &options = {});
  ~LLVMModule();
  LLVMModule(const LLVMModule &) = delete;
  LLVMModule &operator=(const LLVMModule &) = delete;

  // The functions as a runtime module (it keeps the code alive, also after this object is gone).
  const deploy::Module &module() const;
  // The packed entry point of `name`: int32_t name(const KilnArg *args, int32_t num_args).
  KilnPackedFunc function(const std::string &name) const;
  // Calls `name` on `args`; throws deploy::KernelError with the function's message on failure.
  void call(const std::string &name, const std::vector<deploy::Tensor> &args) const;
  // The same returning the status; see last_error().
  int32_t call_status(const std::string &name, const std::vector<deploy::Tensor> &args) const;
  std::string last_error() const;

  const LLVMTarget &target() const;
  const LLVMCompileTimes &times() const;
  // The optimised LLVM IR and the assembly, when the options asked to keep them ("" otherwise).
  const std::string &llvm_ir() const;
  const std::string &assembly() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes a relocatable object file with `funcs` for options.target to `path`.
LLVMCompileTimes export_object(const std::vector<ir::LoweredFunc> &funcs, const std::string &path,
                               const LLVMBuildOptions &options = {});

// Writes a shared library with `funcs` to `path`, linked by `cc -shared` (the system C compiler
// driver, or the program given) against libm. deploy::Module::load() runs it in any process.
// Throws UserError carrying the linker's messages when linking fails.
LLVMCompileTimes export_library(const std::vector<ir::LoweredFunc> &funcs, const std::string &path,
                                const LLVMBuildOptions &options = {}, const std::string &cc = "cc");

// The LLVM IR of `funcs` as text, before or after optimisation.
std::string emit_llvm_ir(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options = {},
                         bool optimized = true);
// The assembly of `funcs` for options.target.
std::string emit_assembly(const std::vector<ir::LoweredFunc> &funcs, const LLVMBuildOptions &options = {});

}  // namespace kiln::codegen
