#pragma once
// make_packed_api: a lowered function as the entry point of deploy/c_abi.h, with every check of
// its arguments written out as IR. The interpreter and every back end run this one description
// of the calling contract, so they accept and reject the same calls with the same messages.
//
// The entry's body reads the arguments from `args` (a `const KilnArg *`) and `num_args` through
// the intrinsics below, and checks, in this order, each as an AssertStmt whose message starts
// with the function's name and names the argument ("gemm: argument 2 (B): expected dtype
// float32"):
//   - the argument count and that the argument list is not null;
//   - for each argument: its data pointer (not null, kTensorAlignment-byte aligned), rank, dtype,
//     shape pointer, and that no extent is negative;
//   - each size variable: bound from the first argument that has it as a whole dimension; it must
//     fit its type;
//   - every other extent: equal to its constant or to its expression of the size variables;
//   - the strides: a null strides pointer means compact row-major, which must agree with the
//     buffer's declared strides; given strides must equal the declared ones (or be compact when
//     the buffer declares none), except in dimensions of extent 1.
// Then it binds each parameter's data variable to the argument's data pointer and runs the
// original body inside an AttrStmt with key kKernelBody. An assertion that fails before that
// attribute is an argument error (kKilnErrorArgument); one inside it is the kernel's own
// (kKilnErrorAssert). A back end may compile the attribute's body as a separate function taking
// the parameters' data pointers and the size variables, as the original LoweredFunc declares them.
#include <string>

#include "compiler/ir/function.h"

namespace kiln::lower {

// The fields of KilnArg, numbered in their order in the struct.
enum class ArgField : int { Data = 0, NDim = 1, Shape = 2, Strides = 3, DTypeCode = 4, DTypeBits = 5, DTypeLanes = 6 };

namespace intrinsic {
// arg_field(args, i, field): field `field` (an ArgField) of args[i]: a handle for Data, Shape and
// Strides, int32 for NDim, uint8 for DTypeCode and DTypeBits, uint16 for DTypeLanes.
// arg_field(args, i, field, d) with field Shape or Strides: the int64 element d of that array.
// i, field and d are int32 constants.
constexpr const char *kArgField = "arg_field";
// isnull(h): whether the handle h is the null pointer (bool).
constexpr const char *kIsNull = "isnull";
// is_aligned(h, bytes): whether the address h is a multiple of the constant `bytes` (bool).
constexpr const char *kIsAligned = "is_aligned";
}  // namespace intrinsic

// The key of the AttrStmt that holds the kernel: the original body of the function.
constexpr const char *kKernelBody = "kernel_body";

struct PackedFunc {
  // The original function (name, params, size_vars) with the entry as its body.
  ir::LoweredFunc func;
  ir::Var args;      // handle: const KilnArg *
  ir::Var num_args;  // int32
  // The symbol a library exports the entry under: KILN_FUNCTION_SYMBOL_PREFIX followed by the
  // function's name with every character other than a letter, digit or '_' made '_'.
  std::string symbol;
  // "gemm(A: float32[n, k], B: float32[k, m], C: float32[n, m])".
  std::string signature;
};

// Throws ExprError when a size variable is not a whole dimension of any parameter (its value
// cannot be taken from the arguments).
PackedFunc make_packed_api(const ir::LoweredFunc &f);

}  // namespace kiln::lower
