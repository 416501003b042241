#pragma once
// The C back end: a lowered function as one self-contained C99 translation unit.
//
// The unit includes only standard headers and holds
//   int32_t <name>(<T>* restrict <param>..., <int type> <size var>...);
//       the kernel: params in f.params order, then f.size_vars; returns 0, or -1 when an
//       AssertStmt fails or an allocation cannot be made;
//   const char *<name>_last_error(void);
//       the message of the last failure;
//   int32_t <name>_packed(void* const* buffers, const int64_t* size_values);
//       the kernel called with one data pointer per param and one int64 per size variable.
// float16 data is stored as uint16_t and computed in float; vectors are scalarized lane by lane;
// thread loops run as serial loops. The code assumes wrapping signed arithmetic (-fwrapv) to match
// the interpreter on overflow. Output is deterministic: the same IR gives the same text.
#include <string>

#include "compiler/ir/function.h"

namespace kiln::codegen {

// Throws UserError for a function the C back end cannot run (one with a sync_threads barrier),
// InternalError for IR that is not lowered loop IR.
std::string codegen_c(const ir::LoweredFunc &f);

// The C identifier of the kernel codegen_c emits for a function named `name` (the packed entry
// and the error accessor add "_packed" and "_last_error").
std::string c_function_name(const std::string &name);

}  // namespace kiln::codegen
