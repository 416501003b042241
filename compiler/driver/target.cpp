#include "compiler/driver/target.h"

#include <string>

#include "compiler/codegen/llvm/llvm_target.h"

namespace kiln::driver {

ops::Target resolve_target(std::string_view text) {
  contracts::Target target = contracts::Target::parse(text);
  int vector_bits = 128;
  if (target.kind() == "llvm") vector_bits = codegen::LLVMTarget::parse(target.str()).vector_bits();
  return ops::Target(std::move(target), vector_bits);
}

std::string concrete_target(std::string_view text) { return codegen::resolve_native(std::string(text)); }

std::string host_cpu_name() { return codegen::host_cpu_name(); }

}  // namespace kiln::driver
