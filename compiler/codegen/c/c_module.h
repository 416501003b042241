#pragma once
// CModule: a lowered function compiled to C by codegen_c, built into a shared library with the
// system C compiler and loaded into this process with deploy::Module::load, like a library the
// LLVM back end exports. Tests use it to run the C back end against the interpreter; other back
// ends can use it as a host fallback.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "deploy/module.h"
#include "deploy/tensor.h"

namespace kiln::codegen {

class CModule {
 public:
  // Generates the C source of `f`, compiles it in a new temporary directory with
  // `<compiler> -O2 -std=c99 -fwrapv -shared -fPIC -o lib.so src.c -lm` and loads the library.
  // `compiler` is the path or name of one program. Throws UserError carrying the compiler's
  // messages when compilation fails or the library does not load, and what codegen_c throws.
  explicit CModule(const ir::LoweredFunc &f, const std::string &compiler = "cc");
  // Unloads the library and removes the temporary directory.
  ~CModule();
  CModule(const CModule &) = delete;
  CModule &operator=(const CModule &) = delete;

  // Calls the entry point with `args` and returns its KilnStatus: 0, kKilnErrorArgument when it
  // rejects the arguments, kKilnErrorAssert or kKilnErrorAlloc when the kernel fails (see
  // last_error()).
  int32_t call(const std::vector<deploy::Tensor> &args) const;
  // The loaded library.
  const deploy::Module &module() const { return module_; }

  // The generated C source.
  std::string source() const { return source_; }
  std::string get_source() const { return source_; }
  // The message of the entry point's last failure ("" if none).
  std::string last_error() const;

 private:
  void cleanup() noexcept;

  std::string name_;
  std::string source_;
  std::string dir_;
  deploy::Module module_;
};

}  // namespace kiln::codegen
