#pragma once
// LLVMJit: compiles LLVM modules in process for the host CPU (ORC LLJIT), or links object files
// compiled for it, and hands out the addresses of their functions. LLVM's headers stay out of this one, so that code
// using the JIT does not see LLVM; only the code that builds modules does.
#include <cstdint>
#include <memory>
#include <string>

#include "contracts/error.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln::codegen {

// The JIT could not be created, a module was rejected, or a symbol was not found. The modules and
// symbol names come from Kiln's own code generator, so each of these is a bug in Kiln.
class LLVMJitError : public InternalError {
 public:
  using InternalError::InternalError;
};

class LLVMJit {
 public:
  // A JIT for the host CPU. Symbols not defined by added modules resolve against the running
  // process (libc, libm). The native target is initialised once per process, thread-safely.
  LLVMJit();
  LLVMJit(const LLVMJit &) = delete;
  LLVMJit &operator=(const LLVMJit &) = delete;
  ~LLVMJit();

  // The host's target triple and data layout, for building modules this JIT accepts.
  std::string target_triple() const;
  std::string data_layout() const;

  // Verifies `module` and takes it, with the context it was built in, for compilation. A module
  // without a data layout or triple gets the host's. Throws LLVMJitError if the module is invalid,
  // belongs to another context or defines a symbol that is already defined.
  void add_module(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context);

  // Takes a relocatable object file for the host (the bytes of an ELF .o, as the LLVM back end
  // emits it) and links it in when one of its symbols is first looked up. Throws LLVMJitError if
  // the object is malformed or defines a symbol that is already defined.
  void add_object_file(const std::string &object, const std::string &name);

  // The address of a symbol defined by an added module, compiling it on first use. Throws
  // LLVMJitError when it is not defined.
  uint64_t lookup(const std::string &name);

  template <class Fn>
  Fn *lookup_function(const std::string &name) {
    return reinterpret_cast<Fn *>(static_cast<uintptr_t>(lookup(name)));
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen
