#pragma once
// The LLVM back end: lowered functions as one LLVM module for a CPU target.
//
// For each function `name` (made a C identifier) the module holds
//   int32_t name__entry(const KilnArg *args, int32_t num_args);
//       the packed entry point (deploy/c_abi.h): the argument checks of lower::make_packed_api,
//       then the kernel; exported only as the alias kiln_fn_<name>;
//   int32_t name__kernel(T *noalias A, ..., <size vars>);
//       the kernel, with one function name__parallel_<k> per outermost parallel loop, called
//       through the runtime's parallel_for;
//   name.info
//       its KilnFunctionInfo: name, signature and parameter list;
// and once per module `const KilnModuleInfo kiln_module_info`. Only the kiln_fn_ aliases and
// kiln_module_info are exported; everything else is internal to the module.
//
// Semantics follow the interpreter: integer arithmetic wraps; Div/Mod truncate and FloorDiv/
// FloorMod round down, with x / -1 == -x and division by zero producing an unspecified value
// rather than a trap; float-to-integer casts saturate; float16 is stored as half and computed as
// float; if_then_else evaluates only the taken branch (per lane, through masked memory accesses,
// for vector conditions). Vector IR stays vector: a load or store whose index is a ramp of
// stride 1 is one (masked) vector access, aligned where the index is provably a multiple of the
// lanes; a load of one element for all lanes is a scalar load (under a branch when masked); a load
// of a constant stride of 2 to 4 is a masked contiguous load and a shuffle; other indices become
// gathers and scatters. Buffers do not alias each other (noalias
// parameters and alias scopes). ThreadBinding loops run serially; a barrier is a UserError.
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/llvm/llvm_target.h"
#include "compiler/ir/function.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

struct LLVMCodegenOptions {
  // Let LLVM fuse a multiply and an add into one fma (like -ffp-contract=fast): faster, and
  // results may differ from the interpreter in the last bits.
  bool fp_contract = true;
  // exp, log, tanh, sigmoid and erf on float32 (and float16, computed as float) become inline
  // polynomial approximations that vectorize, instead of calls to libm one lane at a time. They
  // are within 2 ULP of the correctly rounded result over the whole float range, subnormal
  // inputs and results included, and handle infinities and NaN as libm does (docs/compiler.md).
  // Off: libm's results, one call per lane.
  bool approx_math = true;
};

// Builds the module for `funcs` in `context`, with `tm`'s triple and data layout. Throws UserError
// for two functions exported under one symbol or a function this back end cannot run (a GPU
// barrier), ExprError for a size variable no argument gives, InternalError for IR that is not
// lowered loop IR.
std::unique_ptr<llvm::Module> codegen_llvm(const std::vector<ir::LoweredFunc> &funcs, const LLVMTarget &target,
                                           llvm::TargetMachine &tm, llvm::LLVMContext &context,
                                           const LLVMCodegenOptions &options = {});

}  // namespace kiln::codegen
