#pragma once
// CModule: a lowered function compiled to C by codegen_c, built into a shared library with the
// system C compiler and loaded into this process. Tests use it to run the C back end against the
// interpreter; other back ends can use it as a host fallback.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "deploy/tensor.h"

namespace kiln::codegen {

class CModule {
 public:
  // Generates the C source of `f`, compiles it in a new temporary directory with
  // `<compiler> -O2 -std=c99 -fwrapv -shared -fPIC -o lib.so src.c -lm` and loads the library.
  // `compiler` is the path or name of one program. Throws UserError carrying the compiler's
  // messages when compilation fails, and what codegen_c throws.
  explicit CModule(const ir::LoweredFunc &f, const std::string &compiler = "cc");
  // Unloads the library and removes the temporary directory.
  ~CModule();
  CModule(const CModule &) = delete;
  CModule &operator=(const CModule &) = delete;

  // Checks `args` like interp::run (count, dtypes, ranks, shapes, size variables; see
  // interp::bind_size_vars, which also explains `size_values`) and calls the packed entry point.
  // Returns the kernel's status: 0, or -1 when it failed (see last_error()).
  int32_t call(const std::vector<deploy::Tensor> &args, const std::vector<int64_t> &size_values = {}) const;

  // The generated C source.
  std::string source() const { return source_; }
  std::string get_source() const { return source_; }
  // The message of the kernel's last failure ("" if none).
  std::string last_error() const;

 private:
  using PackedFn = int32_t (*)(void *const *, const int64_t *);
  using ErrorFn = const char *(*)();

  void cleanup() noexcept;

  ir::LoweredFunc func_;
  std::string source_;
  std::string dir_;
  void *library_ = nullptr;
  PackedFn packed_ = nullptr;
  ErrorFn last_error_ = nullptr;
};

}  // namespace kiln::codegen
